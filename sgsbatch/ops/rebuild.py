"""Rebuilding a lost or corrupt run database from the run directory alone.

The run directory holds everything the database is derived from: the frozen config, the targets,
each round's shard files (conjectures, samples with their verdicts, reviews, training results)
and the round's job journal (`rounds/rNNNN/jobs.jsonl`). `rebuild` writes the run's rows afresh,
then ends every round whose train shard is done exactly as its train job did (the same
`scheduling/chain.end_round`, with the config that round ran with: run/amendments.config_at, so a
round before a change of method, or inherited by a fork, keeps its values), and restores the Slurm
job records so that `status` and `resume` see the jobs of the round in flight. A live run can go on afterwards: its jobs open the
rebuilt database like the old one.

Covered: runs, rounds, phases (each round's shard counts as amended, run/amendments.py), the
config's amendments (`amendments.jsonl`), problems, attempts with verdicts, the solved store, conjectures,
reviews, metrics (TensorBoard points rewritten too), held-out evaluation's metrics (from eval/), a fork's parent (`forked_from.json` stays in the
directory; ops/fork.py builds a fork's database with this module), checkpoints (marked deleted where the
retention policy removed the weights), Slurm jobs with their restarts (from sacct, while
accounting remembers them).
`restore_config` is the other direction: config.toml lost, damaged or edited after launch is
written back from the copy the database recorded (at launch, with the amendments of `resume
--set` since; an edited one is kept aside).

The new SQLite database is built beside the old one (`.state.db.rebuilding-<pid>`) and renamed
into place only once complete, so a rebuild that fails leaves state.db as it was (a failed one's
partial file is deleted). A shard output that cannot be read (bytes flipped or lost: run/shards.py
`CorruptShard`) is quarantined (run/quarantine.py: moved under `quarantine/`, its readable records
kept as the output) and its round ended from what is left; the report names each such file.

Not covered: a run cancelled with `sgsbatch cancel` shows as stalled after a rebuild (the
cancellation lived only in the database: cancel it again); a database at `run.database_url` is
only filled when it has no row for the run (it is never moved aside or deleted here).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import DBAPIError
from sqlmodel import select

from sgsbatch.config.loading import from_toml_text
from sgsbatch.config.schema import Config
from sgsbatch.errors import InputError, RunError
from sgsbatch.logic.data import Target
from sgsbatch.round.results import run_targets
from sgsbatch.run import amendments, environment
from sgsbatch.run.handle import RunHandle, database_url, insert_run
from sgsbatch.run.journal import read_journal
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.quarantine import describe as describe_quarantine
from sgsbatch.run.quarantine import quarantine
from sgsbatch.run.shards import CorruptShard, atomic_write_text, read_json
from sgsbatch.scheduling.chain import end_round_from_marker
from sgsbatch.state.db import Database, EmptyDatabase, open_db, sqlite_url
from sgsbatch.state.schema import Amendment, Attempt, Checkpoint, Run, RunState, SlurmJob


@dataclass
class RebuildReport:
    run: str
    database: str
    rounds_completed: int
    rounds: int
    attempts: int
    slurm_jobs: int
    moved_aside: Path | None
    quarantined: list[dict[str, Any]] = field(default_factory=list)  # run/quarantine.py records, this rebuild's

    def describe(self) -> str:
        aside = f"; the old database is kept as {self.moved_aside}" if self.moved_aside else ""
        lines = [f"run {self.run}: rebuilt {self.database} from the run directory: {self.rounds_completed} of "
                 f"{self.rounds} rounds completed, {self.attempts} attempts, {self.slurm_jobs} Slurm jobs{aside}"]
        for q in self.quarantined:
            lines.append(f"  quarantined: {describe_quarantine(q)}")
        if self.quarantined and self.moved_aside:
            lines.append(f"  the rebuilt database lacks what those files held; if the old one was sound, put it "
                         f"back: mv {self.moved_aside} {Path(self.moved_aside).with_name('state.db')}")
        return "\n".join(lines)


def _has_run(url: str, name: str) -> bool:
    with open_db(url).read() as s:
        return s.exec(select(Run).where(Run.name == name)).first() is not None


def _fresh_database(paths: RunPaths, url: str, name: str, external: bool, force: bool) -> tuple[Database, Path | None]:
    """An empty database for the run and, for SQLite, where it is built: `.state.db.rebuilding-<pid>` beside
    state.db, which stays untouched until the new one is complete (`_install`); a state.db already
    there is replaced with --force only."""
    if external:
        if _has_run(url, name):
            raise RunError(f"{url} already holds run {name!r}; rebuild fills only a database without it "
                           f"(delete that run's rows first, or point run.database_url elsewhere)")
        return open_db(url), None
    if paths.db.exists() and not force:
        raise InputError(f"{paths.db} exists; rebuild replaces a lost or corrupt database: pass --force to move it "
                         f"aside (kept as state.db.bad-<time>) and rebuild from the run directory")
    staging = paths.db.with_name(f".{paths.db.name}.rebuilding-{os.getpid()}")
    _discard(staging)
    try:
        return open_db(sqlite_url(staging)), staging
    except BaseException:  # a full disk while the schema is written: no partial file stays behind
        _discard(staging)
        raise


def _discard(staging: Path) -> None:
    for p in (staging, staging.with_name(staging.name + "-journal")):
        p.unlink(missing_ok=True)


def _install(paths: RunPaths, staging: Path) -> Path | None:
    """Put the complete new database in state.db's place in one rename; a state.db there is kept as
    state.db.bad-<time> (a hard link made before the rename, so state.db is never missing)."""
    if not paths.db.exists():
        os.replace(staging, paths.db)
        return None
    aside = paths.db.with_name(f"state.db.bad-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("-journal", "-wal", "-shm"):  # SQLite's side files belong to the old database
        side = paths.db.with_name(paths.db.name + suffix)
        if side.exists():
            side.rename(aside.with_name(aside.name + suffix))
    try:
        os.link(paths.db, aside)
    except OSError:  # a file system without hard links: a moment without state.db
        paths.db.rename(aside)
    os.replace(staging, paths.db)
    return aside


def _end_rounds(h: RunHandle, progress: Callable[[int], None] | None, quarantined: list[dict[str, Any]]) -> int:
    """End every round whose train job finished, in order; a corrupt shard output met on the way is
    quarantined (run/quarantine.py) and the round ended again from what is left. Returns the rounds ended."""
    done = 0
    for r in range(h.cfg.run.rounds):
        while True:
            try:
                ended = end_round_from_marker(h.for_round(r), r)  # with the config round r ran with
                break
            except CorruptShard as e:
                if any(q["file"] == str(e.path.relative_to(h.paths.root)) for q in quarantined):
                    raise  # the recovered output is unreadable too: nothing more to do here
                quarantined.append(quarantine(h.paths, e))
        if not ended:
            break
        done += 1
        if progress:
            progress(r)
    return done


def _restore_jobs(h: RunHandle) -> int:
    """SlurmJob rows from every round's journal. A submission is active unless a later one of its
    (round, phase) covers one of its shards (a resubmission after `resume`); a phase's arrays
    submitted together (verify: one per solve task) cover different shards and stay active."""
    rows = []
    for r in range(h.cfg.run.rounds):
        records = read_journal(h.paths.jobs_journal(r))
        for i, rec in enumerate(records):
            later = {s for x in records[i + 1:] if x["phase"] == rec["phase"] for s in x["shards"]}
            rows.append(SlurmJob(run_id=h.run_id, round=r, phase=rec["phase"], job_id=rec["job_id"],
                                 shards=json.dumps(rec["shards"]), submitted_at=rec["submitted_at"],
                                 active=not later & set(rec["shards"])))
    with h.db.write() as s:
        s.add_all(rows)
    return len(rows)


def _restore_amendments(h: RunHandle) -> int:
    """The `amendments` rows from the run directory's amendments.jsonl (config changes after launch)."""
    records = amendments.read(h.paths)
    with h.db.write() as s:
        s.add_all([Amendment(run_id=h.run_id, at=r["at"], key=r["key"], old=json.dumps(r["old"]),
                             new=json.dumps(r["new"]), kind=r["kind"], from_round=r["from_round"],
                             round=r.get("round", 0), command=r.get("command", "")) for r in records])
    return len(records)


