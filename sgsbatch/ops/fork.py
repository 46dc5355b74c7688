"""Forking a run: `sgsbatch launch CONFIG --from RUN --round N`, a new run from RUN's round N.

The child inherits the parent's rounds 0..N-1 exactly as they ran (their shard files, the solved
store and solve-rate history derived from them, the weights they trained) and runs rounds N.. itself
with its own config: ablations from a shared trunk. N counts the inherited rounds and is the child's
first own round, 0-based as `resume --from-round` and the run directory's `rounds/rNNNN`; it needs
1 <= N <= the parent's completed rounds and the child's run.rounds > N.

Refused, naming the keys and what to do: a child whose `data.*` (the targets) or `models.*` (round 0's
weights, the KL reference) differ from the parent's, a child named like its parent, a trained role
whose weights after round N-1 the parent's retention deleted, an Expert Iteration window (solver.ei_rounds)
or DAPO's carried groups (solver.rollout_max_gen_batches) reaching into rounds the parent compacted. Every other key may differ.

How (the parent is only read: its database opened read-only, its files linked, never written):

1. The child's directory: its own config.toml, environment.json, the parent's targets.jsonl, and
   `forked_from.json` (parent, its directory and config digest, N, the command; `status`, the report
   and `rebuild` read it from there). The parent's `rounds/r0000..r{N-1}`, `checkpoints/init`,
   `checkpoints/r0000..r{N-1}` and the optimizer states saved before round N (`checkpoints/optimizer/
   <role>/rNNNN`) are HARD LINKS, file by file (a copy where the file systems differ, counted and
   said), never symlinks: the child's retention and compaction unlink their own names only. Files a
   task appends to (attempt logs and records, crash logs, time-limit records, train steps) are copied,
   shard locks and pid files left out, and the parent's Slurm job journals too (its job ids stay its
   own: the child never cancels or counts them).
2. `amendments.jsonl`: for each key whose value differs between the parent's config of round N-1
   and the child's, a change of method from round N (old: the parent's, new: the child's), after the
   parent's own changes of method in effect before N, so that every reading of a round's config
   (run/amendments.config_at) gives the inherited rounds the parent's values. Operational keys
   (resources, alarms, retention: run/amendments.OPERATIONAL_KEYS) and the run's identity (name,
   runs_dir, database_url, rounds, executor) are not recorded.
3. The database: `rebuild` (ops/rebuild.py) writes the child's rows from that directory and ends each
   inherited round as its train job did, with that round's config; round N is prepared with the
   child's. Then the child's work is started as `resume` starts a run's (ops/control.start).

A parent still running is fine: only its completed rounds are read; a round its train job compacts
while it is linked is linked again. Not covered: a parent whose database is external
(run.database_url) and the child's too is filled by `rebuild` like any database without the run.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import select

from sgsbatch.config.loading import to_dict, to_toml
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError, InputError
from sgsbatch.run import amendments, environment
from sgsbatch.run.checkpoint import is_complete
from sgsbatch.run.handle import (
    RunHandle,
    existing_run_paths,
    new_run_paths,
    open_run_dir,
    read_frozen_config,
    remove_new_run_dir,
)
from sgsbatch.run.lineage import FILE
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard, atomic_write_json, atomic_write_text
from sgsbatch.state.schema import Round, RunState

# differences that make inheriting meaningless: the targets, and round 0's weights (the KL reference)
REFUSED_SECTIONS = {"data": "the targets the inherited rounds solved", "models": "the weights the inherited rounds "
                    "trained from (round 0's, the KL reference)"}
IDENTITY = ("run.name", "run.runs_dir", "run.database_url", "run.rounds", "run.executor")
SKIPPED = (".lock", ".pid")  # a worker's lock and pid: the parent's
COPIED = (".attempts.jsonl", ".attempt.log", ".failures", ".time_limits", ".log", "steps.jsonl")  # appended to
JOURNAL = "jobs.jsonl"  # the parent's Slurm job ids (run/journal.py): never the child's


@dataclass
class Materialised:
    """What the child's directory got from the parent's."""

    linked: int = 0
    copied: int = 0  # appended-to files, copied on purpose
    across: int = 0  # files copied because the child's directory is on another file system
    bytes_linked: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Fork:
    """A validated fork, before anything is created."""

    child: Config
    parent: RunPaths
    round: int
    records: list[dict[str, Any]]  # the child's amendments.jsonl
    changed: list[str]  # the keys recorded as changes of method from round `round`
    record: dict[str, Any]  # forked_from.json

    def describe(self) -> str:
        keys = ", ".join(f"{r['key']}: {r['old']!r} -> {r['new']!r}" for r in self.records
                         if r["key"] in self.changed and r["from_round"] == self.round)
        inherited = "round 0" if self.round == 1 else f"rounds 0..{self.round - 1}"
        return (f"fork of run {self.record['parent']} at round {self.round}: inherits its {inherited}, "
                f"runs rounds {self.round}..{self.child.run.rounds - 1}; "
                + (f"changes of method from round {self.round}: {keys}" if keys else "no change of method"))


def _completed(parent: RunPaths, pcfg: Config) -> int:
    """The parent's completed rounds counted from round 0 (its database, read-only, and each round's
    train marker: both must say so)."""
    h = open_run_dir(parent, pcfg, readonly=True)
    try:
        with h.db.read() as s:
            done = set(s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all())
    finally:
        h.db.close()
    n = 0
    while n in done and Shard(parent.phase_dir(n, "train"), 0).is_done():
        n += 1
    return n


def _config_hash(parent: RunPaths) -> str:
    return hashlib.sha256(parent.config.read_bytes()).hexdigest()


def prepare(child: Config, parent_run: str, n: int, command: str) -> Fork:
    """Validate a fork of `parent_run` (a name in the child's runs directory, or a run directory's path)
    at round `n` into the run `child` describes; nothing is created. InputError/ConfigError naming the
    keys and what to do."""
    from sgsbatch.round.checkpoints import ROLES, trained_every_round

    parent = existing_run_paths(child.run.runs_dir, parent_run)
    pcfg = read_frozen_config(parent)
    if child.run.name in (parent.name, pcfg.run.name):
        raise ConfigError("--from", "run.name", f"the fork would have its parent's name {child.run.name!r}; give it "
                                                f"its own: --set run.name={child.run.name}-fork")
    new_run_paths(child)  # the name is free
    done = _completed(parent, pcfg)
    if not 1 <= n <= done:
        raise InputError(f"--round {n}: run {parent.name} has {done} completed round(s), so a fork can start at round "
                         + (f"1..{done} (0-based: it inherits the rounds before it)" if done else
                            "none yet (wait for its first round to complete)"))
    if child.run.rounds <= n:
        raise ConfigError("--round", "run.rounds", f"is {child.run.rounds}: the fork inherits {n} round(s) and must run "
                                                   f"at least one itself; --set run.rounds={n + 1} or more")
    precords = amendments.read(parent)
    at = amendments.config_with(pcfg, precords, n - 1)  # the parent's config of its last inherited round
    a, b = amendments.flat_keys(to_dict(at)), amendments.flat_keys(to_dict(child))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    refused = [k for k in diff if k.split(".")[0] in REFUSED_SECTIONS]
    if refused:
        sets = " ".join(f"--set {amendments.set_argument(k, a[k])}" for k in refused if k in a)
        why = "; ".join(f"{s}.*: {w}" for s, w in REFUSED_SECTIONS.items() if any(k.startswith(s + ".") for k in refused))
        raise ConfigError("--from", ", ".join(refused), f"differ from run {parent.name}'s ({why}); a fork keeps them: "
                          f"{sets} (or launch a new run without --from)")
    changed = [k for k in diff if k not in IDENTITY and amendments.classify(k)[0] != amendments.OPERATIONAL]
    for role in ROLES:  # round n of the fork starts from the parent's weights after round n-1 (round/checkpoints.py)
        if not trained_every_round(child, role) or is_complete(parent.checkpoint(n - 1, role)):
            continue
        if not trained_every_round(at, role):
            raise ConfigError("--from", f"{role}.train", f"run {parent.name} did not train its {role} in round {n - 1}, "
                              f"so there are no {role} weights after it for the fork to train from; keep the parent's "
                              f"setting (a fork changes what is trained from round {n} only where the parent trained it)")
        kept = [k + 1 for k in range(done) if is_complete(parent.checkpoint(k, role))]
        raise InputError(f"run {parent.name}'s {role} weights after round {n - 1} are gone ({parent.checkpoint(n - 1, role)}; "
                         f"retention: checkpoints.keep_last, keep_every), and round {n} of the fork starts from them; "
                         f"fork at a round whose weights were kept: --round "
                         + (" or ".join(map(str, kept)) if kept else "(none kept)"))
    _require_window(parent, child, n)
    inherited = [r for r in precords if r.get("kind") == amendments.METHOD and r.get("from_round") is not None
                 and int(r["from_round"]) < n]
    records = [*inherited, *_records(changed, a, b, n, command)]
    record = {"parent": parent.name, "parent_dir": str(parent.root), "round": n, "parent_config_sha256":
              _config_hash(parent), "parent_rounds_completed": done, "at": time.time(), "command": command,
              "changed": changed}
    return Fork(child, parent, n, records, changed, record)


def _require_window(parent: RunPaths, cfg: Config, n: int) -> None:
    """Round n's training reads token records of earlier rounds with Expert Iteration (the `solver.ei_rounds`
    rounds up to n) and with DAPO's re-sampling (the rounds whose kept groups round n - 1 carried to round n:
    phases/train.rollout_file): those the fork inherits must not have been compacted by the parent
    (round/compaction.py)."""
    from sgsbatch.config.schema import WINDOW_SELECTIONS
    from sgsbatch.phases.train import rollout_file
    from sgsbatch.round.compaction import is_compacted
    from sgsbatch.run.shards import read_json

    s = cfg.solver
    if not s.train:
        return
    if s.selection_mode() in WINDOW_SELECTIONS and s.window_rounds() > 1:
        gone = [k for k in range(max(0, n - s.window_rounds() + 1), n) if is_compacted(parent, k)]
        if gone:
            raise InputError(f"round {n} of the fork trains on the token records of rounds {n - s.window_rounds() + 1}"
                             f"..{n} (Expert Iteration, solver.ei_rounds = {s.ei_rounds}), but run {parent.name} "
                             f"compacted round(s) {', '.join(map(str, gone))} (records.keep_sample_tokens = false); fork at "
                             f"round {max(gone) + s.window_rounds()} or later, where the window is whole (a trunk "
                             f"meant for Expert Iteration forks: launch it with --set records.keep_sample_tokens=true)")
    carried = rollout_file(parent, n - 1)
    if s.resamples() and carried.is_file():
        gone = sorted({int(k) for k, _ in read_json(carried)["pending"] if is_compacted(parent, int(k))})
        if gone:
            raise InputError(f"round {n} of the fork trains the groups DAPO's re-sampling carried from round(s) "
                             f"{', '.join(map(str, gone))} of run {parent.name} ({carried}), whose token records it "
                             f"compacted; fork at a round after one that trained (solver/rollout_resampled = 0)")


def _records(changed: Sequence[str], old: dict[str, Any], new: dict[str, Any], n: int,
             command: str) -> list[dict[str, Any]]:
    now = time.time()
    return [{"at": now, "key": k, "old": old.get(k), "new": new.get(k), "kind": amendments.METHOD, "from_round": n,
             "round": n, "command": command} for k in changed]


def _put(src: Path, dst: Path, out: Materialised) -> None:
    """`dst` as a hard link to `src` (a copy for an appended-to file, or across file systems)."""
    if src.name.endswith(COPIED):
        shutil.copy2(src, dst)
        out.copied += 1
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copy2(src, dst, follow_symlinks=False)
        out.across += 1
        return
    out.linked += 1
    out.bytes_linked += dst.lstat().st_size


def _link_tree(src: Path, dst: Path, out: Materialised, top: bool = True) -> None:
    """Every file under `src` put under `dst` (`_put`), shard locks, pid files and the job journal left out."""
    if not src.is_dir():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        target = dst / entry.name
        if entry.is_dir(follow_symlinks=False):
            _link_tree(Path(entry.path), target, out, top=False)
        elif entry.name.endswith(SKIPPED) or (top and entry.name == JOURNAL):
            continue
        elif not target.exists():
            try:
                _put(Path(entry.path), target, out)
            except FileNotFoundError:  # the parent's compaction replaced it meanwhile: see `materialise`
                continue


def materialise(f: Fork, child: RunPaths) -> Materialised:
    """The child's round and checkpoint files from the parent's (see the module docstring)."""
    from sgsbatch.round.compaction import marker

    out = Materialised()
    parent, n = f.parent, f.round
    for r in range(n):
        compacted = marker(parent, r).exists()
        _link_tree(parent.round_dir(r), child.round_dir(r), out)
        if not compacted and marker(parent, r).exists():  # compacted while we linked it: link it again
            shutil.rmtree(child.round_dir(r))
            _link_tree(parent.round_dir(r), child.round_dir(r), out)
    _link_tree(parent.checkpoints_dir() / "init", child.checkpoints_dir() / "init", out)
    for r in range(n):
        _link_tree(parent.checkpoints_dir() / f"r{r:04d}", child.checkpoints_dir() / f"r{r:04d}", out)
    opt = parent.checkpoints_dir() / "optimizer"
    for role_dir in sorted(opt.iterdir()) if opt.is_dir() else []:
        states = [d for d in role_dir.iterdir() if d.name[1:].isdigit() and int(d.name[1:]) < n and is_complete(d)]
        for d in states:
            _link_tree(d, child.optimizer_states(role_dir.name) / d.name, out)
        if f.child.train.optimizer == "carry" and not any(int(d.name[1:]) == n - 1 for d in states):
            out.notes.append(f"{role_dir.name}'s optimizer state after round {n - 1} was not kept by run "
                             f"{parent.name} (only its newest is): round {n} starts from "
                             + (f"round {max(int(d.name[1:]) for d in states)}'s" if states else "a fresh AdamW"))
    if out.across:
        out.notes.append(f"{out.across} file(s) copied, not linked: {child.root} is on another file system than "
                         f"{parent.root}")
    return out


def fork(f: Fork, executor: str, canary: dict[str, Any] | None = None) -> tuple[RunHandle, Materialised]:
    """Create the child run of the validated `f` and start its round (see the module docstring); nothing
    is left behind when a step fails before its work was started."""
    from sgsbatch.ops.control import start
    from sgsbatch.ops.rebuild import rebuild

    child = f.child
    paths = new_run_paths(child)
    made = [p for p in (paths.root, *paths.root.parents) if not p.exists()]
    paths.root.mkdir(parents=True)
    try:
        atomic_write_text(paths.config, to_toml(child))
        shutil.copyfile(f.parent.targets, paths.targets)
        atomic_write_json(paths.root / environment.FILE, environment.capture())
        atomic_write_json(paths.root / FILE, f.record)
        if canary is not None:
            from sgsbatch.canary.record import write_run_record

            write_run_record(paths.root, canary)
        mat = materialise(f, paths)
        atomic_write_text(amendments.path_of(paths), "".join(
            json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in f.records))
        f.record["files"] = {"linked": mat.linked, "copied": mat.copied, "copied_across_file_systems": mat.across,
                             "bytes_linked": mat.bytes_linked}
        atomic_write_json(paths.root / FILE, f.record)
        rebuilt = rebuild(paths, executor=executor)
        h = open_run_dir(paths)
    except BaseException:
        remove_new_run_dir(paths, made)
        raise
    from sgsbatch.run.quarantine import describe as describe_quarantine

    for q in rebuilt.quarantined:  # a corrupt file of an inherited round: the fork's copy quarantined, said here
        mat.notes.append(f"inherited from run {f.parent.name}: {describe_quarantine(q)} (the fork's rounds lack what "
                         f"it held; run {f.parent.name}'s file is unchanged)")
    h.set_state(RunState.running, f"forked from {f.parent.name} at round {f.round}")
    start(h)
    return h, mat


def launch_command(config: Path, overrides: Sequence[str], parent: str, n: int) -> str:
    """The command that made the fork, as recorded."""
    words = ["sgsbatch", "launch", str(config), *(w for o in overrides for w in ("--set", o)), "--from", parent,
             "--round", str(n)]
    return " ".join(shlex.quote(w) for w in words)


def launch(config: Path, overrides: Sequence[str], parent: str, n: int, site: Path | None = None,
           runs_dir: str | None = None, skip_canary: bool = False, dry_run: bool = False
           ) -> tuple[RunHandle | None, Fork, Materialised | None]:
    """`sgsbatch launch CONFIG --from RUN --round N`: the child's config as `launch` loads it (the jobs file,
    the site file, --set, the runs directory's rule), the same pre-flight and canary clearance, then `fork`
    (with `dry_run`, only the checks: no run is created)."""
    from sgsbatch.ops.control import canary_clearance, load_for_command, resolve_executor
    from sgsbatch.scheduling.preflight import require

    cfg = load_for_command(config, overrides, site, runs_dir)
    if cfg.run.rehearsal:
        raise ConfigError(str(config), "run.rehearsal", "is set only by `launch --rehearse`, which a fork does not "
                                                        "take; remove it from the config")
    f = prepare(cfg, parent, n, launch_command(config, overrides, parent, n))
    if dry_run:
        return None, f, None
    executor = resolve_executor(cfg)
    require(cfg, site=executor == "slurm")
    cleared = canary_clearance(cfg, executor, skip_canary)
    h, mat = fork(f, executor, cleared)
    return h, f, mat
