"""sgsbatch from a wheel, away from the checkout (issue 18 part 4): `--help`, a dry run and a
one-round tiny run from another directory, with the checkout nowhere on the import path.

The wheel is built from this checkout (`pip wheel --no-deps`) and installed with `pip install
--no-deps --target` into a directory that goes first on PYTHONPATH; the dependencies come from
this environment. Python runs from a scratch directory, so neither the checkout nor its editable
install provides `sgsbatch`: the test checks that the package imported is the wheel's and that
`checkout_root()` finds no checkout. Only the jobs file is read from the checkout (a user file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp / "dist"), str(REPO)], capture_output=True, text=True, cwd=tmp)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp / "dist").glob("sgsbatch-*.whl")
    site = tmp / "site"
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
                          capture_output=True, text=True, cwd=tmp)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    return {**os.environ, "PYTHONPATH": str(site), "SGSBATCH_TEST_CWD": str(tmp)}


def _py(env: dict[str, str], *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=env["SGSBATCH_TEST_CWD"], timeout=timeout)


def test_the_wheel_runs_without_the_checkout(wheel_env: dict[str, str]) -> None:
    probe = _py(wheel_env, "-c", "import sgsbatch, json; from sgsbatch import checkout\n"
                "try:\n    checkout.checkout_root(); found = True\nexcept FileNotFoundError:\n    found = False\n"
                "print(json.dumps({'file': sgsbatch.__file__, 'checkout': found,"
                " 'targets': checkout.embedded_tiny_targets().is_file()}))")
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["file"].startswith(wheel_env["PYTHONPATH"]) and not seen["file"].startswith(str(REPO))
    assert seen["checkout"] is False and seen["targets"] is True  # package data is in the wheel

    assert _py(wheel_env, "-m", "sgsbatch.cli", "--help").returncode == 0
    runs = Path(wheel_env["SGSBATCH_TEST_CWD"]) / "runs"
    common = ["--set", f"run.runs_dir={runs}", "--set", "run.executor=local", "--set", "run.rounds=1"]
    dry = _py(wheel_env, "-m", "sgsbatch.cli", "launch", str(REPO / "jobs" / "tiny.toml"), "--dry-run", *common)
    assert dry.returncode == 0, dry.stderr
    smoke = _py(wheel_env, "-m", "sgsbatch.cli", "launch", str(REPO / "jobs" / "sgs.toml"), "--smoke", "--dry-run",
                *common, "--set", "verification.backend=simulated")  # no Lean here: asked for, not a fallback
    assert smoke.returncode == 0, smoke.stderr  # the smoke run's targets: package data
    run = _py(wheel_env, "-m", "sgsbatch.cli", "launch", str(REPO / "jobs" / "tiny.toml"), "--wait", *common)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    status = _py(wheel_env, "-m", "sgsbatch.cli", "status", "tiny", "--runs-dir", str(runs), "--json")
    assert status.returncode == 0, status.stderr
    st = json.loads(status.stdout)
    assert st["state"] == "completed" and st["rounds_completed"] == 1
    assert st["environment"]["git"] is None  # no checkout: no commit to record
