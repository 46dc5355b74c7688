"""Writing the end of a round into the database: one transaction, idempotent.

`record_round_end` takes what the round's files gave (round/lifecycle.finish_round computes it outside
the transaction: the train job's results as metrics, its checkpoints, the phases' times, the next round's
phases) and writes the checkpoints, the metrics not recorded yet, the round's and its phases' state and
times, the next round's rows (or the run's completion) in one write. The few values only the database
knows (targets solved so far, generations so far) are counted inside it, under the names the caller
gives: this module defines no metric and reads no file (the state package imports nothing of the
package's logic). A round ended again (resume, rebuild) keeps its first completion time and adds only
the metrics it lacked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import select

from sgsbatch.state.db import Database, locked_retry
from sgsbatch.state.schema import Checkpoint, Metric, Phase, PhaseStatus, Round, Run, RunState, StoredProof


@dataclass
class RoundEnd:
    """Round `round`'s end as its files give it."""

    round: int
    checkpoints: list[tuple[str, str, int, int]]  # role, weights path, optimizer steps, sequences
    metrics: dict[str, float]  # the train results' and the round's times (the caller's names)
    ended: float  # the train job's completion time (its marker's), or now
    started: float | None  # the round's first phase's start
    spans: dict[str, tuple[float, float | None]]  # phase -> (start, end)
    wall_metric: Callable[[str], str]  # a phase's kind -> the metric name of its wall seconds
    next_phases: list[tuple[str, int]] = field(default_factory=list)  # the next round's (kind, shards)
    # names of the values counted here: cumulative solve rate, targets solved, generations so far, this round's
    solved_rate: str = ""
    solved_targets: str = ""
    generations_total: str = ""
    generations_round: str = ""


@locked_retry
def record_round_end(db: Database, run_id: int, end: RoundEnd) -> dict[str, float]:
    """Write `end` (module docstring); returns every metric the round has after it."""
    r = end.round
    with db.write() as s:
        run = s.get(Run, run_id)
        assert run is not None
        last = r >= run.rounds - 1  # the database's count: `resume --set run.rounds=N` may have raised it
        for role, path, steps, sequences in end.checkpoints:
            exists = s.exec(select(Checkpoint).where(Checkpoint.run_id == run_id, Checkpoint.round == r,
                                                     Checkpoint.role == role)).first()
            if exists is None:
                s.add(Checkpoint(run_id=run_id, round=r, role=role, path=path, steps=steps, sequences=sequences))
        solved = s.exec(select(func.count(func.distinct(StoredProof.problem_id))).where(
            StoredProof.run_id == run_id)).one()
        prev = s.exec(select(func.sum(Metric.value)).where(Metric.run_id == run_id, Metric.round < r,
                                                           Metric.name == end.generations_round)).one() or 0.0
        this = s.exec(select(Metric.value).where(Metric.run_id == run_id, Metric.round == r,
                                                 Metric.name == end.generations_round)).first() or 0.0
        new = {end.solved_rate: solved / max(run.targets, 1), end.solved_targets: solved,
               end.generations_total: prev + this, **end.metrics}
        have = set(s.exec(select(Metric.name).where(Metric.run_id == run_id, Metric.round == r)).all())
        for k, v in new.items():
            if k not in have:
                s.add(Metric(run_id=run_id, round=r, name=k, value=float(v)))
        rnd = s.exec(select(Round).where(Round.run_id == run_id, Round.index == r)).one()
        if rnd.state != "completed":  # ending a round again keeps its first completion time
            rnd.completed_at = end.ended
        if not rnd.started_at and end.started is not None:
            rnd.started_at = end.started
        rnd.state, rnd.generations = "completed", int(prev + this)
        s.add(rnd)
        if last:
            run.state, run.message = RunState.completed, f"all {run.rounds} rounds completed"
        elif s.exec(select(Round).where(Round.run_id == run_id, Round.index == r + 1)).first() is None:
            s.add(Round(run_id=run_id, index=r + 1, state="pending", unsolved=run.targets - solved))
            for kind, shards in end.next_phases:
                s.add(Phase(run_id=run_id, round=r + 1, kind=kind, shards=shards))
        run.updated_at = time.time()
        s.add(run)
        s.flush()
        rows = s.exec(select(Metric).where(Metric.run_id == run_id, Metric.round == r)).all()
        metrics = {m.name: m.value for m in rows}
        for phase in s.exec(select(Phase).where(Phase.run_id == run_id, Phase.round == r)).all():
            phase.status, phase.wall_s = PhaseStatus.completed, metrics.get(end.wall_metric(phase.kind), 0.0)
            start, stop = end.spans.get(phase.kind, (0.0, 0.0))
            phase.started_at, phase.completed_at = start, stop or 0.0
            s.add(phase)
        return metrics
