"""Changing a live run's config: `sgsbatch resume RUN --set KEY=VALUE [--method-change --from-round N]`.

A long run meets site facts that change under it (a partition renamed or drained, an allocation
spent, a slower filesystem); what may change, and how, depends on what the key decides:

- Operational keys (`--set` alone; effective for every job that starts after it, jobs already
  running keep what they started with, jobs already queued on Slurm keep their resources until
  `resume --force` resubmits them): each phase's Slurm resources `slurm.<phase>.{partition,
  account, qos, time_min, mem, cpus, array_parallelism, extra, signal_delay_s, scratch, setup}`,
  `alerts.*`, `run.rounds` (never below its value: a run is extended, not cut),
  `run.max_task_retries`, `run.allow_env_drift`, `run.poll_interval_s`, `run.local_workers`,
  `checkpoints.{keep_last, keep_every, estimate_gb_per_role}` (retention), `train.collective_timeout_s`
  (how long a collective waits for a lost rank), `report.*`, `scaling.*`, `projection.*`, `eval.*` (held-out
  evaluation: sets, samples, pass@k, every_rounds; a new set must load);
  `slurm.defaults.KEY` sets KEY in all six phases.
- Changes of method (`--set` with `--method-change --from-round N`; the rounds before N keep the
  old value, see run/amendments.config_at): `verification.timeout_s`, `shards.*`, `prompts.*` (a
  shipped set's name or a template file's path). N must be a round not yet started (the first is
  named in the refusal); the current round also qualifies for `verification.timeout_s` and
  `prompts.*` while the phases that read the key have not started in it. `shards.*` never applies
  to a started round (its tasks partition their work by the counts it was created with).
- Everything else is refused with the reason (models, the algorithm's numbers, data, the run's
  identity, GPUs and nodes, what verification accepts, what compaction keeps): changing it would
  make completed rounds another experiment's; launch a new run.

Every change is recorded once per key (old and new value, kind, first round, the command) in the
database table `amendments` and in `<run>/amendments.jsonl` (run/amendments.py), which `rebuild`
restores; `status` and the report show them. Order of the writes: the database (config, hash,
rounds, amendments, the shard counts of a created round not yet started) in one transaction, then
amendments.jsonl, then config.toml, so the run directory stays the run's truth for `rebuild`.
A completed run that is extended is running again (its new rounds are created); `resume` then
starts them.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlmodel import select

from sgsbatch.config.loading import (
    Origins,
    apply_overrides,
    build,
    check_eval_sets,
    check_prompts,
    origin_of,
    parse_override,
    to_dict,
    to_toml,
)
from sgsbatch.config.schema import PHASES, SLURM_TABLES, Config
from sgsbatch.config.validation import semantic_errors
from sgsbatch.errors import ConfigError
from sgsbatch.run import amendments
from sgsbatch.run.amendments import METHOD_KEYS, OPERATIONAL_KEYS, classify, flat_keys
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import command
from sgsbatch.run.shards import atomic_write_text
from sgsbatch.state.schema import Amendment, Phase, Round, Run, RunState, SlurmJob, StoredProof


def _started(h: RunHandle, r: int, phases: Sequence[str]) -> list[str]:
    """The phases of round r (of `phases`) that have started: a task wrote its directory."""
    return [p for p in phases if h.paths.phase_dir(r, p).exists()]


def first_unstarted_round(h: RunHandle) -> int:
    """The first round none of whose work has started: no job submitted (Slurm's journal or rows), no
    task directory, not completed."""
    with h.db.read() as s:
        done = set(s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all())
        jobs = set(s.exec(select(SlurmJob.round).where(SlurmJob.run_id == h.run_id)).all())
    rounds_dir = h.paths.root / "rounds"
    on_disk = {int(p.name[1:]) for p in rounds_dir.glob("r[0-9][0-9][0-9][0-9]")} if rounds_dir.is_dir() else set()
    started = done | jobs | {r for r in on_disk if h.paths.jobs_journal(r).exists()
                             or _started(h, r, PHASES)}
    return max(started) + 1 if started else 0


def _check_from_round(h: RunHandle, cfg: Config, method: dict[str, tuple[Any, Any]], from_round: int | None,
                      origins: Origins) -> tuple[int, str]:
    """The first round of a change of method, and in words why it is allowed; a ConfigError otherwise."""
    first = first_unstarted_round(h)
    key0 = next(iter(method))
    where = origin_of(origins, key0, "--set")
    if from_round is None:
        raise ConfigError(where, key0, f"--method-change needs --from-round N: the first round to use the new value "
                                       f"(N >= {first}, the first round not yet started)")
    if from_round >= cfg.run.rounds:
        raise ConfigError("--from-round", key0, f"round {from_round} is past the run's last round "
                                                f"({cfg.run.rounds - 1}, 0-based); extend it with --set run.rounds=N")
    if from_round < 0:
        raise ConfigError("--from-round", key0, f"must be >= {first} (the first round not yet started)")
    if from_round >= first:
        return from_round, "a round not yet started" if from_round == first else "a later round"
    current = first - 1
    for key, (old, _) in method.items():
        phases = METHOD_KEYS[key]
        if phases is None:
            why = (f"round {from_round} has started, and its tasks split their work by the shard counts it was "
                   f"created with")
        elif from_round != current:
            why = f"round {from_round} has started (its {', '.join(phases)} work ran with {key} = {old!r})"
        elif ran := _started(h, current, phases):
            why = f"round {current}'s {', '.join(ran)} phase has started with {key} = {old!r}"
        else:
            continue
        raise ConfigError(origin_of(origins, key, "--set"), key,
                          f"cannot change from round {from_round}: {why}; the earliest round it can apply to is "
                          f"{first} (--from-round {first})")
    return from_round, (f"the current round, whose {', '.join(sorted({p for k in method for p in METHOD_KEYS[k] or ()}))} "
                        f"phase has not started")


def _expand_slurm_defaults(overrides: Sequence[str]) -> list[str]:
    """`slurm.defaults.KEY=V` as `slurm.<table>.KEY=V` for the six phases and the watcher: a frozen config has no
    [slurm.defaults] (config/loading.py merged it into the phases at launch)."""
    out: list[str] = []
    for text in overrides:
        key, _, value = text.partition("=")
        prefix = "slurm.defaults."
        if key.strip().startswith(prefix) and "=" in text:
            out += [f"slurm.{p}.{key.strip()[len(prefix):]}={value}" for p in SLURM_TABLES]
        else:
            out.append(text)
    return out


def amend(h: RunHandle, overrides: Sequence[str], *, method_change: bool = False,
          from_round: int | None = None) -> tuple[RunHandle, list[str]]:
    """The run with `overrides` applied to its frozen config, and the changes in words (see the module
    docstring); a ConfigError naming the key and the reason when a change is not allowed."""
    if from_round is not None and not method_change:
        raise ConfigError("--from-round", "--method-change", "--from-round goes with --method-change "
                                                             "(it names the first round of a change of method)")
    given, overrides = overrides, _expand_slurm_defaults(overrides)
    _refuse_fixed(overrides)
    origins: Origins = {}
    raw = apply_overrides(to_dict(h.cfg), overrides, Path.cwd(), origins)
    cfg: Config = build(Config, raw, "--set")
    for key, msg in semantic_errors(cfg):
        raise ConfigError(origin_of(origins, key, "--set"), key, msg)
    a, b = flat_keys(to_dict(h.cfg)), flat_keys(to_dict(cfg))
    changed = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    method = _method_changes(h, changed, origins, given, method_change)
    _check_amended(h, cfg, changed, method, origins, method_change)
    if not changed:
        return h, []
    start, why = _check_from_round(h, cfg, method, from_round, origins) if method else (None, "")
    now, current = time.time(), _current_round(h)
    cmd = _command(h, given, method_change, from_round)
    records: list[dict[str, Any]] = [
        {"at": now, "key": k, "old": old, "new": new, "kind": amendments.METHOD if k in method else amendments.OPERATIONAL,
         "from_round": start if k in method else None, "round": current, "command": cmd}
        for k, (old, new) in changed.items()]
    _write(h, cfg, records, start)
    return RunHandle(cfg, h.paths, h.db, h.run_id), [_in_words(h, rec, start, why) for rec in records]


def _refuse_fixed(overrides: Sequence[str]) -> None:
    """A ConfigError for the first `--set` of a key (or table) that can never change after launch."""
    for text in overrides:
        key, _ = parse_override(text)
        kind, why = classify(key)
        if kind is None and not any(k.startswith(key + ".") for k in (*OPERATIONAL_KEYS, *METHOD_KEYS)):
            raise ConfigError(f"--set {text}", key, f"cannot change after launch: {why}; launch a new run "
                              f"(docs/operating.md: Amending a live run lists what can change)")


def _method_changes(h: RunHandle, changed: dict[str, tuple[Any, Any]], origins: Origins, given: Sequence[str],
                    method_change: bool) -> dict[str, tuple[Any, Any]]:
    """The changes of method among `changed` (each key classified; a fixed key or a change of method
    without --method-change refused, naming the key and the command that would do it)."""
    method: dict[str, tuple[Any, Any]] = {}
    for key, (old, new) in changed.items():
        kind, why = classify(key)
        where = origin_of(origins, key, "--set")
        if kind is None:
            raise ConfigError(where, key, f"cannot change after launch: {why}; launch a new run "
                                          f"(docs/operating.md: Amending a live run lists what can change)")
        if kind == amendments.METHOD:
            if not method_change:
                first = first_unstarted_round(h)
                raise ConfigError(where, key, f"changes what the run computes from the round it applies to; amend it "
                                              f"as a change of method with `{_command(h, given, True, first)}` "
                                              f"(N >= {first}, the first round not yet started)")
            method[key] = (old, new)
    return method


def _check_amended(h: RunHandle, cfg: Config, changed: dict[str, tuple[Any, Any]],
                   method: dict[str, tuple[Any, Any]], origins: Origins, method_change: bool) -> None:
    """The rules the amended config as a whole must keep: rounds only grow, --method-change changes method,
    changed prompts and evaluation sets load."""
    if cfg.run.rounds < h.cfg.run.rounds:
        raise ConfigError(origin_of(origins, "run.rounds", "--set"), "run.rounds",
                          f"can only grow (a run is extended, not cut): it is {h.cfg.run.rounds}")
    if method_change and not method:
        raise ConfigError("--method-change", "--set", "no key given changes method ("
                          + ", ".join(METHOD_KEYS) + "); drop --method-change and --from-round")
    if any(k.startswith("prompts.") for k in method):
        check_prompts(cfg, "--set")
    if any(k.startswith("eval.") for k in changed):  # a new or changed evaluation set loads like data.source
        check_eval_sets(cfg, origins, "--set", load_remote=True)


def _in_words(h: RunHandle, rec: dict[str, Any], start: int | None, why: str) -> str:
    change = f"{rec['key']}: {rec['old']!r} -> {rec['new']!r}"
    if rec["kind"] == amendments.METHOD:
        return f"{change} (a change of method from round {start}: {why}; rounds before it keep {rec['old']!r})"
    if rec["key"].startswith("slurm."):
        return (f"{change} (for jobs submitted from now on; jobs already queued keep theirs until "
                f"`{command('resume', h.paths, '--force')}` resubmits the unfinished work)")
    return change


def _current_round(h: RunHandle) -> int:
    with h.db.read() as s:
        done = set(s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all())
    return next((i for i in range(h.cfg.run.rounds) if i not in done), h.cfg.run.rounds - 1)


def _command(h: RunHandle, overrides: Sequence[str], method_change: bool, from_round: int | str | None) -> str:
    words = [w for o in overrides for w in ("--set", shlex.quote(o))]
    if method_change:
        words += ["--method-change", "--from-round", str("N" if from_round is None else from_round)]
    return command("resume", h.paths, *words)


def _write(h: RunHandle, cfg: Config, records: list[dict[str, Any]], start: int | None) -> None:
    text = to_toml(cfg)
    with h.db.write() as s:
        run = s.get(Run, h.run_id)
        assert run is not None
        run.config_toml, run.config_hash, run.updated_at = text, hashlib.sha256(text.encode()).hexdigest(), time.time()
        for rec in records:
            s.add(Amendment(run_id=h.run_id, at=rec["at"], key=rec["key"], old=json.dumps(rec["old"]),
                            new=json.dumps(rec["new"]), kind=rec["kind"], from_round=rec["from_round"],
                            round=rec["round"], command=rec["command"]))
        history = [*amendments.read(h.paths), *records]
        if start is not None:  # a created round not yet started gets the new shard counts
            for ph in s.exec(select(Phase).where(Phase.run_id == h.run_id, Phase.round >= start)).all():
                ph.shards = amendments.config_with(cfg, history, ph.round).shard_count(ph.kind)
                s.add(ph)
        if cfg.run.rounds > run.rounds:
            done = s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all()
            nxt = max(done) + 1 if done else 0
            if run.state == RunState.completed and nxt < cfg.run.rounds:
                run.state, run.message = RunState.running, f"extended to {cfg.run.rounds} rounds"
                solved = s.exec(select(func.count(func.distinct(StoredProof.problem_id))).where(
                    StoredProof.run_id == h.run_id)).one()
                s.add(Round(run_id=h.run_id, index=nxt, state="pending", unsolved=run.targets - solved))
                at = amendments.config_with(cfg, history, nxt)
                for kind in cfg.phases_of_round(nxt):
                    s.add(Phase(run_id=h.run_id, round=nxt, kind=kind, shards=at.shard_count(kind)))
            run.rounds = cfg.run.rounds
        s.add(run)
    amendments.append(h.paths, records)
    atomic_write_text(h.paths.config, text)
