"""The run's watcher job as the scheduler and `status` see it: its record and its state in Slurm.

The job itself (what it runs, how it is submitted and requeued) is ops/watcher.py; this is what
`status` and a second `watch --submit` read: `<run>/watcher.json` (the job id, when and how it was
submitted) and squeue's answer for that id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sgsbatch.run.paths import RunPaths

RECORD = "watcher.json"  # in the run's root


def record_path(paths: RunPaths) -> Path:
    return paths.root / RECORD


def recorded_job(paths: RunPaths) -> dict[str, Any] | None:
    """The watcher job last submitted for this run (None: never)."""
    try:
        data = json.loads(record_path(paths).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("job_id") else None


def log_path(paths: RunPaths, job_id: str) -> Path:
    """The watcher job's log: submitit's, appended to by every requeued instance."""
    return paths.slurm / "watcher" / job_id / f"{job_id}_0_log.out"


def live_state(job_id: str) -> str | None:
    """The watcher job's state while Slurm still has it queued or running (None: gone or no answer)."""
    from sgsbatch.scheduling.slurm import squeue

    tasks = squeue([job_id]) or []
    return tasks[0].state if tasks else None
