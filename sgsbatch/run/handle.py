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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import select

from sgsbatch.config.loading import from_toml_text, to_toml
from sgsbatch.config.schema import Config
from sgsbatch.data import Target
from sgsbatch.errors import RunError
from sgsbatch.run import environment
from sgsbatch.run.paths import RunPaths, run_paths
from sgsbatch.run.shards import atomic_write_json, atomic_write_text
from sgsbatch.state.db import Database, open_db, sqlite_url
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

    def set_state(self, state: RunState, message: str = "") -> None:
        with self.db.write() as s:
            run = s.get(Run, self.run_id)
            assert run is not None
            run.state, run.message, run.updated_at = state, message, time.time()
            s.add(run)


def database_url(cfg: Config, paths: RunPaths) -> str:
    return cfg.run.database_url or sqlite_url(paths.db)


def create_run(cfg: Config, targets: list[Target], executor: str) -> RunHandle:
    paths = run_paths(cfg.run.runs_dir, cfg.run.name)
    if paths.root.exists():
        raise RunError(f"run {cfg.run.name!r} already exists in {paths.root.parent}; choose another name "
                       f"(--set run.name=...) or continue it with `sgsbatch resume {cfg.run.name}`")
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
        shutil.rmtree(paths.root, ignore_errors=True)
        raise
    return RunHandle(cfg, paths, db, run_id)


def insert_run(db: Database, cfg: Config, paths: RunPaths, text: str, targets: list[Target], executor: str,
               created_at: float, env: dict[str, Any] | None = None) -> int:
    """The database rows of a new run: the run, its environment, its targets as problems, round 0
    and its phases."""
    with db.write() as s:
        if s.exec(select(Run).where(Run.name == cfg.run.name)).first() is not None:
            raise RunError(f"run {cfg.run.name!r} already exists in {db.url}; choose another run.name")
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
            s.add(Phase(run_id=run_id, round=0, kind=phase, shards=cfg.shard_count(phase)))
    return run_id


def existing_run_paths(runs_dir: str | Path, name: str) -> RunPaths:
    """The directory of run `name`; a RunError listing the runs there when it has none."""
    paths = run_paths(runs_dir, name)
    if not paths.config.exists():
        known = sorted(p.name for p in Path(runs_dir).glob("*") if (p / "config.toml").exists())
        raise RunError(f"no run named {name!r} in {Path(runs_dir).resolve()}; runs there: "
                       f"{', '.join(known) or '(none)'}")
    return paths


def open_run(runs_dir: str | Path, name: str) -> RunHandle:
    paths = existing_run_paths(runs_dir, name)
    cfg = from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config))
    return open_run_dir(paths, cfg)


def open_run_dir(paths: RunPaths, cfg: Config | None = None) -> RunHandle:
    if cfg is None:
        cfg = from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config))
    if not cfg.run.database_url and not paths.db.exists():  # never create an empty one in its place
        raise RunError(f"{paths.db} is missing; rebuild it from the run directory with "
                       f"`sgsbatch rebuild {cfg.run.name} --runs-dir {paths.root.parent}`")
    db = open_db(database_url(cfg, paths))
    with db.read() as s:
        run = s.exec(select(Run).where(Run.name == cfg.run.name)).first()
    if run is None or run.id is None:
        raise RunError(f"{paths.root}: the database {db.url} has no run {cfg.run.name!r}; if it was lost, "
                       f"rebuild it with `sgsbatch rebuild {cfg.run.name} --runs-dir {paths.root.parent} --force`")
    return RunHandle(cfg, paths, db, run.id)


def list_runs(runs_dir: str | Path) -> list[Path]:
    return sorted(p for p in Path(runs_dir).glob("*") if (p / "config.toml").exists())
