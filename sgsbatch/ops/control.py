"""The run lifecycle behind the CLI: launch, resume (repair), cancel, wait, watch.

`launch` validates everything before it creates anything: a bad config or bad data raises
before a directory, a database row or a Slurm job exists. `resume` repairs a broken chain:
it cancels what is left of the run's jobs, clears the failure markers of unfinished shards,
finishes a round whose training is done but whose ending was lost, and resubmits only
unfinished work. `cancel` stops every job (or the local driver) and marks the run cancelled;
nothing recorded is deleted, and `resume` can continue it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import select

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError, RunError, SchedulerError
from sgsbatch.run.handle import RunHandle, create_run
from sgsbatch.run.shards import Shard
from sgsbatch.state.schema import RunState, SlurmJob

TERMINAL = ("completed", "failed", "cancelled", "stalled")


@dataclass
class Plan:
    cfg: Config
    executor: str
    targets: int
    rejected: list[str]

    def describe(self) -> str:
        c = self.cfg
        lines = [f"run {c.run.name}: {c.run.rounds} rounds, executor {self.executor}, seed {c.run.seed}",
                 f"targets: {self.targets if self.targets >= 0 else 'loaded at launch'} from {c.data.source}"]
        if self.rejected:
            lines.append(f"rejected data rows: {len(self.rejected)} (" + "; ".join(self.rejected[:5]) + ")")
        if c.simulated:
            lines.append("verifier: SIMULATED (deterministic stand-in, not Lean)")
        lines.append(f"solver: {c.models.solver}, objective {c.solver.objective}, {c.solver.samples} samples; "
                     f"conjecturer: {c.models.conjecturer if c.conjecturer.enabled else 'off'}"
                     f"{'' if c.conjecturer.train else ' (frozen)'}; guide: "
                     f"{c.models.guide if c.guide.enabled else 'off'}")
        lines.append("phases per round (round 0 starts with init):")
        for phase in c.phases_of_round(0):
            r = c.phase_resources(phase)
            where = ", ".join(x for x in (r.partition and f"partition={r.partition}", r.account and f"account={r.account}",
                                          r.qos and f"qos={r.qos}") if x) or "default partition"
            lines.append(f"  {phase:<10} shards={c.shard_count(phase):<4} gpus={r.gpus} cpus={r.cpus} mem={r.mem} "
                         f"time={r.time_min}min parallel={r.array_parallelism} {where}"
                         + (f" extra={r.extra}" if r.extra else ""))
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


def _load_targets(cfg: Config, config_path: Path) -> tuple[list[Any], list[str]]:
    """The run's targets and the rejected rows; any loading failure is a data.source error."""
    from sgsbatch.data import load_targets

    c = cfg.data
    try:
        loaded = load_targets(c.source, fmt=c.format, strict=c.strict, limit=c.limit or None)
    except Exception as e:  # a bad file, the hub or the datasets library: a data problem either way
        raise ConfigError(str(config_path), "data.source", f"could not load {c.source!r}: {e}; give a "
                          f"reachable dataset id or a local path") from e
    if not loaded.targets:
        raise ConfigError(str(config_path), "data.source", f"{c.source} holds no usable targets")
    return list(loaded.targets), [f"{x.id_or_line}: {x.reason}" for x in loaded.rejected]


def plan(config_path: Path, overrides: Sequence[str], smoke: bool = False,
         load_remote: bool = False) -> tuple[Plan, list[Any]]:
    """Validate a launch. Targets from a hub id are loaded only with `load_remote` (not in a dry run)."""
    from sgsbatch.config.loading import is_path_like

    cfg = load_config(config_path, overrides)
    if smoke:
        from sgsbatch.config.smoke import smoke_config

        cfg = smoke_config(cfg, config_path, overrides)
    executor = resolve_executor(cfg)
    if not (load_remote or is_path_like(cfg.data.source)):
        return Plan(cfg, executor, -1, []), []
    targets, rejected = _load_targets(cfg, config_path)
    return Plan(cfg, executor, len(targets), rejected), targets


