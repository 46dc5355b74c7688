"""Fixtures for the Lean verifier tests: the stand-in REPL, the recorded transcripts, pool settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sgsbatch.verification.pool import PoolSettings

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_repl.py"
TRANSCRIPTS = Path(__file__).resolve().parents[2].parent / "shared" / "lean-repl-v4.15.0"
FAKE_COMMAND = (sys.executable, str(FAKE))


@pytest.fixture
def transcripts() -> Path:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"{TRANSCRIPTS} is absent: the recorded REPL v4.15.0 transcripts live in ../shared")
    return TRANSCRIPTS


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Turn on the stand-in's log and state folder; returns the log file."""
    log = tmp_path / "fake.log"
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("FAKE_REPL_LOG", str(log))
    monkeypatch.setenv("FAKE_REPL_STATE", str(state))
    return log


def settings(tmp_path: Path, **kw: object) -> PoolSettings:
    base: dict[str, object] = dict(command=FAKE_COMMAND, project_dir=tmp_path, processes=2, timeout_s=1.5,
                                   header_timeout_s=10.0, memory_limit_mb=0, max_proofs=200, retries=1)
    base.update(kw)
    return PoolSettings(**base)  # type: ignore[arg-type]
