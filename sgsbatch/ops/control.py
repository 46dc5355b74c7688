"""The run lifecycle behind the CLI: launch, resume (repair), cancel, wait, watch.

`launch` validates everything before it creates anything: a bad config or bad data raises
before a directory, a database row or a Slurm job exists. `resume` repairs a broken chain:
it cancels what is left of the run's jobs, clears the failure markers of unfinished shards,
ends a round whose training is done but whose ending was lost (scheduling/chain.py), and
resubmits only unfinished work. `cancel` stops every job (or the local driver) and marks the run
cancelled; nothing recorded is deleted, and `resume` can continue it. `watch` resumes every
repairable stall (`StallReason.repairable`) until the run ends or needs a person. All of it goes through the
run's `Executor`; nothing here branches on which one it is. `watch` also writes the live alarms
to TensorBoard (`status` itself is read-only).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError

from sgsbatch.config.loading import (
    Origins,
    check_eval_sets,
    data_origin,
    load_config,
    origin_of,
    parse_override,
)
from sgsbatch.config.schema import PUBLISHED_CLIP, Config
from sgsbatch.errors import ConfigError, RunError, SchedulerError, disk_full_message, is_disk_full
from sgsbatch.ops.notify import Event, events
from sgsbatch.round.alarms import alert_values
from sgsbatch.round.lifecycle import first_unfinished_round, prepare_round
from sgsbatch.round.metrics import ALERT_KINDS, alert, write_live_alerts
from sgsbatch.run.handle import RunHandle, create_run, new_run_paths
from sgsbatch.run.lock import LockHeld, OwnerLock, describe
from sgsbatch.run.paths import RUNS_DIR_ENV, run_paths
from sgsbatch.run.quarantine import note
from sgsbatch.run.shards import CorruptShard, Shard, rollout_shard_of, unfinished
from sgsbatch.scheduling.eval_jobs import cancel_pending
from sgsbatch.scheduling.executor import executor_for
from sgsbatch.scheduling.liveness import StallReason
from sgsbatch.state.schema import RunState
from sgsbatch.views.status import RunStatus, run_status

ENDED = ("completed", "failed", "cancelled")


@dataclass
class Plan:
    cfg: Config
    executor: str
    targets: int
    rejected: list[str]
    checked: list[str] = field(default_factory=list)  # what the pre-flight checked and found in order
    runs_dir_from: str = ""  # where run.runs_dir came from (a file, --runs-dir, $SGSBATCH_RUNS_DIR, ...)
    site: Path | None = None  # the site file laid over the jobs file

    def describe(self) -> str:
        c = self.cfg
        lines = [f"run {c.run.name}: {c.run.rounds} rounds, executor {self.executor}, seed {c.run.seed}",
                 f"run directory: {run_paths(c.run.runs_dir, c.run.name).root} (runs_dir from "
                 f"{self.runs_dir_from or 'the default, ./runs'})",
                 f"targets: {self.targets if self.targets >= 0 else 'loaded at launch'} from {c.data.source}"]
        if self.site is not None:
            lines.append(f"site file: {self.site}")
        if self.rejected:
            lines.append(f"rejected data rows: {len(self.rejected)} (" + "; ".join(self.rejected[:5]) + ")")
        if c.simulated:
            lines.append(f"SIMULATED: {', '.join(c.simulated_parts())} (deterministic stand-ins, not a model or Lean)")
        clip = (" (clip {:g} / {:g})".format(*c.solver.clip_range()) if c.solver.objective in PUBLISHED_CLIP
                else "")
        cj = c.conjecturer
        selection = f", selection {c.solver.selection}" if c.solver.selection != "auto" else ""
        how = ", ".join(x for x in (cj.setup != "target_statement_only_unsolved" and f"setup {cj.setup}",
                                    cj.reward != "sgs" and f"reward {cj.reward}") if x)
        lines.append(f"solver: {c.models.solver}, objective {c.solver.objective}{clip}{selection}, {c.solver.samples} "
                     f"samples; conjecturer: {c.models.conjecturer if cj.enabled else 'off'}"
                     f"{'' if cj.train else ' (frozen)'}{f' ({how})' if how and cj.enabled else ''}; guide: "
                     f"{c.models.guide if c.guide.enabled else 'off'}")
        lines.append("phases per round (round 0 starts with init):")
        for phase in c.phases_of_round(0):
            r = c.phase_resources(phase)
            where = ", ".join(x for x in (r.partition and f"partition={r.partition}", r.account and f"account={r.account}",
                                          r.qos and f"qos={r.qos}") if x) or "default partition"
            lines.append(f"  {phase:<10} shards={c.shard_count(phase):<4} gpus={r.gpus} cpus={r.cpus} mem={r.mem} "
                         f"time={r.time_min}min parallel={r.array_parallelism} {where}"
                         + (f" extra={r.extra}" if r.extra else ""))
        setups: dict[tuple[str, ...], list[str]] = {}
        for phase in c.phases_of_round(0):
            if c.phase_resources(phase).setup:
                setups.setdefault(c.phase_resources(phase).setup, []).append(phase)
        for setup, phases in setups.items():
            lines.append(f"job script setup ({', '.join(phases)}): " + "; ".join(setup))
        if self.checked:
            lines.append("pre-flight passed:")
            lines += [f"  ok  {c}" for c in self.checked]
        return "\n".join(lines)


def resolve_executor(cfg: Config) -> str:
    from sgsbatch.scheduling import slurm

    if cfg.run.executor == "local":
        return "local"
    if slurm.available():
        return "slurm"
    if cfg.run.executor == "slurm":
        raise SchedulerError("run.executor = 'slurm' but no Slurm controller answers `sinfo`; start one "
                             "(slurm/cluster.sh up) or use --set run.executor=local")
    return "local"


def _load_targets(cfg: Config, where: str) -> tuple[list[Any], list[str]]:
    """The run's targets and the rejected rows; any loading failure is a data.source error naming `where`."""
    from sgsbatch.logic.data import load_data_source

    loaded = load_data_source(cfg.data, where)
    return list(loaded.targets), [f"{x.id_or_line}: {x.reason}" for x in loaded.rejected]


