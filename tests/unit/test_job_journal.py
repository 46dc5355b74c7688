"""The per-round job journal that `rebuild` reads Slurm job ids back from."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.run.journal import journal_job, read_journal


def test_journal_appends_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "rounds" / "r0000" / "jobs.jsonl"
    journal_job(path, {"phase": "solve", "job_id": "11", "shards": [0, 1], "submitted_at": 1.0})
    with path.open("a") as f:
        f.write('{"phase": "verify", "job_')  # a crash in the middle of a write
    journal_job(path, {"phase": "verify", "job_id": "12", "shards": [0, 1], "submitted_at": 2.0})
    assert [(r["phase"], r["job_id"]) for r in read_journal(path)] == [("solve", "11"), ("verify", "12")]
    assert read_journal(tmp_path / "absent.jsonl") == []