def _restore_evaluations(h: RunHandle) -> int:
    """Held-out evaluation's eval/<set>/pass@<k> of every evaluated round, from each complete set's summary.json
    (ops/evaluate.py wrote both; a set without its marker, or whose summary cannot be read, is left out, as
    `sgsbatch eval` would sample it again). Returns the rounds restored."""
    from sgsbatch.ops.evaluate import record_metrics
    from sgsbatch.phases.evaluate import is_evaluated, read_summary
    from sgsbatch.round.metrics import eval_pass_at

    root, restored = h.paths.root / "eval", 0
    for d in sorted(root.glob("r[0-9]*")) if root.is_dir() else []:
        if not d.name[1:].isdigit():
            continue
        r, values = int(d.name[1:]), {}
        for s in sorted(p for p in d.iterdir() if p.is_dir() and is_evaluated(h.paths, r, p.name)):
            try:
                values.update({eval_pass_at(s.name, int(k)): float(v) for k, v in read_summary(s)["pass_at_k"].items()})
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
        if values:
            record_metrics(h, r, values)
            restored += 1
    return restored


def rebuild(paths: RunPaths, force: bool = False, progress: Callable[[int], None] | None = None,
            executor: str | None = None) -> RebuildReport:
    """Recreate the run's database from `paths` (see the module docstring); `progress(r)` after each round.
    `executor`: the run's executor when the caller knows it (a fork, ops/fork.py, before its first job);
    else run.executor, and for "auto" the directory's (a `slurm/` folder: Slurm).

    The new SQLite database is built beside state.db and put in its place only when complete: a
    rebuild that fails (a damaged file it cannot read past, a full disk) leaves state.db as it was."""
    if not paths.config.exists() or not paths.targets.exists():
        raise InputError(f"{paths.root} is not a run directory: rebuild needs its config.toml and targets.jsonl")
    text = paths.config.read_text(encoding="utf-8")
    cfg = from_toml_text(text, str(paths.config))
    url = database_url(cfg, paths)
    db, staging = _fresh_database(paths, url, cfg.run.name, bool(cfg.run.database_url), force)
    quarantined: list[dict[str, Any]] = []
    try:
        done, attempts, jobs = _fill(db, cfg, paths, text, progress, quarantined, executor)
    except BaseException:
        db.close()
        if staging is not None:
            _discard(staging)
        raise
    db.close()
    aside = _install(paths, staging) if staging is not None else None
    return RebuildReport(cfg.run.name, url, done, cfg.run.rounds, attempts, jobs, aside, quarantined)


