"""A run's state, from the database, the shard files and the scheduler (squeue/sacct or the local driver).

The database knows what was decided (completed rounds, metrics, cancelled); the shard files know
what finished; the executor knows what is still alive. A run with unfinished work is `stalled`
(with a `StallReason`) when a shard ran out of retries (its message: one line, the reason's
exception line and the `logs` command that shows the rest), when a job waits on a dependency that can
never be satisfied, or when nothing is alive to do the work; otherwise `pending` until its first
task starts, then `running`. A stalled run's message names a full disk (free space below
`alerts.min_free_mb` on the run directory's file system, whose free space is always shown) or a
corrupt shard output a command met (run/quarantine.py) before the executor's view. Reads only small tables (no attempts scan), so it stays fast on a
database of 200 full-scale rounds. Writes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import select

from sgsbatch.canary.record import read_run_record
from sgsbatch.config.schema import ROLLOUT_JOB
from sgsbatch.round.disk import disk_usage, free_space, full_disk
from sgsbatch.round.lifecycle import current_phase
from sgsbatch.round.metrics import CUMULATIVE_SOLVE_RATE, EVAL_PREFIX
from sgsbatch.round.refusals import round_refusals, summary_text
from sgsbatch.round.timing import run_timing
from sgsbatch.run import environment, lineage, quarantine
from sgsbatch.run.attempts import error_line
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import command
from sgsbatch.run.shards import failed_reason, rollout_shard_of
from sgsbatch.scheduling import watcher
from sgsbatch.scheduling.eval_jobs import evaluations
from sgsbatch.scheduling.executor import executor_for
from sgsbatch.scheduling.liveness import StallReason
from sgsbatch.state.schema import Metric, Round, RunEnvironment, RunState
from sgsbatch.views.plan import RunPlan, comparison_text, make_plan, run_projection
from sgsbatch.views.progress import alarms, phase_progress, sparkline
from sgsbatch.views.wording import finished


@dataclass
class RunStatus:
    """What `sgsbatch status RUN` shows. `round` is 0-based; `rounds_completed` a count."""

    name: str
    state: str  # pending | running | stalled | completed | failed | cancelled
    message: str
    executor: str
    rounds: int
    rounds_completed: int
    round: int
    phase: str | None
    simulated: bool
    smoke: bool
    targets: int
    run_dir: str
    metrics: dict[str, float] = field(default_factory=dict)
    stall: StallReason | None = None  # set exactly when state == "stalled"
    jobs: list[dict[str, Any]] | None = None  # Slurm: active jobs, task states, restarts
    sacct_unavailable: bool = False
    driver_pid: int | None = None  # local: the live driver
    environment: dict[str, Any] | None = None  # the launch's (run/environment.summary); None before it was recorded
    progress: dict[str, Any] | None = None  # the current phase's live progress (views/progress.py); None when idle
    solve_rate_curve: list[float] = field(default_factory=list)  # cumulative solve rate per completed round
    disk: dict[str, Any] | None = None  # bytes used and projected to the planned rounds
    alerts: list[dict[str, Any]] = field(default_factory=list)  # raised alarms (metric names alerts/*)
    rehearsal: bool = False  # `launch --rehearse`: SIMULATED generation, verifier and trainer (run.rehearsal)
    # config changes after launch (`resume --set`, ops/amend.py): {"count", "method", "last"}; None: none
    amendments: dict[str, Any] | None = None
    canary: dict[str, Any] | None = None  # what cleared the launch (canary/record.py); None: none was asked for
    # the watcher job (`watch --submit`, ops/watcher.py): {"job_id", "state"}; state None: not in the queue
    watcher: dict[str, Any] | None = None
    # launch time, elapsed, round durations, the running round's time, the projected finish (round/timing.py)
    timing: dict[str, Any] | None = None
    # the projection (views/plan.py: round, run, longest phase) against the completed rounds and phases
    projection: dict[str, Any] | None = None
    # the verifier's own refusals (round/refusals.round_refusals) of the current round's finished verify
    # shards, else of the round before; with "text", the one line status prints; None: none counted yet
    refusals: dict[str, Any] | None = None
    # the file system holding the run directory: {"path", "free_bytes", "total_bytes"} (round/disk.free_space)
    free_space: dict[str, Any] | None = None
    # corrupt shard outputs (run/quarantine.py): {"found": noted and still in place, "quarantined": moved aside}
    damaged: dict[str, Any] | None = None
    # `launch --from RUN --round N` (ops/fork.py): the run's forked_from.json (parent, parent_dir, round, ...); None: no fork
    forked_from: dict[str, Any] | None = None
    # held-out evaluation (scheduling/eval_jobs.evaluations): per evaluated round, its job and sets done
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def repairable(self) -> bool:
        """A stall that `sgsbatch resume` repairs as is (what `watch` resumes on its own)."""
        return self.stall is not None and self.stall.repairable

    @property
    def needs_person(self) -> bool:
        """Only a person can take the run on: stalled for a reason `resume` alone does not repair (a
        shard out of retries), failed, or cancelled (`watch` exits 1)."""
        return self.state in ("failed", "cancelled") or (self.state == "stalled" and not self.repairable)

    def to_json(self) -> dict[str, Any]:
        """The `status --json` object: the fields above; `jobs`, `sacct` and `driver_pid` only when known."""
        out: dict[str, Any] = {
            "name": self.name, "state": self.state, "message": self.message, "executor": self.executor,
            "rounds": self.rounds, "rounds_completed": self.rounds_completed, "round": self.round,
            "phase": self.phase, "simulated": self.simulated, "smoke": self.smoke,
            "rehearsal": self.rehearsal, "targets": self.targets,
            "run_dir": self.run_dir, "metrics": self.metrics,
            "stall": self.stall.value if self.stall else None, "environment": self.environment,
            "progress": self.progress, "solve_rate_curve": self.solve_rate_curve,
            "sparkline": sparkline(self.solve_rate_curve, 0.0, 1.0), "disk": self.disk, "alerts": self.alerts,
            "amendments": self.amendments, "canary": self.canary, "watcher": self.watcher, "timing": self.timing,
            "projection": self.projection, "refusals": self.refusals, "free_space": self.free_space,
            "damaged": self.damaged, "forked_from": self.forked_from, "evaluations": self.evaluations,
        }
        if self.jobs is not None:
            out["jobs"] = self.jobs
        if self.sacct_unavailable:
            out["sacct"] = "unavailable: job states from squeue only"
        if self.driver_pid is not None:
            out["driver_pid"] = self.driver_pid
        return out


def amendment_summary(h: RunHandle) -> dict[str, Any] | None:
    """`status`'s view of the run's amendments: how many, how many change method, the last one."""
    from sgsbatch.views.amendments import describe, history

    records = history(h)
    if not records:
        return None
    return {"count": len(records), "method": sum(r["kind"] == "method" for r in records), "last": records[-1],
            "last_text": describe(records[-1])}


def one_line(reason: str) -> str:
    """A failure reason as one line: reasons are written that way, but a run's older `.failed` markers
    may hold a whole traceback (then its exception line is kept)."""
    if "\n" not in reason.strip():
        return reason.strip()
    head, _, rest = reason.partition("\n")
    return f"{head.rstrip(': ')}: {error_line(rest)}"


def refusals_now(h: RunHandle, r: int) -> dict[str, Any] | None:
    """Round r's refusals by the verifier's own rules (its finished verify shards), else round r - 1's,
    with the line `status` prints ("text"); None when neither has a finished shard that counted them."""
    for q in (r, r - 1):
        s = round_refusals(h.cfg, h.paths, q) if q >= 0 else None
        if s is not None:
            return {**s, "text": summary_text(s, h.cfg.alerts.refused_items)}
    return None


def run_status(h: RunHandle, live: bool = True, detail: bool = True) -> RunStatus:
    """The run's status; `live=False` skips asking the scheduler (database and files only);
    `detail=False` (polling) asks the scheduler's accounting only when a job has left the queue."""
    row = h.row()
    with h.db.read() as s:
        done_rounds = s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all()
        completed = len(done_rounds)
        metrics: dict[str, float] = {}
        if completed:
            last = max(done_rounds)
            metrics = {m.name: m.value for m in s.exec(select(Metric).where(Metric.run_id == h.run_id,
                                                                             Metric.round == last)).all()}
        curve = [m.value for m in s.exec(select(Metric).where(Metric.run_id == h.run_id,
                                                              Metric.name == CUMULATIVE_SOLVE_RATE)
                                             .order_by(Metric.round)).all()]  # type: ignore[arg-type]
        evaluated: dict[int, dict[str, float]] = {}  # eval/<set>/pass@<k> of every evaluated round
        for m in s.exec(select(Metric).where(Metric.run_id == h.run_id,
                                             Metric.name.startswith(EVAL_PREFIX))).all():
            evaluated.setdefault(m.round, {})[m.name] = m.value
        env_row = s.get(RunEnvironment, h.run_id)
        launch_env = environment.summary(json.loads(env_row.record)) if env_row is not None else None
    r = min(completed, h.cfg.run.rounds - 1)
    phase = current_phase(h.cfg, h.paths, r)
    st = RunStatus(name=row.name, state=row.state.value, message=row.message, executor=row.executor,
                   rounds=row.rounds, rounds_completed=completed, round=r, phase=phase, simulated=row.simulated,
                   smoke=row.smoke, targets=row.targets, run_dir=row.run_dir, metrics=metrics,
                   environment=launch_env, solve_rate_curve=curve, disk=disk_usage(h.cfg, h.paths, completed),
                   rehearsal=h.cfg.run.rehearsal, amendments=amendment_summary(h),
                   canary=read_run_record(h.paths.root), timing=run_timing(h), forked_from=lineage.read(h.paths),
                   evaluations=[{**e, "metrics": evaluated.get(int(str(e["round"])), {})} for e in evaluations(h)])
    assert st.timing is not None
    if detail:  # what `status` shows; the polls of `--wait` and `watch` print no projection
        st.projection = run_projection(h, row.targets, st.timing, metrics)
    if row.state not in (RunState.completed, RunState.cancelled) and phase is not None:
        st.progress = phase_progress(h.cfg, h.paths, r, phase)
    st.alerts = alarms(h.cfg, h.paths, r, st.progress, st.disk) if row.state != RunState.completed else []
    st.refusals = refusals_now(h, r)
    st.free_space = free_space(h.paths)
    found, moved = quarantine.unresolved(h.paths), quarantine.records(h.paths)
    if found or moved:
        st.damaged = {"found": found, "quarantined": moved,
                      "repair": command("rebuild", h.paths, "--force") if found else None}
    if row.state in (RunState.completed, RunState.cancelled, RunState.failed):
        st.phase = None if row.state == RunState.completed else phase
        return st
    failed = next(((r, p, reason) for p in h.cfg.phases_of_round(r)
                   if (reason := failed_reason(h.paths.phase_dir(r, p), h.at(r).shard_count(p)))), None)
    rollout = rollout_shard_of(h.paths, r) if h.cfg.colocated() else None  # a colocated job covering round r
    if failed is None and rollout is not None and (reason := rollout[1].failed_reason()) is not None:
        failed = (rollout[0], ROLLOUT_JOB, reason)
    if failed:
        st.state, st.stall = "stalled", StallReason.shard_out_of_retries
        # the round as stored (0-based), as in the reason, `logs --round` and what `resume` prints
        log = command("logs", h.paths, "--round", str(failed[0]), "--phase", failed[1])
        st.message = (f"{one_line(failed[2])}; the whole log: `{log}`; "
                      f"fix the cause, then `{command('resume', h.paths)}` (it resubmits round {r}'s unfinished shards)")
        return _blame(h, st)
    if not live:
        return st
    if (job := watcher.recorded_job(h.paths)) is not None:
        st.watcher = {"job_id": job["job_id"], "state": watcher.live_state(str(job["job_id"]))}
    alive = executor_for(h).liveness(h, r, phase, detail)
    st.state, st.stall = alive.state, alive.stall
    st.message = st.message if alive.message is None else alive.message
    st.jobs, st.sacct_unavailable, st.driver_pid = alive.jobs, alive.sacct_unavailable, alive.driver_pid
    return _blame(h, st)


