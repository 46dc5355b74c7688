"""A lost database rebuilt from the run directory: the same rows, and a half-done run goes on."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, run_env, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow


def _metrics(run_dir: Path) -> dict[tuple[int, str], float]:
    con = sqlite3.connect(run_dir / "state.db")
    try:
        # the train phase's (and so the round's) wall time ends at the train job's marker when rebuilt,
        # at the ending itself live
        return {(r, n): v for r, n, v in con.execute("SELECT round, name, value FROM metrics")
                if n not in ("wall_s/train", "wall_s/round")}
    finally:
        con.close()


def _rounds(run_dir: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(run_dir / "state.db")
    try:
        return con.execute('SELECT "index", state, unsolved, generations FROM rounds ORDER BY "index"').fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 2-round tiny run on the local executor, kept as a template."""

    root = tmp_path_factory.mktemp("rebuild")
    env = run_env()
    proc = sgsbatch(*launch_args(root, "rb", "run.executor=local", "run.rounds=2"), "--wait", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "rb"


def test_rebuild_refuses_an_intact_database_without_force(finished: Path, tmp_path: Path,
                                                          cli_env: dict[str, str]) -> None:
    run = tmp_path / "rb"
    shutil.copytree(finished, run)
    before = (run / "state.db").read_bytes()
    proc = sgsbatch("rebuild", "rb", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 2 and "--force" in proc.stderr and "state.db exists" in proc.stderr
    assert (run / "state.db").read_bytes() == before


def test_lost_database_is_rebuilt_with_the_same_rows(finished: Path, tmp_path: Path, cli_env: dict[str, str]) -> None:
    run = tmp_path / "rb"
    shutil.copytree(finished, run)
    want, want_metrics, want_rounds = outcome(run), _metrics(run), _rounds(run)
    (run / "state.db").unlink()
    lost = sgsbatch("status", "rb", "--runs-dir", str(tmp_path), env=cli_env)
    assert lost.returncode == 1 and "state.db is missing" in lost.stderr and "sgsbatch rebuild rb" in lost.stderr
    listing = sgsbatch("status", "--runs-dir", str(tmp_path), env=cli_env)
    assert listing.returncode == 0 and "rb: unreadable" in listing.stdout, listing.stdout + listing.stderr
    assert not (run / "state.db").exists()  # looking did not create an empty database
    proc = sgsbatch("rebuild", "rb", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 rounds completed" in proc.stdout
    assert outcome(run) == want
    assert _metrics(run) == want_metrics
    assert _rounds(run) == want_rounds
    st = status(tmp_path, "rb")
    assert st["state"] == "completed" and st["rounds_completed"] == 2


def test_corrupt_database_moved_aside_and_half_done_run_resumes(finished: Path, tmp_path: Path,
                                                                cli_env: dict[str, str]) -> None:
    run = tmp_path / "rb"
    shutil.copytree(finished, run)
    want = outcome(run)
    # the database is garbage, and round 1 ended without its train job finishing
    (run / "state.db").write_bytes(b"not a database" * 100)
    for f in (run / "rounds" / "r0001" / "train").glob("shard_*.done"):
        f.unlink()
    shutil.rmtree(run / "checkpoints" / "r0001")
    proc = sgsbatch("rebuild", "rb", "--runs-dir", str(tmp_path), "--force", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "1 of 2 rounds completed" in proc.stdout
    kept = list(run.glob("state.db.bad-*"))
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"not a database")
    st = status(tmp_path, "rb")
    assert st["rounds_completed"] == 1 and st["state"] == "stalled", st  # no live driver: resume repairs it
    res = sgsbatch("resume", "rb", "--runs-dir", str(tmp_path), "--wait", env=cli_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert status(tmp_path, "rb")["state"] == "completed"
    assert outcome(run) == want
