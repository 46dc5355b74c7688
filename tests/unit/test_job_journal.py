"""The per-round job journal that `rebuild` reads Slurm job ids back from."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select

from sgsbatch.run.journal import journal_job, latest_task, read_journal, task_of


def test_journal_appends_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "rounds" / "r0000" / "jobs.jsonl"
    journal_job(path, {"phase": "solve", "job_id": "11", "shards": [0, 1], "submitted_at": 1.0})
    with path.open("a") as f:
        f.write('{"phase": "verify", "job_')  # a crash in the middle of a write
    journal_job(path, {"phase": "verify", "job_id": "12", "shards": [0, 1], "submitted_at": 2.0})
    assert [(r["phase"], r["job_id"]) for r in read_journal(path)] == [("solve", "11"), ("verify", "12")]
    assert read_journal(tmp_path / "absent.jsonl") == []


def test_rebuild_keeps_a_phases_arrays_active_until_resubmitted(tmp_path: Path) -> None:
    """Verify's arrays of one submission (one per solve task) all stay active; an array whose shards
    a later submission covers (after `resume`) does not."""
    from sgsbatch.ops.rebuild import _restore_jobs
    from sgsbatch.state.schema import SlurmJob
    from tests.runlib import recorded_run

    h = recorded_run(tmp_path, "t", executor="slurm")
    path = h.paths.jobs_journal(0)
    for job, phase, shards in (("11", "solve", [0, 1]), ("12", "verify", [0, 1]), ("13", "verify", [2, 3]),
                               ("21", "solve", [1]), ("22", "verify", [1, 3])):
        journal_job(path, {"phase": phase, "job_id": job, "shards": shards, "submitted_at": 1.0})
    with h.db.write() as s:
        for j in s.exec(select(SlurmJob)).all():
            s.delete(j)
    _restore_jobs(h)
    with h.db.read() as s:
        active = {j.job_id: j.active for j in s.exec(select(SlurmJob)).all()}
    assert active == {"11": False, "12": False, "13": False, "21": True, "22": True}
    journal_job(h.paths.jobs_journal(1), {"phase": "verify", "job_id": "31", "shards": [0, 1], "submitted_at": 2.0})
    journal_job(h.paths.jobs_journal(1), {"phase": "verify", "job_id": "32", "shards": [2, 3], "submitted_at": 2.0})
    with h.db.write() as s:
        for j in s.exec(select(SlurmJob)).all():
            s.delete(j)
    _restore_jobs(h)
    with h.db.read() as s:
        assert all(j.active for j in s.exec(select(SlurmJob).where(SlurmJob.round == 1)).all())


def test_the_task_of_a_shard_is_a_plain_job_when_submitted_alone(tmp_path: Path) -> None:
    """submitit submits one shard as a plain job and several as an array: the id names what Slurm
    knows (a dependency on `123_0` when 123 is no array is dropped by Slurm without a word)."""
    assert task_of("123", [4], 4) == "123"
    assert task_of("123", [3, 5, 11], 11) == "123_2"
    j = tmp_path / "jobs.jsonl"
    journal_job(j, {"phase": "solve", "job_id": "40", "shards": [0, 1], "submitted_at": 1.0})
    journal_job(j, {"phase": "solve", "job_id": "41", "shards": [1], "submitted_at": 2.0})
    journal_job(j, {"phase": "verify", "job_id": "42", "shards": [0, 1], "submitted_at": 3.0})
    assert latest_task(j, "solve", 1) == "41" and latest_task(j, "solve", 0) == "40_0"
    assert latest_task(j, "verify", 1) == "42_1" and latest_task(j, "guide", 0) is None
