"""A run: creating it at launch (directory, frozen config, database rows) and opening it later.

Creation happens only after the config and the data were validated, and writes the run
directory's files before the database rows, so a failed launch leaves nothing behind (the
directory is removed again if a later step fails before anything was submitted).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlmodel import select

from sgsbatch.config.loading import config_changes, from_toml_text, to_dict, to_toml
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError, InputError, RunError
from sgsbatch.logic.data import Target
from sgsbatch.run import environment
from sgsbatch.run.amendments import config_at, shards_at
from sgsbatch.run.paths import RunPaths, command, run_paths
from sgsbatch.run.shards import atomic_write_json, atomic_write_text
from sgsbatch.state.db import Database, EmptyDatabase, open_db, sqlite_url
from sgsbatch.state.schema import Phase, ProblemRow, Round, Run, RunEnvironment, RunState


@dataclass
class RunHandle:
    cfg: Config
    paths: RunPaths
    db: Database
    run_id: int

    def row(self) -> Run:
        with self.db.read() as s:
            run = s.get(Run, self.run_id)
            assert run is not None
            s.expunge(run)
            return run

    def at(self, r: int) -> Config:
        """The config round r runs with: changes of method made for later rounds left out (run/amendments.py)."""
        return config_at(self.cfg, self.paths, r)

    def for_round(self, r: int) -> RunHandle:
        """This run with `at(r)` as its config: for code that reads a round's settings from `cfg` (ending
        or preparing round r), so a round before a change of method (or inherited by a fork) keeps its own."""
        return RunHandle(self.at(r), self.paths, self.db, self.run_id)

    def refreshed(self) -> RunHandle:
        """This run with its config read again from config.toml: what `resume --set` changed since this
        handle was opened (a long job submits the next round with the newest resources)."""
        return RunHandle(current_config(self.paths), self.paths, self.db, self.run_id)

    def set_state(self, state: RunState, message: str = "") -> None:
        with self.db.write() as s:
            run = s.get(Run, self.run_id)
            assert run is not None
            run.state, run.message, run.updated_at = state, message, time.time()
            s.add(run)


def current_config(paths: RunPaths) -> Config:
    """The run's config.toml as it is now (the newest values; no drift check: jobs read it this way)."""
    return from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config))


def database_url(cfg: Config, paths: RunPaths) -> str:
    return cfg.run.database_url or sqlite_url(paths.db)


def new_run_paths(cfg: Config) -> RunPaths:
    """Where a new run would live; a RunError when a run (or anything) is already there."""
    paths = run_paths(cfg.run.runs_dir, cfg.run.name)
    if paths.root.exists():
        raise InputError(f"run {cfg.run.name!r} already exists in {paths.root.parent}; choose another name "
                         f"(--set run.name=...) or continue it with `{command('resume', paths)}`")
    return paths


def create_run(cfg: Config, targets: list[Target], executor: str) -> RunHandle:
    paths = new_run_paths(cfg)
    made = [p for p in (paths.root, *paths.root.parents) if not p.exists()]  # removed again on failure
    paths.root.mkdir(parents=True)
    try:
        text = to_toml(cfg)
        atomic_write_text(paths.config, text)
        atomic_write_text(paths.targets, "".join(
            json.dumps({"id": t.id, "header": t.header, "theorem": t.theorem}, ensure_ascii=False) + "\n"
            for t in targets))
        env = environment.capture()
        atomic_write_json(paths.root / environment.FILE, env)
        db = open_db(database_url(cfg, paths))
        run_id = insert_run(db, cfg, paths, text, targets, executor, time.time(), env)
    except BaseException:
        remove_new_run_dir(paths, made)
        raise
    return RunHandle(cfg, paths, db, run_id)


def remove_new_run_dir(paths: RunPaths, made: list[Path]) -> None:
    """Undo a run directory a failed creation made: the directory, then the empty parents it created
    (`made`: paths.root and its parents that did not exist before, innermost first)."""
    shutil.rmtree(paths.root, ignore_errors=True)
    for p in made[1:]:
        try:
            p.rmdir()
        except OSError:
            break


