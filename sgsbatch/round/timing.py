"""When a run's rounds and phases started and ended, and when the run will finish.

Where the times come from: each task records its first start (`shard_NNNNN.started`) and its end
(the completion marker's `time`) in the shard files, the same source as `wall_s/<phase>`.
`round_spans` reads them per phase, and a round's end (round/lifecycle.py, the run's one database
writer) records them in the database: `phases.started_at`/`completed_at`, `rounds.started_at` (its
first task's start) beside `rounds.completed_at`, and the metric `wall_s/round`. The running round's
start is read from its shard files (nothing writes the database while it runs).

`run_timing` is what `status`, `launch --wait`'s lines and the report show: the launch time, time
elapsed (to the end for an ended run), each completed round's duration (first task start to the
round's end; the queue wait before its first task is not in it), their mean, the running round's
time so far, and the projected finish: the running round's mean duration minus its time so far
(never below zero) plus the mean for every round after it. Not covered: a projection that weighs
recent rounds more, or the queue time between rounds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlmodel import select

from sgsbatch.run.amendments import shards_at
from sgsbatch.run.shards import phase_span
from sgsbatch.state.schema import Round, Run, RunState

if TYPE_CHECKING:
    from sgsbatch.config.schema import Config
    from sgsbatch.run.handle import RunHandle
    from sgsbatch.run.paths import RunPaths


def round_spans(cfg: Config, paths: RunPaths, r: int, train_end: float | None = None
                ) -> dict[str, tuple[float, float | None]]:
    """Round r's phases that have started: phase -> (start, end or None while unfinished). The train
    phase ends at `train_end` when given (its marker is written after the round's end is recorded)."""
    out: dict[str, tuple[float, float | None]] = {}
    for phase in cfg.phases_of_round(r):
        span = phase_span(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase),
                          end=train_end if phase == "train" else None)
        if span is not None:
            out[phase] = span
    return out


def round_start(cfg: Config, paths: RunPaths, r: int) -> float | None:
    """Round r's first task start, from its shard files; None before any task of it started."""
    starts = [s for s, _ in round_spans(cfg, paths, r).values()]
    return min(starts) if starts else None


def run_timing(h: RunHandle, now: float | None = None) -> dict[str, Any]:
    """The run's times (see the module docstring); seconds and epoch seconds, None where unknown:
    `started_at`, `elapsed_s`, `round_s` ({round: duration} of completed rounds that recorded their
    start), `mean_round_s`, `current_round`, `current_started_at`, `current_s`, `eta_s`, `finish_at`."""
    now = time.time() if now is None else now
    with h.db.read() as s:
        run = s.get(Run, h.run_id)
        assert run is not None
        rounds = s.exec(select(Round).where(Round.run_id == h.run_id).order_by(Round.index)).all()  # type: ignore[arg-type]
    done = [x for x in rounds if x.state == "completed"]
    durations = {x.index: x.completed_at - x.started_at for x in done if x.started_at > 0 and x.completed_at > 0}
    mean = sum(durations.values()) / len(durations) if durations else None
    ended = run.state in (RunState.completed, RunState.failed, RunState.cancelled)
    last_done = max((x.completed_at for x in done), default=0.0)
    end = (last_done or run.updated_at) if run.state == RunState.completed else run.updated_at if ended else now
    out: dict[str, Any] = {"started_at": run.created_at, "elapsed_s": max(0.0, end - run.created_at),
                           "round_s": durations, "mean_round_s": mean, "current_round": None,
                           "current_started_at": None, "current_s": None, "eta_s": None, "finish_at": None}
    if run.state == RunState.completed:
        out["finish_at"] = end
        return out
    current = next((x.index for x in rounds if x.state != "completed"), None)
    if current is None or current >= run.rounds:
        return out
    started = round_start(h.cfg, h.paths, current)
    out.update(current_round=current, current_started_at=started,
               current_s=None if started is None or ended else max(0.0, now - started))
    if mean is not None and not ended:
        left = run.rounds - current  # the running round and every one after it
        out["eta_s"] = max(0.0, mean - (out["current_s"] or 0.0)) + mean * (left - 1)
        out["finish_at"] = now + out["eta_s"]
    return out
