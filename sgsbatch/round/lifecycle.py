"""Ending one round and preparing the next: the run's single writer between rounds.

`prepare_round` writes what a round starts from (`inputs.json`: the unsolved targets, the targets
the Solver samples) before any of its jobs is submitted. `finish_round` records checkpoints and
train metrics, the headline cumulative solve rate and generations so far, writes TensorBoard
points (purge_step makes a repeated finish not duplicate them), applies the weight retention
policy, marks the round completed and prepares the next one, or completes the run. Both are
idempotent, so a retried or resumed train job can run them again.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import func
from sqlmodel import select

from sgsbatch.round.checkpoints import prune
from sgsbatch.round.metrics import write_tensorboard
from sgsbatch.round.results import load_targets
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import Shard, atomic_write_json, phase_wall_s
from sgsbatch.state.db import locked_retry
from sgsbatch.state.schema import (
    Checkpoint,
    Metric,
    Phase,
    PhaseStatus,
    Round,
    Run,
    RunState,
    SlurmJob,
    StoredProof,
)


def prepare_round(h: RunHandle, r: int) -> None:
    """Write round r's inputs from the solved store (never overwritten once written)."""
    path = h.paths.round_inputs(r)
    if path.exists():
        return
    with h.db.read() as s:
        counts = dict(s.exec(select(StoredProof.problem_id, func.count()).where(
            StoredProof.run_id == h.run_id).group_by(StoredProof.problem_id)).all())
    ids = [t.problem_id for t in load_targets(h.paths)]
    unsolved = [i for i in ids if not counts.get(i)]
    if h.cfg.solver.objective == "ei":
        solve = [i for i in ids if counts.get(i, 0) < h.cfg.solver.store_cap]
    else:
        solve = ids
    atomic_write_json(path, {"round": r, "unsolved": unsolved if h.cfg.conjecturer.enabled else [],
                             "solve_targets": solve, "solved": len(ids) - len(unsolved)})


@locked_retry
def _record(h: RunHandle, r: int, train: dict[str, dict[str, Any]]) -> dict[str, float]:
    last = r == h.cfg.run.rounds - 1
    with h.db.write() as s:
        for role, res in train.items():
            exists = s.exec(select(Checkpoint).where(Checkpoint.run_id == h.run_id, Checkpoint.round == r,
                                                     Checkpoint.role == role)).first()
            if exists is None:
                s.add(Checkpoint(run_id=h.run_id, round=r, role=role, path=str(h.paths.checkpoint(r, role)),
                                 steps=res["steps"], sequences=res["sequences"]))
        solved = s.exec(select(func.count(func.distinct(StoredProof.problem_id))).where(
            StoredProof.run_id == h.run_id)).one()
        run = s.get(Run, h.run_id)
        assert run is not None
        prev = s.exec(select(func.sum(Metric.value)).where(Metric.run_id == h.run_id, Metric.round < r,
                                                           Metric.name == "generations/round")).one() or 0.0
        this = s.exec(select(Metric.value).where(Metric.run_id == h.run_id, Metric.round == r,
                                                 Metric.name == "generations/round")).first() or 0.0
        new: dict[str, float] = {"cumulative_solve_rate": solved / max(run.targets, 1), "solved_targets": solved,
                                 "generations/total": prev + this}
        for role, res in train.items():
            new[f"train/{role}_steps"] = res["steps"]
            new[f"train/{role}_sequences"] = res["sequences"]
            new[f"train/{role}_loss"] = res["mean_loss"]
            if "reward_mean" in res:
                new[f"{role}/reward_mean"] = res["reward_mean"]
        marker = Shard(h.paths.phase_dir(r, "train"), 0)  # done: ending a round again (resume, rebuild)
        ended = float(marker.meta()["time"]) if marker.is_done() else time.time()
        train_wall = phase_wall_s(h.paths.phase_dir(r, "train"), 1, end=ended)
        if train_wall is not None:
            new["wall_s/train"] = train_wall
        have = set(s.exec(select(Metric.name).where(Metric.run_id == h.run_id, Metric.round == r)).all())
        for k, v in new.items():
            if k not in have:
                s.add(Metric(run_id=h.run_id, round=r, name=k, value=float(v)))
        rnd = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r)).one()
        rnd.state, rnd.completed_at, rnd.generations = "completed", ended, int(prev + this)
        s.add(rnd)
        if last:
            run.state, run.message = RunState.completed, f"all {h.cfg.run.rounds} rounds completed"
        elif s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r + 1)).first() is None:
            s.add(Round(run_id=h.run_id, index=r + 1, state="pending", unsolved=run.targets - solved))
            for kind in h.cfg.phases_of_round(r + 1):
                s.add(Phase(run_id=h.run_id, round=r + 1, kind=kind, shards=h.cfg.shard_count(kind)))
        run.updated_at = time.time()
        s.add(run)
        s.flush()
        rows = s.exec(select(Metric).where(Metric.run_id == h.run_id, Metric.round == r)).all()
        metrics = {m.name: m.value for m in rows}
        for phase in s.exec(select(Phase).where(Phase.run_id == h.run_id, Phase.round == r)).all():
            phase.status, phase.wall_s = PhaseStatus.completed, metrics.get(f"wall_s/{phase.kind}", 0.0)
            s.add(phase)
        return metrics


def record_slurm_jobs(h: RunHandle, r: int) -> None:
    """Store the round's Slurm task states and restart counts (sacct), when accounting answers."""
    from sgsbatch.scheduling.slurm import sacct

    with h.db.read() as s:
        jobs = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r)).all()
        ids = [j.job_id for j in jobs]
    acct = sacct(ids) if ids else None
    if not acct:
        return
    with h.db.write() as s:
        for job in s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.round == r)).all():
            tasks = {k: v for k, v in acct.items() if k == job.job_id or k.startswith(job.job_id + "_")}
            job.task_states = json.dumps({k: v[0] for k, v in sorted(tasks.items())})
            job.restarts = sum(v[1] for v in tasks.values())
            states = {v[0] for v in tasks.values()}
            job.state = states.pop() if len(states) == 1 else "MIXED"
            s.add(job)


def finish_round(h: RunHandle, r: int, train: dict[str, dict[str, Any]]) -> None:
    if h.row().executor == "slurm":
        record_slurm_jobs(h, r)
    metrics = _record(h, r, train)
    write_tensorboard(h.paths.tb, r, metrics, simulated=h.cfg.simulated, smoke=h.cfg.run.smoke)
    deleted = prune(h.cfg, h.paths, r)
    if deleted:
        with h.db.write() as s:
            for ck in s.exec(select(Checkpoint).where(Checkpoint.run_id == h.run_id)).all():
                if any(str(d) in ck.path for d in deleted):
                    ck.deleted = True
                    s.add(ck)
    if r + 1 < h.cfg.run.rounds:
        prepare_round(h, r + 1)


def round_completed(h: RunHandle, r: int) -> bool:
    with h.db.read() as s:
        rnd = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r)).first()
        return rnd is not None and rnd.state == "completed"