def insert_run(db: Database, cfg: Config, paths: RunPaths, text: str, targets: list[Target], executor: str,
               created_at: float, env: dict[str, Any] | None = None) -> int:
    """The database rows of a new run: the run, its environment, its targets as problems, round 0
    and its phases."""
    with db.write() as s:
        if s.exec(select(Run).where(Run.name == cfg.run.name)).first() is not None:
            raise InputError(f"run {cfg.run.name!r} already exists in {db.url}; choose another run.name")
        run = Run(name=cfg.run.name, run_dir=str(paths.root), created_at=created_at, updated_at=time.time(),
                  config_toml=text, config_hash=hashlib.sha256(text.encode()).hexdigest(), executor=executor,
                  state=RunState.pending, simulated=cfg.simulated, smoke=cfg.run.smoke, rounds=cfg.run.rounds,
                  seed=cfg.run.seed, targets=len(targets))
        s.add(run)
        s.flush()
        assert run.id is not None
        run_id = run.id
        if env is not None:
            s.add(RunEnvironment(run_id=run_id, captured_at=float(env.get("time", created_at)),
                                 host=str(env.get("host", "")), record=json.dumps(env, sort_keys=True)))
        s.execute(ProblemRow.__table__.insert(), [  # type: ignore[attr-defined]
            {"run_id": run_id, "problem_id": t.id, "header": t.header, "theorem": t.theorem} for t in targets])
        s.add(Round(run_id=run_id, index=0, state="pending", unsolved=len(targets)))
        for phase in cfg.phases_of_round(0):
            s.add(Phase(run_id=run_id, round=0, kind=phase, shards=shards_at(cfg, paths, 0, phase)))
    return run_id


def check_round(round_: int | None, *cfgs: Config, option: str = "--round") -> None:
    """The one check of a round a person typed (`metrics`, `proofs`, `timeline`, `logs`: `option`): an
    InputError (exit 2) naming each run's rounds, 0-based, unless `round_` is a round of at least one of the
    runs `cfgs` (their `run.rounds`). None (not given) passes. Whether the round has run yet is the
    command's to say."""
    if round_ is None or any(0 <= round_ < c.run.rounds for c in cfgs):
        return
    has = "; ".join(f"run {c.run.name} has rounds 0..{c.run.rounds - 1}" for c in cfgs)
    raise InputError(f"{option} {round_}: no such round; {has} (0-based, as in `status --json`)")


def is_run_path(run: str) -> bool:
    """A RUN argument that names a run directory rather than a run: it has a `/` (`runs/sgs`,
    `./sgs`, an absolute path) or is `.` or `..`; a run's name never does."""
    return "/" in run or run in (".", "..")


def existing_run_paths(runs_dir: str | Path, name: str) -> RunPaths:
    """The directory of run `name` in `runs_dir`, or the run directory `name` is a path to
    (`is_run_path`; `runs_dir` is then not used); a RunError listing the runs there when it has none."""
    if is_run_path(name):
        root = Path(name).expanduser().resolve()
        if not is_run_dir(root):
            raise InputError(f"{root} is not a run directory (it has neither config.toml nor state.db); a RUN "
                             f"with a / is a path to a run directory, a RUN without one a run name in --runs-dir")
        return RunPaths(root)
    paths = run_paths(runs_dir, name)
    if not is_run_dir(paths.root):
        known = sorted(p.name for p in list_runs(runs_dir))
        raise InputError(f"no run named {name!r} in {Path(runs_dir).resolve()}; runs there: "
                         f"{', '.join(known) or '(none)'}")
    return paths