def _blame(h: RunHandle, st: RunStatus) -> RunStatus:
    """A stalled run's message names what stopped it when the run directory shows it: a corrupt shard
    output a command met (run/quarantine.note), or a full disk (round/disk.full_disk)."""
    if st.state != "stalled":
        return st
    disk = full_disk(h.cfg, st.free_space)
    if st.damaged and st.damaged["found"]:
        f = st.damaged["found"][0]
        st.message = (f"{h.paths.root / f['file']} is corrupt ({f['reason']}); `{st.damaged['repair']}` moves it to "
                      f"quarantine/ (kept), keeps its readable records and rebuilds the database; then "
                      f"`{command('resume', h.paths)}`")
    elif disk is not None:
        st.stall = StallReason.disk_full  # not repairable: `watch` stops and says so instead of resuming
        st.message = f"{disk}, then `{command('resume', h.paths)}`"
    return st


def launched_plan(runs_dir: str, name: str) -> tuple[RunPlan, str]:
    """`plan RUN`: a launched run's own config projected (its targets, its amendments), and its projection
    against its completed rounds as `status` shows it ("" before any round completed)."""
    from sgsbatch.errors import InputError
    from sgsbatch.run.handle import open_run

    try:
        h = open_run(runs_dir, name, readonly=True)
    except InputError as e:
        raise InputError(f"{name} is neither a jobs file nor a launched run: {e}") from None
    st = run_status(h, live=False)
    plan = make_plan(h.cfg, st.targets, where=str(h.paths.config))
    compared = comparison_text(st.projection) if st.projection and st.rounds_completed else None
    return plan, f"  against its {st.rounds_completed} completed rounds: {compared}" if compared else ""


def refresh(read: Callable[[], list[dict[str, Any]]], show: Callable[[list[dict[str, Any]]], None], *,
            watch: bool, interval: float, between: Callable[[], None] = lambda: None) -> None:
    """`status` and `status --watch`: read the runs' statuses and show them; with `watch`, again every
    `interval` seconds (`between` after each wait) until every run is `finished` (views/wording.py)."""
    while True:
        rows = read()
        show(rows)
        if not watch or (rows and all(finished(st) for st in rows)):
            return
        time.sleep(interval)
        between()
