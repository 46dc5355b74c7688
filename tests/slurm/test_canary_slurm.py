"""`sgsbatch canary` on the local Slurm: one job per job shape of a config whose every part is real
but Lean (a real tiny model on transformers, DeepSpeed on a CPU rank, the Lean stand-ins under real
bubblewrap and the real process filter) passes, is kept, and clears `launch`; before it, `launch`
refuses that research config; a missing partition fails the canary (its pre-flight, before any job)
with the key to change."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from runlib import REPO, sgsbatch

sys.path.insert(0, str(REPO / "tests" / "lean"))
sys.path.insert(0, str(REPO / "tests" / "gpu"))
from leanlib import FAKE, FAKE_CHECKER  # noqa: E402

pytestmark = [pytest.mark.slurm]
TINY = REPO / "jobs" / "tiny.toml"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gpulib

    return gpulib.build_model(tmp_path_factory.mktemp("canary-model"), sharpen=False)


def _args(model: Path, tmp_path: Path, *more: str) -> list[str]:
    (tmp_path / "lakefile.toml").write_text('name = "canary_test"\n')  # a Lean project without Mathlib (local checks)
    sets = [f"run.runs_dir={tmp_path / 'runs'}", "run.name=canary-test",
            *(f"models.{r}={model}" for r in ("solver", "conjecturer", "guide")),
            "verification.backend=lean", f"verification.repl_command={json.dumps([sys.executable, str(FAKE)])}",
            f"verification.checker_command={json.dumps([sys.executable, str(FAKE_CHECKER)])}",
            f"verification.project_dir={tmp_path}", f"verification.sandbox={'bwrap' if shutil.which('bwrap') else 'none'}",
            "verification.timeout_s=30", "canary.loop_timeout_s=2", "canary.max_tokens=8", "guide.max_tokens=24",
            "canary.min_guide_parse_rate=0", "canary.targets=2", "solver.batch_size=2", *more]
    return [str(TINY), *(x for s in sets for x in ("--set", s))]


def test_a_passing_canary_is_kept_and_clears_launch(slurm_cluster: object, model: Path, tmp_path: Path) -> None:
    refused = sgsbatch("launch", *_args(model, tmp_path))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "no canary has run for this config" in refused.stderr and "--skip-canary" in refused.stderr
    assert not (tmp_path / "runs" / "canary-test").exists()  # nothing created

    proc = sgsbatch("canary", *_args(model, tmp_path), timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "canary passed" in proc.stdout
    kept = [p for p in (tmp_path / "runs" / ".canary").glob("*.json")]
    assert len(kept) == 1
    res = json.loads(kept[0].read_text())
    assert res["passed"] and res["site"] == "sgsbatch" and len(res["jobs"]) == 3
    checks = {(r["component"], r["check"]) for r in res["rows"]}
    for want in [("generation:solver", "generate"), ("generation:conjecturer", "generate"), ("guide", "replies parse"),
                 ("verification", "cheat: sorry"), ("verification", "loop times out"),
                 ("verification", "checker refuses a changed statement"),
                 ("training", "stop checkpoint fits signal_delay_s"), ("training", "resume at the same step"),
                 ("environment", "versions match cpu.txt")]:
        assert want in checks, want
    assert {r["shape"].split(" ")[0] for r in res["rows"]} == {"init+conjecture+solve+guide", "verify", "train"}

    dry = sgsbatch("launch", *_args(model, tmp_path), "--dry-run")
    assert dry.returncode == 0 and f"canary of fingerprint {res['fingerprint']} passed" in dry.stdout


def test_a_missing_partition_fails_the_canary_naming_the_key(slurm_cluster: object, model: Path,
                                                              tmp_path: Path) -> None:
    phases = ("init", "conjecture", "solve", "verify", "guide", "train")
    proc = sgsbatch("canary", *_args(model, tmp_path, *(f"slurm.{p}.partition=no-such-partition" for p in phases)))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # the canary's pre-flight finds it before any job is submitted, naming every phase's key
    out = proc.stdout + proc.stderr
    assert "nothing was submitted" in out and all(f"slurm.{p}.partition" in out for p in phases)
    assert not (tmp_path / "runs" / ".canary").exists()  # no canary ran, none is kept
