"""Shared test fixtures: where the repository and ../shared are, and a small run config."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TINY = REPO / "jobs" / "tiny.toml"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _runs_dir_of_its_own(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's default runs directory ($SGSBATCH_RUNS_DIR) is an empty directory of its own, never the
    checkout's ./runs: the README's first command leaves `runs/tiny` there, and a test that launches or plans
    jobs/tiny.toml without --runs-dir would find it (or, worse, read or write the user's runs). Subprocesses
    inherit it through os.environ (`cli_env`). A test of the default itself deletes or sets the variable."""
    runs = tmp_path_factory.mktemp("default-runs")
    monkeypatch.setenv("SGSBATCH_RUNS_DIR", str(runs))
    return runs


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the shared data and transcripts live beside the checkout")
    return SHARED


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for running the `sgsbatch` command in a subprocess."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env.pop("SGSBATCH_FAULT_INJECT", None)
    env.pop("SGSBATCH_FAULT_INJECT_RANK", None)
    return env


from machinelib import ReadyMachine  # noqa: E402  (tests/ is on sys.path: rootdir conftest)


@pytest.fixture
def ready_machine(tmp_path: Path) -> ReadyMachine:
    return ReadyMachine(tmp_path / "ready")
