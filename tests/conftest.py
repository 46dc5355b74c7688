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