def runs_dir_layer(option: str | None, overrides: Sequence[str],
                   environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(directory, where it came from) when the command line or the environment chooses where runs
    live, else None (the config's run.runs_dir, by default ./runs). The rule of every command:
    --runs-dir (or `--set run.runs_dir=...`, the same choice) > $SGSBATCH_RUNS_DIR > run.runs_dir of the
    jobs or site file > ./runs."""
    sets = [v for k, v in map(parse_override, overrides) if k == "run.runs_dir"]
    if option:
        if sets and str(sets[-1]) != option:
            raise ConfigError("--runs-dir", "run.runs_dir", f"{option!r} contradicts --set run.runs_dir={sets[-1]}; "
                                                            "give one of them")
        return option, "--runs-dir"
    if sets:
        return None  # the --set is applied as any other
    env = environ.get(RUNS_DIR_ENV)
    return (env, f"${RUNS_DIR_ENV}") if env else None


def load_for_command(config_path: Path, overrides: Sequence[str], site: Path | None = None,
                     runs_dir: str | None = None, origins: Origins | None = None) -> Config:
    """The config a command that reads a jobs file (launch, canary, preflight) works with: the jobs
    file, the site file, --set, and the runs directory by the rule of every command (`runs_dir_layer`:
    --runs-dir > $SGSBATCH_RUNS_DIR > run.runs_dir > ./runs)."""
    return load_config(config_path, overrides, site=site, runs_dir=runs_dir_layer(runs_dir, overrides),
                       origins=origins)


def plan(config_path: Path, overrides: Sequence[str], smoke: bool = False,
         load_remote: bool = False, rehearse: bool = False, site: Path | None = None,
         runs_dir: str | None = None) -> tuple[Plan, list[Any]]:
    """Validate a launch. Targets from a hub id are loaded only with `load_remote` (not in a dry run).
    `site`: the site file; `runs_dir`: --runs-dir (`load_for_command`)."""
    from sgsbatch.config.loading import is_path_like

    if smoke and rehearse:
        raise ConfigError("--rehearse", "", "cannot be combined with --smoke: a rehearsal keeps the config's "
                                            "scale and only simulates compute; choose one")
    origins: Origins = {}
    cfg = load_for_command(config_path, overrides, site, runs_dir, origins)
    runs_dir_from = origin_of(origins, "run.runs_dir", "")
    if cfg.run.rehearsal and not rehearse:
        raise ConfigError(str(config_path), "run.rehearsal", "is set only by `launch --rehearse`; remove it "
                                                            "from the config and pass --rehearse instead")
    if rehearse:
        from sgsbatch.config.rehearsal import rehearsal_config

        cfg = rehearsal_config(cfg, config_path, overrides)
    if smoke:
        from sgsbatch.config.smoke import smoke_config

        cfg = smoke_config(cfg, config_path, overrides)
    new_run_paths(cfg)  # the name is free (a dry run refuses what the launch would)
    executor = resolve_executor(cfg)
    # before anything is created or submitted: the site's limits (Slurm), and on either executor what
    # the jobs will load (vLLM, the Lean project, the weights: scheduling/local_checks.py)
    from sgsbatch.scheduling.preflight import require

    checked = require(cfg, site=executor == "slurm").checked
    if not (load_remote or is_path_like(cfg.data.source)):
        return Plan(cfg, executor, -1, [], checked, runs_dir_from, site), []
    targets, rejected = _load_targets(cfg, data_origin(origins, str(config_path)))
    check_eval_sets(cfg, origins, str(config_path), load_remote)  # config/loading.py
    return Plan(cfg, executor, len(targets), rejected, checked, runs_dir_from, site), targets



def canary_clearance(cfg: Config, executor: str, skip: bool) -> dict[str, Any] | None:
    """What the run records about its canary (canary/record.py), or a RunError when a research
    config on Slurm has no passed canary of its fingerprint and environment and `skip` is false.
    None when no canary is asked for (local executor, tiny, smoke, rehearsal, SIMULATED parts)."""
    from sgsbatch.canary.record import clearance, fingerprint, latest, needs_canary

    if executor != "slurm" or not needs_canary(cfg):
        return None
    if skip:
        return {"skipped": True, "fingerprint": fingerprint(cfg), "time": time.time()}
    ok, why = clearance(cfg)
    if not ok:
        raise RunError(f"{why}; run `sgsbatch canary CONFIG` with the same --set options first (it checks every real "
                       "component where the jobs run, in minutes), or pass --skip-canary to launch anyway")
    res = latest(cfg.run.runs_dir, cfg)
    assert res is not None
    return {"skipped": False, "fingerprint": res["fingerprint"], "canary_time": res["time"], "site": res["site"],
            "jobs": res["jobs"], "reason": why}


def launch(config_path: Path, overrides: Sequence[str], smoke: bool = False, rehearse: bool = False,
           skip_canary: bool = False, site: Path | None = None, runs_dir: str | None = None) -> RunHandle:
    p, targets = plan(config_path, overrides, smoke, load_remote=True, rehearse=rehearse, site=site,
                      runs_dir=runs_dir)
    cleared = canary_clearance(p.cfg, p.executor, skip_canary)
    h = create_run(p.cfg, targets, p.executor)
    if cleared is not None:
        from sgsbatch.canary.record import write_run_record

        write_run_record(h.paths.root, cleared)
    prepare_round(h, 0)
    start(h)
    h.set_state(RunState.running)
    return h


def start(h: RunHandle) -> None:
    """Submit (Slurm) or start (local) the run's unfinished work."""
    executor_for(h).start(h, first_unfinished_round(h))


@contextmanager
def _owning(h: RunHandle, name: str, refusal: Callable[[str], str]) -> Iterator[None]:
    """Hold the run's `name` lock (run/lock.py) for the block; a live holder is a RunError, `refusal`
    of its description."""
    try:
        lock = OwnerLock(h.paths.root / name).acquire()
    except LockHeld as e:
        raise RunError(refusal(describe(e.holder))) from None
    with lock:
        yield


@contextmanager
def controlling(h: RunHandle) -> Iterator[None]:
    """One command at a time changes a run (`cancel`, `resume`): a second one, from any host that
    shares the run directory, is refused naming the first (run/lock.py)."""
    with _owning(h, "control.lock", lambda who: f"another sgsbatch command ({who}) is changing run "
                                                f"{h.cfg.run.name} right now; wait for it to end, then try again"):
        yield


def cancel(h: RunHandle) -> None:
    with controlling(h):
        if h.row().state == RunState.completed:
            raise RunError(f"run {h.cfg.run.name!r} is completed; nothing to cancel")
        # cancelled first: a Slurm train job ending its round now submits no next round (chain.py)
        try:
            h.set_state(RunState.cancelled, "cancelled by user")
        except Exception as e:  # a full disk: the jobs are stopped all the same (they would only fill it further)
            if isinstance(e, OSError) and is_disk_full(e):
                full = e
            elif isinstance(e, DBAPIError) and "disk is full" in str(e.orig):  # SQLite's SQLITE_FULL
                full = OSError(errno.ENOSPC, f"SQLite: {e.orig}")
            else:
                raise
            executor_for(h).stop(h)
            cancel_pending(h)
            raise RunError(f"run {h.cfg.run.name}: its jobs are stopped, but the cancellation could not be recorded: "
                           f"{disk_full_message(full, str(h.paths.root))}") from None
        executor_for(h).stop(h)
        cancel_pending(h)  # held-out evaluation jobs beside the chain hold GPUs too


def resume(h: RunHandle, force: bool = False) -> str:
    """Repair and continue; returns what was done, in words."""
    with controlling(h):
        return resume_locked(h, force)


def resume_locked(h: RunHandle, force: bool) -> str:
    """`resume` for a caller already `controlling(h)` (`resume --set` amends the config first)."""
    from sgsbatch.scheduling.chain import end_round_from_marker

    st = run_status(h)
    if st.state == "completed":
        raise RunError(f"run {h.cfg.run.name!r} is completed; nothing to resume")
    stuck = [a for a in st.alerts if a["metric"] == alert("stuck_shards")]
    if st.state in ("running", "pending") and not force and not stuck:
        return f"run {h.cfg.run.name} is {st.state}; nothing to repair (use --force to resubmit anyway)"
    if st.stall == StallReason.disk_full and not force:  # its tasks would only wait for space: say so instead
        raise RunError(f"run {h.cfg.run.name} is not resumed: {st.message} (--force resubmits it anyway)")
    executor_for(h).stop(h)
    r = first_unfinished_round(h)
    hung = _count_hangs(h, st, stuck)
    for phase in h.cfg.phases_of_round(r):
        for i in unfinished(h.paths.phase_dir(r, phase), h.at(r).shard_count(phase)):
            if (phase, i) not in hung:
                Shard(h.paths.phase_dir(r, phase), i).clear_failures()
    rollout = rollout_shard_of(h.paths, r) if h.cfg.colocated() else None  # the colocated job covering round r
    if rollout is not None and not rollout[1].is_done():
        rollout[1].clear_failures()
    try:
        end_round_from_marker(h, r)  # training finished but the round's ending was lost
    except CorruptShard as e:
        note(h.paths, e)  # `status` names it until it is quarantined
        raise
    prepare_round(h, r)
    h.set_state(RunState.running, "resumed")
    start(h)
    return f"run {h.cfg.run.name}: resubmitted unfinished work from round {r} ({st.state}: {st.message})"


def _count_hangs(h: RunHandle, st: RunStatus, stuck: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """A stuck shard is a crash that did not exit: count it like one (the retry limit applies) and
    keep its crash count, so a shard that hangs every time fails instead of being resubmitted forever."""
    hung: set[tuple[str, int]] = set()
    if not stuck or st.phase is None:
        return hung
    limit = h.cfg.run.max_task_retries
    for a in stuck:
        shard = Shard(h.paths.phase_dir(st.round, st.phase), int(a["shard"]))
        if shard.record_failure(a["message"]) > limit:
            shard.mark_failed(f"round {st.round} {st.phase} shard {shard.index} failed {limit + 1} times; "
                              f"last: {a['message']}")
        hung.add((st.phase, shard.index))
    return hung


def _fresh(h: RunHandle) -> RunHandle:
    """`h` with config.toml read again; `h` itself when it cannot be read now (the next command says why)."""
    try:
        return h.refreshed()
    except (OSError, ValueError):
        return h


def wait(h: RunHandle, poll_s: float | None = None, on_change: Callable[[RunStatus], None] | None = None
         ) -> RunStatus:
    """Poll every `poll_s` (default `run.poll_interval_s`) until the run completes, fails, is
    cancelled or stalls; returns the last status. Light on the scheduler: squeue every poll, sacct
    only when a job leaves the queue (`run_status(detail=False)`)."""
    fixed_s = poll_s
    last = None
    stalled_since = None
    while True:
        h = _fresh(h)  # `resume --set run.poll_interval_s` (or alerts.*) meanwhile counts from the next poll
        poll_s = h.cfg.run.poll_interval_s if fixed_s is None else fixed_s
        st = run_status(h, detail=False)
        key = (st.state, st.round, st.phase)
        if on_change and key != last:
            on_change(st)
        last = key
        if st.state == "stalled" and not st.needs_person:  # a repairable stall: confirm it is not a passing moment
            stalled_since = stalled_since or time.time()
            if time.time() - stalled_since > 3 * poll_s:
                return st
        else:
            stalled_since = None
        if st.state in ENDED or st.needs_person:
            return st
        time.sleep(poll_s)


def watch_step(h: RunHandle) -> tuple[RunStatus, str | None]:
    """One check of `sgsbatch watch`: the status, and what was done about it (None: nothing).

    A repairable stall is resumed; a shard out of retries is left for a person (its cause must be
    fixed first: an unattended retry would spend the allocation crashing again).
    """
    st = run_status(h, detail=False)
    if st.state == "stalled" and st.repairable:
        return st, resume(h)
    return st, None


def watch(h: RunHandle, interval: float, on_check: Callable[[RunStatus, str | None], None],
          max_checks: int | None = None, on_event: Callable[[RunStatus, Event], None] | None = None,
          stop: Callable[[], bool] | None = None, until_person: bool = True) -> RunStatus:
    """Repair the run whenever it stalls repairably, until it ends, only a person can take it on
    (`RunStatus.needs_person`: a shard out of retries, failed, cancelled; with `until_person` false,
    as in the watcher job, it goes on watching for that person's `resume`), `max_checks` checks
    were made, or `stop()` turns true (checked every second between checks). `on_event` gets every
    stall and every newly raised alarm (ops/notify.py). The live alarms go to TensorBoard
    (`tb/live_alerts/`, step = the round) whenever they change, so nothing is written while none
    was ever raised and zeros are written when they clear. One watcher per run: it holds the run's
    `watch.lock`, and a second is a RunError naming the first."""
    with _owning(h, "watch.lock", lambda who: f"run {h.cfg.run.name} is already watched by {who}; one watcher "
                                              "is enough (two would resume the same stall twice)"):
        checks = 0
        written = alert_values([], ALERT_KINDS)
        raised: set[Hashable] = set()
        while True:
            h = _fresh(h)  # alarm thresholds and the rest amended with `resume --set` since it started
            st, action = watch_step(h)
            on_check(st, action)
            for event in events(st, action, raised):
                if on_event is not None:
                    on_event(st, event)
            values = alert_values(st.alerts, ALERT_KINDS)
            if values != written:
                write_live_alerts(h.paths.tb, st.round, values)
                written = values
            checks += 1
            if (st.state in ENDED or (until_person and st.needs_person)
                    or (max_checks is not None and checks >= max_checks)):
                return st
            end = time.monotonic() + interval
            while time.monotonic() < end:
                if stop is not None and stop():
                    return st
                time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            if stop is not None and stop():
                return st
