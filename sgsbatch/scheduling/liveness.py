"""What a scheduler says about a run with unfinished work: alive (running, pending) or stalled, and why.

`StallReason` names every way a run stops progressing without failing; `repairable` says which
ones `sgsbatch resume` (and so `sgsbatch watch`) may repair unattended.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class StallReason(enum.StrEnum):
    """Why a run with unfinished work is not progressing."""

    shard_out_of_retries = "shard_out_of_retries"  # a shard crashed past run.max_task_retries
    dependency_never_satisfied = "dependency_never_satisfied"  # a job waits on a failed/cancelled one
    no_live_job = "no_live_job"  # Slurm: nothing queued or running
    local_driver_dead = "local_driver_dead"  # local: the driver process is gone
    # the run directory's file system has less free than alerts.min_free_mb (views/status.py blames it
    # whatever the executor saw: a dead driver, a crashed shard)
    disk_full = "disk_full"

    @property
    def repairable(self) -> bool:
        """True when `sgsbatch resume` fixes it as is; a shard out of retries needs its cause fixed
        first (resubmitting it unattended would spend its allocation crashing again), a full disk
        needs space freed (a resume would only fail writing)."""
        return self not in (StallReason.shard_out_of_retries, StallReason.disk_full)


@dataclass
class Liveness:
    """What the scheduler says about a run with unfinished work."""

    state: str  # "running" | "pending" | "stalled"
    stall: StallReason | None = None
    message: str | None = None  # None: keep the run's own message
    jobs: list[dict[str, Any]] | None = None  # Slurm (when squeue answers): active jobs with task states
    sacct_unavailable: bool = False
    driver_pid: int | None = None