def _fill(db: Database, cfg: Config, paths: RunPaths, text: str, progress: Callable[[int], None] | None,
          quarantined: list[dict[str, Any]], executor: str | None) -> tuple[int, int, int]:
    """Write the run's rows into the empty `db`; (rounds ended, attempts, Slurm jobs)."""
    targets = [Target(t.problem_id, t.header, t.theorem) for t in run_targets(paths)]
    if executor is None:
        executor = cfg.run.executor if cfg.run.executor != "auto" else ("slurm" if paths.slurm.exists() else "local")
    env_file = paths.root / environment.FILE
    env = read_json(env_file) if env_file.exists() else None  # runs launched before it was recorded have none
    run_id = insert_run(db, cfg, paths, text, targets, executor, created_at=paths.config.stat().st_mtime, env=env)
    h = RunHandle(cfg, paths, db, run_id)
    _restore_amendments(h)
    jobs = _restore_jobs(h)
    done = _end_rounds(h, progress, quarantined)
    _restore_evaluations(h)
    with db.write() as s:
        for ck in s.exec(select(Checkpoint).where(Checkpoint.run_id == run_id)).all():
            if not Path(ck.path).exists():
                ck.deleted = True
                s.add(ck)
        attempts = s.exec(select(func.count()).select_from(Attempt).where(Attempt.run_id == run_id)).one()
    if done < cfg.run.rounds:
        h.set_state(RunState.running, "database rebuilt from the run directory")
    return done, attempts, jobs


def restore_config(paths: RunPaths, force: bool = False) -> str:
    """Write the run's config.toml back from the database's copy (the config as launched); an
    existing file that differs is kept aside as config.toml.edited-<time>, with `force` only."""
    backup = "restore config.toml from your backup"
    if not paths.db.exists():
        raise RunError(f"{paths.db} is missing, so it holds no copy of the config; {backup}")
    try:
        with open_db(sqlite_url(paths.db), create=False, readonly=True).read() as s:
            run = s.exec(select(Run).where(Run.run_dir == str(paths.root))).first() or \
                s.exec(select(Run).where(Run.name == paths.name)).first()
    except (EmptyDatabase, DBAPIError) as e:
        raise RunError(f"{paths.db} cannot be read ({getattr(e, 'orig', e)}); {backup}") from None
    if run is None:
        raise RunError(f"{paths.db} has no run {paths.name!r}; {backup}")
    if paths.config.exists():
        if paths.config.read_bytes() == run.config_toml.encode():
            return f"{paths.config} already is the config run {run.name} was launched with"
        if not force:
            raise InputError(f"{paths.config} exists and differs from the config run {run.name} was launched with; "
                             f"pass --force to keep it aside (config.toml.edited-<time>) and restore the launch's")
        aside = paths.config.with_name(f"config.toml.edited-{time.strftime('%Y%m%d-%H%M%S')}")
        paths.config.rename(aside)
        atomic_write_text(paths.config, run.config_toml)
        return f"restored {paths.config} from the database; the edited file is kept as {aside}"
    atomic_write_text(paths.config, run.config_toml)
    return f"restored {paths.config} from the database"