def launch(config_path: Path, overrides: Sequence[str], smoke: bool = False) -> RunHandle:
    from sgsbatch.round.lifecycle import prepare_round

    p, targets = plan(config_path, overrides, smoke, load_remote=True)
    h = create_run(p.cfg, targets, p.executor)
    prepare_round(h, 0)
    start(h)
    h.set_state(RunState.running)
    return h


def start(h: RunHandle) -> None:
    """Submit (Slurm) or start (local) the run's unfinished work."""
    if h.row().executor == "local":
        from sgsbatch.scheduling.local import start_driver

        start_driver(h)
        return
    from sgsbatch.round.lifecycle import round_completed
    from sgsbatch.scheduling.slurm import submit_round

    r = next(i for i in range(h.cfg.run.rounds) if not round_completed(h, i))
    submit_round(h, r, only_unfinished=True)


def _deactivate_jobs(h: RunHandle) -> list[str]:
    with h.db.write() as s:
        jobs = s.exec(select(SlurmJob).where(SlurmJob.run_id == h.run_id, SlurmJob.active)).all()
        ids = [j.job_id for j in jobs]
        for j in jobs:
            j.active = False
            s.add(j)
    return ids


def stop_everything(h: RunHandle) -> None:
    if h.row().executor == "local":
        from sgsbatch.scheduling.local import stop_driver

        stop_driver(h.paths)
        return
    from sgsbatch.scheduling.slurm import cancel as scancel

    scancel(_deactivate_jobs(h))


def cancel(h: RunHandle) -> None:
    if h.row().state == RunState.completed:
        raise RunError(f"run {h.cfg.run.name!r} is completed; nothing to cancel")
    stop_everything(h)
    h.set_state(RunState.cancelled, "cancelled by user")


def resume(h: RunHandle, force: bool = False) -> str:
    """Repair and continue; returns what was done, in words."""
    from sgsbatch.ops.status import run_status
    from sgsbatch.round.lifecycle import finish_round, prepare_round, round_completed

    st = run_status(h)
    if st["state"] == "completed":
        raise RunError(f"run {h.cfg.run.name!r} is completed; nothing to resume")
    if st["state"] in ("running", "pending") and not force:
        return f"run {h.cfg.run.name} is {st['state']}; nothing to repair (use --force to resubmit anyway)"
    stop_everything(h)
    r = next(i for i in range(h.cfg.run.rounds) if not round_completed(h, i))
    for phase in h.cfg.phases_of_round(r):
        for i in range(h.cfg.shard_count(phase)):
            sh = Shard(h.paths.phase_dir(r, phase), i)
            if not sh.is_done():
                sh.clear_failures()
    train = Shard(h.paths.phase_dir(r, "train"), 0)
    if train.is_done():  # training finished but the round's ending was lost
        finish_round(h, r, {x["role"]: x for x in train.read()})
    prepare_round(h, r)
    h.set_state(RunState.running, "resumed")
    start(h)
    return f"run {h.cfg.run.name}: resubmitted unfinished work from round {r} ({st['state']}: {st['message']})"


def wait(h: RunHandle, poll_s: float = 5.0, on_change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Poll until the run completes, fails, is cancelled or stalls; returns the last status."""
    from sgsbatch.ops.status import run_status

    last = None
    stalled_since = None
    while True:
        st = run_status(h)
        key = (st["state"], st["round"], st["phase"])
        if on_change and key != last:
            on_change(st)
        last = key
        if st["state"] == "stalled":  # a chain hand-over can look stalled for a moment: confirm it
            stalled_since = stalled_since or time.time()
            if time.time() - stalled_since > 3 * poll_s:
                return st
        else:
            stalled_since = None
        if st["state"] in TERMINAL and st["state"] != "stalled":
            return st
        time.sleep(poll_s)
