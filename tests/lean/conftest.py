"""Fixtures for the Lean verifier tests: the stand-in REPL, the recorded transcripts, pool settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from leanlib import TRANSCRIPTS


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