def read_frozen_config(paths: RunPaths) -> Config:
    """The run's frozen config.toml; a missing, unreadable or damaged one is a RunError saying how
    to restore it (the database keeps the config the run was launched with)."""
    def restore(*force: str) -> str:
        return (f"restore it from the copy in the database with `{command('rebuild', paths, '--restore-config', *force)}`"
                " (or from your backup)")

    try:
        text = paths.config.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError(f"{paths.config} is missing; {restore()}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RunError(f"{paths.config} cannot be read ({e}); {restore('--force')}") from None
    try:
        return from_toml_text(text, str(paths.config))
    except tomllib.TOMLDecodeError as e:
        raise RunError(f"{paths.config} is not valid TOML ({e}); {restore('--force')}") from None
    except ConfigError as e:
        raise RunError(f"{e}; {restore('--force')}") from None


def open_run(runs_dir: str | Path, name: str, readonly: bool = False) -> RunHandle:
    return open_run_dir(existing_run_paths(runs_dir, name), readonly=readonly)


def open_run_dir(paths: RunPaths, cfg: Config | None = None, readonly: bool = False) -> RunHandle:
    """Open an existing run. `readonly`: nothing is written, not even a schema upgrade. A missing,
    empty or damaged database is a RunError naming the file and the repair."""
    check_drift = cfg is None
    if cfg is None:
        cfg = read_frozen_config(paths)
    rebuild = command("rebuild", paths, "--force")
    if not cfg.run.database_url and not paths.db.exists():  # never create an empty one in its place
        raise RunError(f"{paths.db} is missing; rebuild it from the run directory with "
                       f"`{command('rebuild', paths)}`")
    where = cfg.run.database_url or str(paths.db)
    try:
        db = open_db(database_url(cfg, paths), create=False, readonly=readonly)
        with db.read() as s:
            run = s.exec(select(Run).where(Run.name == cfg.run.name)).first()
    except EmptyDatabase:
        raise RunError(f"{where} is empty (no sgsbatch tables); rebuild it from the run directory with "
                       f"`{rebuild}`") from None
    except DBAPIError as e:
        if cfg.run.database_url:
            raise RunError(f"run.database_url {where} cannot be read ({e.orig}); check the database server and "
                           f"the URL in {paths.config}") from None
        raise RunError(f"{where} is damaged ({e.orig}); move it aside and rebuild it from the run directory "
                       f"with `{rebuild}`") from None
    if run is None or run.id is None:
        raise RunError(f"{paths.root}: the database {db.url} has no run {cfg.run.name!r}; if it was lost, "
                       f"rebuild it with `{rebuild}`")
    if check_drift:
        _refuse_drift(paths, cfg, run)
    return RunHandle(cfg, paths, db, run.id)


def _refuse_drift(paths: RunPaths, cfg: Config, run: Run) -> None:
    """A config.toml edited after launch is never mixed with the database: say what changed and how
    to go on (restore it, or change the keys that may change with `resume --set`)."""
    if hashlib.sha256(paths.config.read_bytes()).hexdigest() == run.config_hash:
        return
    launched = from_toml_text(run.config_toml, "the database")
    changes = config_changes(launched, cfg)
    if not changes:
        return  # comments or layout only
    from sgsbatch.run.amendments import drift_advice

    sets, method, refused = drift_advice(to_dict(launched), to_dict(cfg))
    advice = [f"restore it with `{command('rebuild', paths, '--restore-config', '--force')}`"]
    if sets:
        advice.append(f"then make the change as an amendment: `{command('resume', paths, *sets)}`")
    if method:
        advice.append(f"{', '.join(method)} change the method: after restoring, amend them with resume --set and "
                      "--method-change --from-round (a round not yet started; docs/operating.md: Amending a live run)")
    if refused:
        advice.append(f"{', '.join(refused)} cannot change on a live run: launch a new run for that")
    raise RunError(f"{paths.config} was edited after launch ({'; '.join(changes)}); a run keeps the config it was "
                   f"launched with: " + "; ".join(advice))


def is_run_dir(path: Path) -> bool:
    """A run directory has its config.toml or its state.db (the other may be lost)."""
    return (path / "config.toml").exists() or (path / "state.db").exists()


def list_runs(runs_dir: str | Path) -> list[Path]:
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and is_run_dir(p))
