"""A round's timeline: each phase's waiting, start-up and work, the critical path, idle GPU and CPU time.

Recorded times only (no projection): each task's first start (`shard_NNNNN.started`), the end of
its start-up (`shard_NNNNN.ready`: the engine loaded, the verifier's REPLs started; absent for the
train job and for tasks of runs older than the marker), and its end (the completion marker's
`time`); on Slurm also each phase's submission (`jobs.jsonl`'s `submitted_at`).

Per phase, with `after` = the later of the phase before's end (the round's first phase: the round
before's end) and the phase's submission:
* waiting: first task start - `after` (queue wait and hand-over; 0 where the phase overlapped
  the one before, e.g. verify tasks streaming behind solve, `verification.streaming`),
* start-up: the start-up of the task that ended last (the one the next phase waited for), the part
  of it after `after`,
* work: the rest of the phase, to its last task's end (streaming verify: its tail after solve).
The phases run one after another, so the round's critical path is the whole chain: waiting +
start-up + work summed over the phases is the round's time from `after` of its first phase to its
last end (less any overlap); its longest phase is where more shards or faster start-ups help.

Idle resources of a round: its pool is the most GPUs (CPUs) any one phase holds at once (tasks
running together, `slurm.<phase>.array_parallelism` at most, x each task's GPUs) held for the
whole round; of it, tasks spend `startup` GPU-seconds starting and `work` GPU-seconds working;
the rest is idle: what a pool sized for the largest phase would leave unused (waiting between
phases, a streaming verify task's wait for solve lines (`waited_s` in its marker), start-ups
aside, smaller phases). A GPU-less config (bench/rehearsal.toml) has no GPU pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sgsbatch.run.amendments import shards_at
from sgsbatch.run.journal import read_journal
from sgsbatch.run.shards import shards

if TYPE_CHECKING:
    from sgsbatch.config.schema import Config
    from sgsbatch.run.paths import RunPaths


@dataclass(frozen=True)
class TaskTimes:
    """One task's recorded times (epoch seconds): start, start-up end (None: not recorded), end, and
    the seconds it waited with nothing to do (a streaming verify task waiting for solve lines)."""

    start: float
    ready: float | None
    end: float
    waited: float = 0.0


@dataclass(frozen=True)
class PhaseLine:
    """One phase of a round: its tasks' times and resources, and the phase on the chain."""

    phase: str
    tasks: tuple[TaskTimes, ...]
    gpus: int  # per task
    cpus: int  # per task
    parallel: int  # tasks that may run at once (array_parallelism)
    after: float  # when it could start: the phase before's end, or its submission if later

    @property
    def start(self) -> float:
        return min(t.start for t in self.tasks)

    @property
    def end(self) -> float:
        return max(t.end for t in self.tasks)

    @property
    def wait_s(self) -> float:
        return max(0.0, self.start - self.after)

    @property
    def startup_s(self) -> float | None:
        """The start-up of the task that ended last, as far as it lies after `after` (a streaming
        verify task started up while solve ran: none of its start-up is on the path)."""
        last = max(self.tasks, key=lambda t: t.end)
        return None if last.ready is None else max(0.0, min(last.ready, last.end) - max(last.start, self.after))

    @property
    def work_s(self) -> float:
        return self.end - max(self.start, self.after) - (self.startup_s or 0.0)

    @property
    def path_s(self) -> float:
        """Its share of the critical path: from `after` to its end (0 if it ended before `after`)."""
        return max(0.0, self.end - self.after)

    def held_s(self, per_task: int) -> tuple[float, float]:
        """(start-up, work) resource-seconds of its tasks holding `per_task` GPUs or CPUs each (the
        time a task waited with nothing to do is neither: it counts as idle)."""
        up = sum((min(t.ready, t.end) - t.start) for t in self.tasks if t.ready is not None)
        total = sum(t.end - t.start - t.waited for t in self.tasks)
        return per_task * up, per_task * (total - up)

    def peak(self, per_task: int) -> int:
        return per_task * min(len(self.tasks), self.parallel)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "tasks": len(self.tasks), "gpus": self.gpus, "cpus": self.cpus,
                "after": self.after, "start": self.start, "end": self.end, "wait_s": self.wait_s,
                "startup_s": self.startup_s, "work_s": self.work_s, "path_s": self.path_s}


