"""A run's state, from the database, the shard files and the scheduler (squeue/sacct or the local driver).

The database knows what was decided (completed rounds, metrics, cancelled); the shard files know
what finished; the scheduler knows what is still alive. A run with unfinished work is `stalled`
(with the reason) when a shard ran out of retries, when a job waits on a dependency that can
never be satisfied, or when nothing is alive to do the work; otherwise `pending` until its first
task starts, then `running`. Reads only small tables (no attempts scan), so it stays fast on a
database of 200 full-scale rounds. Writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import select

from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import Shard
from sgsbatch.state.schema import Metric, Round, RunState, SlurmJob


def _current(h: RunHandle, completed: int) -> tuple[int, str | None]:
    """(current round, first phase of it with unfinished shards)."""
    r = min(completed, h.cfg.run.rounds - 1)
    for phase in h.cfg.phases_of_round(r):
        if not all(Shard(h.paths.phase_dir(r, phase), i).is_done() for i in range(h.cfg.shard_count(phase))):
            return r, phase
    return r, "train"


def _failed_shard(h: RunHandle, r: int) -> str | None:
    for phase in h.cfg.phases_of_round(r):
        for i in range(h.cfg.shard_count(phase)):
            reason = Shard(h.paths.phase_dir(r, phase), i).failed_reason()
            if reason:
                return reason
    return None


def _slurm_liveness(h: RunHandle, jobs: list[SlurmJob], detail: dict[str, Any]) -> tuple[str, str]:
    """(state, reason) of a run with unfinished work, judged from its active Slurm jobs."""
    from sgsbatch.scheduling import slurm

    ids = [j.job_id for j in jobs]
    live = slurm.squeue(ids)
    if live is None:
        return "running", "squeue does not answer: state unknown"
    acct = slurm.sacct(ids)
    by_phase = {j.job_id: j.phase for j in jobs}
    detail["jobs"] = [{"job_id": j.job_id, "phase": j.phase, "round": j.round, "shards": json.loads(j.shards)}
                      for j in jobs]
    if acct is not None:
        for row in detail["jobs"]:
            tasks = {k: v for k, v in acct.items() if k == row["job_id"] or k.startswith(row["job_id"] + "_")}
            row["task_states"] = {k: v[0] for k, v in tasks.items()}
            row["restarts"] = sum(v[1] for v in tasks.values())
    else:
        detail["sacct"] = "unavailable: job states from squeue only"
    for t in live:
        if "DependencyNeverSatisfied" in t.reason:
            phase = by_phase.get(t.job_id.split("_")[0], "?")
            return "stalled", (f"job {t.job_id} ({phase}) can never start: its dependency failed or was cancelled; "
                               f"run `sgsbatch resume {h.cfg.run.name}`")
    if not live:
        return "stalled", "no live Slurm job but unfinished work"
    started = any(t.state != "PENDING" for t in live) or h.paths.phase_dir(0, "init").exists()
    return ("running" if started else "pending"), ""


def run_status(h: RunHandle, live: bool = True) -> dict[str, Any]:
    """The `sgsbatch status RUN --json` object."""
    row = h.row()
    with h.db.read() as s:
        done_rounds = s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all()
        completed = len(done_rounds)
        metrics: dict[str, float] = {}
        if completed:
            last = max(done_rounds)
            metrics = {m.name: m.value for m in s.exec(select(Metric).where(Metric.run_id == h.run_id,
                                                                             Metric.round == last)).all()}
        jobs = list(s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.active)).all())
        for j in jobs:
            s.expunge(j)
    r, phase = _current(h, completed)
    out: dict[str, Any] = {
        "name": row.name, "state": row.state.value, "message": row.message, "executor": row.executor,
        "rounds": row.rounds, "rounds_completed": completed, "round": r, "phase": phase,
        "simulated": row.simulated, "smoke": row.smoke, "targets": row.targets, "run_dir": row.run_dir,
        "metrics": metrics,
    }
    if row.state in (RunState.completed, RunState.cancelled, RunState.failed):
        out["phase"] = None if row.state == RunState.completed else phase
        return out
    reason = _failed_shard(h, r)
    if reason:
        out["state"], out["message"] = "stalled", reason + f"; fix the cause, then `sgsbatch resume {row.name}`"
        return out
    if not live:
        return out
    if row.executor == "local":
        from sgsbatch.scheduling.local import driver_alive

        pid = driver_alive(h.paths)
        if pid is None:
            out["state"], out["message"] = "stalled", (f"local driver is not running but work is unfinished; "
                                                       f"run `sgsbatch resume {row.name}`")
        else:
            out["state"], out["driver_pid"] = "running", pid
        return out
    round_jobs = [j for j in jobs if j.round >= r]
    state, why = _slurm_liveness(h, round_jobs, out)
    if state == "stalled" and "no live" in why:
        # the train job may have submitted the next round between our reads: look once more
        with h.db.read() as s:
            again = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.active,
                                                  SlurmJob.round > r)).all()
        if again:
            state, why = "running", ""
        else:
            why += f" (round {r}, {phase}); run `sgsbatch resume {row.name}`"
    out["state"], out["message"] = state, why
    return out
