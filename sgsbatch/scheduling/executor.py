"""The one interface both executors (Slurm, local processes) implement, and the stall reasons.

Operator commands (ops/) and the chain that ends a round (chain.py) talk to an `Executor` and
never branch on its name: `start` submits (Slurm) or starts (local driver) the run's unfinished
work, `stop` cancels it, `liveness` says whether anything is alive to do the unfinished work
(and if not, why: a `StallReason`), `record_round` stores what the scheduler knows of a finished
round (Slurm: task states and restarts from sacct), and `continue_chain` hands on to the next
round from inside a train job (Slurm submits it; the local driver simply goes on).
Not covered: the scheduler mechanics themselves (slurm.py, local.py).
"""

from __future__ import annotations

from typing import Protocol

from sgsbatch.run.handle import RunHandle
from sgsbatch.scheduling.liveness import Liveness

EXECUTORS = ("slurm", "local")


class Executor(Protocol):
    name: str

    def start(self, h: RunHandle, r: int) -> None:
        """Submit (or start) the unfinished work of the run from round r on."""
        ...

    def stop(self, h: RunHandle) -> None:
        """Cancel the run's jobs (or its driver); files stay consistent, nothing recorded is lost."""
        ...

    def liveness(self, h: RunHandle, r: int, phase: str, detail: bool = True) -> Liveness:
        """Whether something is alive to finish round r's unfinished work (`phase`: the first unfinished one).

        `detail=False` (polling: `--wait`, `watch`): ask the scheduler's accounting only when needed."""
        ...

    def record_round(self, h: RunHandle, r: int) -> None:
        """Store what the scheduler knows about round r's jobs (before the round is marked completed)."""
        ...

    def continue_chain(self, h: RunHandle, r: int) -> None:
        """Called by round r's train job once the round ended: make round r + 1 happen."""
        ...


def executor_named(name: str) -> Executor:
    if name == "slurm":
        from sgsbatch.scheduling.slurm import SlurmExecutor

        return SlurmExecutor()
    if name == "local":
        from sgsbatch.scheduling.local import LocalExecutor

        return LocalExecutor()
    raise ValueError(f"unknown executor {name!r}; valid: {', '.join(EXECUTORS)}")


def executor_for(h: RunHandle) -> Executor:
    """The executor the run was launched with (recorded in its database row)."""
    return executor_named(h.row().executor)