@dataclass(frozen=True)
class Resource:
    """A round's GPU or CPU time: the pool (peak x round), start-ups, work and what was left idle."""

    peak: int
    pool_s: float
    startup_s: float
    work_s: float

    @property
    def idle_s(self) -> float:
        return max(0.0, self.pool_s - self.startup_s - self.work_s)

    @property
    def idle_share(self) -> float | None:
        return self.idle_s / self.pool_s if self.pool_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {"peak": self.peak, "pool_s": self.pool_s, "startup_s": self.startup_s, "work_s": self.work_s,
                "idle_s": self.idle_s, "idle_share": self.idle_share}


@dataclass(frozen=True)
class RoundTimeline:
    round: int
    phases: tuple[PhaseLine, ...]

    @property
    def start(self) -> float:
        return self.phases[0].after

    @property
    def end(self) -> float:
        return max(p.end for p in self.phases)

    @property
    def round_s(self) -> float:
        return self.end - self.start

    @property
    def critical(self) -> PhaseLine:
        """The phase with the largest share of the critical path."""
        return max(self.phases, key=lambda p: p.path_s)

    def totals(self) -> dict[str, float]:
        """Waiting, start-up and work summed over the chain (their sum: the round, less any overlap)."""
        return {"wait_s": sum(p.wait_s for p in self.phases),
                "startup_s": sum(p.startup_s or 0.0 for p in self.phases),
                "work_s": sum(p.work_s for p in self.phases)}

    def resource(self, what: str) -> Resource:
        """GPU ("gpus") or CPU ("cpus") time of the round (module docstring)."""
        peak = max(p.peak(getattr(p, what)) for p in self.phases)
        held = [p.held_s(getattr(p, what)) for p in self.phases]
        return Resource(peak, peak * self.round_s, sum(u for u, _ in held), sum(w for _, w in held))

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "start": self.start, "end": self.end, "round_s": self.round_s,
                "critical_phase": self.critical.phase, **self.totals(),
                "phases": [p.to_json() for p in self.phases],
                "gpu": self.resource("gpus").to_json(), "cpu": self.resource("cpus").to_json()}


def chain(r: int, phases: list[tuple[str, tuple[TaskTimes, ...], int, int, int, float | None]],
          before: float | None) -> RoundTimeline:
    """The round's timeline from each phase's (name, tasks, GPUs, CPUs per task, parallel tasks,
    submission or None) in chain order; `before`: the round before's end (None: the first phase's
    submission, else its first start)."""
    lines: list[PhaseLine] = []
    prev = before
    for name, tasks, gpus, cpus, parallel, submitted in phases:
        if not tasks:
            raise ValueError(f"round {r} phase {name}: no task times")
        marks = [x for x in (prev, submitted) if x is not None]
        after = max(marks) if marks else min(t.start for t in tasks)
        line = PhaseLine(name, tasks, gpus, cpus, max(1, parallel), after)
        lines.append(line)
        prev = line.end
    return RoundTimeline(r, tuple(lines))


def _tasks(cfg: Config, paths: RunPaths, r: int, phase: str) -> tuple[TaskTimes, ...] | None:
    """The phase's task times; None while a task has not started or ended."""
    out = []
    for s in shards(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase)):
        start = s.started()
        if start is None or not s.is_done():
            return None
        meta = s.meta()
        out.append(TaskTimes(start, s.ready(), float(meta["time"]), float(meta.get("waited_s", 0.0))))
    return tuple(out)


def round_timeline(cfg: Config, paths: RunPaths, r: int) -> RoundTimeline | None:
    """Round r's timeline from the run directory, or None while any of its phases is unfinished."""
    submitted: dict[str, float] = {}
    for rec in read_journal(paths.jobs_journal(r)):  # the first submission of each phase (Slurm only)
        if "submitted_at" in rec:
            submitted.setdefault(rec["phase"], float(rec["submitted_at"]))
    phases = []
    for phase in cfg.phases_of_round(r):
        tasks = _tasks(cfg, paths, r, phase)
        if tasks is None:
            return None
        res = cfg.phase_resources(phase)
        gpus, cpus = (res.gpus * res.nodes, res.cpus * res.nodes) if phase == "train" else (res.gpus, res.cpus)
        parallel = min(res.array_parallelism, cfg.run.local_workers) if cfg.run.executor == "local" \
            else res.array_parallelism
        phases.append((phase, tasks, gpus, cpus, parallel, submitted.get(phase)))
    before = None
    if r > 0:
        last = _tasks(cfg, paths, r - 1, cfg.phases_of_round(r - 1)[-1])
        before = max(t.end for t in last) if last else None
    return chain(r, phases, before)
