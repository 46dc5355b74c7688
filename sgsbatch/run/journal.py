"""A round's job journal, `rounds/rNNNN/jobs.jsonl`: every Slurm submission, appended before its row.

One JSON object per line (phase, job id, shards, submitted_at), fsynced. It is the run
directory's record of which jobs belong to the run, so that `sgsbatch rebuild` can restore the
database's job rows. A line torn by a crash is ended before the next append and skipped on read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sgsbatch.run.jsonl import read_jsonl


def journal_job(path: Path, record: dict[str, object]) -> None:
    """Append one submission to the round's job journal (what `sgsbatch rebuild` reads back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":  # the last write was torn by a crash: end that line first
                f.write(b"\n")
        f.write(json.dumps(record).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The job journal's records; a line torn by a crash is skipped."""
    return read_jsonl(path, past_bad_lines=True)


def task_of(job_id: str, shards: list[int] | tuple[int, ...], shard: int) -> str:
    """The Slurm id of the task that runs `shard` in a submission of `shards` as job `job_id`.

    submitit submits several shards as an array (task k runs shards[k]: `123_4`) but a single one
    as a plain job (`123`, no array). The difference matters: Slurm 22.05 accepts
    `--dependency=afterok:123_0` on a job 123 that is no array and silently drops it (measured on
    the local cluster: the dependent job starts at once)."""
    assert shard in shards, (shard, shards)
    return job_id if len(shards) == 1 else f"{job_id}_{list(shards).index(shard)}"


def latest_task(path: Path, phase: str, shard: int) -> str | None:
    """The Slurm task (`task_of`) of the shard's latest submission in a round's job journal, or None."""
    for rec in reversed(read_journal(path)):
        ids = [int(s) for s in rec.get("shards", [])]
        if rec.get("phase") == phase and shard in ids:
            return task_of(str(rec["job_id"]), ids, shard)
    return None
