"""Changing a live run's config: `sgsbatch resume RUN --set run.rounds=N` (extend a run).

Only keys that do not change what was already computed may change after launch (AMENDABLE):
`run.rounds` (never below its value: a run is extended, not cut), `run.max_task_retries`,
`run.allow_env_drift`, `run.poll_interval_s`. The database row (config, hash, rounds) is
updated first, then the frozen config.toml is rewritten, so the run directory stays the run's
truth for `rebuild`. A completed run that is extended is running again (its new rounds are
created); `resume` then starts them. Jobs and local drivers already running keep the config they
started with; a run that ends at its old round count shows as stalled and `resume` (or `watch`)
continues it. Not covered: any other key (edit a copy of the jobs file and launch a new run).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import func
from sqlmodel import select

from sgsbatch.config.loading import (
    Origins,
    apply_overrides,
    build,
    config_changes,
    origin_of,
    parse_override,
    to_dict,
    to_toml,
)
from sgsbatch.config.schema import Config, semantic_errors
from sgsbatch.errors import ConfigError
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import atomic_write_text
from sgsbatch.state.schema import Phase, Round, Run, RunState, StoredProof

AMENDABLE = ("run.rounds", "run.max_task_retries", "run.allow_env_drift", "run.poll_interval_s")


def amend(h: RunHandle, overrides: Sequence[str]) -> tuple[RunHandle, list[str]]:
    """The run with `overrides` applied to its frozen config, and the changes in words."""
    for text in overrides:
        key, _ = parse_override(text)
        if key not in AMENDABLE:
            raise ConfigError(f"--set {text}", key, "cannot change after launch; keys that can: "
                              + ", ".join(AMENDABLE) + " (for anything else launch a new run)")
    origins: Origins = {}
    raw = apply_overrides(to_dict(h.cfg), overrides, Path.cwd(), origins)
    cfg: Config = build(Config, raw, "--set")
    for key, msg in semantic_errors(cfg):
        raise ConfigError(origin_of(origins, key, "--set"), key, msg)
    if cfg.run.rounds < h.cfg.run.rounds:
        raise ConfigError(origin_of(origins, "run.rounds", "--set"), "run.rounds",
                          f"can only grow (a run is extended, not cut): it is {h.cfg.run.rounds}")
    changes = config_changes(h.cfg, cfg)
    if not changes:
        return h, []
    text = to_toml(cfg)
    with h.db.write() as s:
        run = s.get(Run, h.run_id)
        assert run is not None
        run.config_toml, run.config_hash, run.updated_at = text, hashlib.sha256(text.encode()).hexdigest(), time.time()
        if cfg.run.rounds > run.rounds:
            done = s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all()
            nxt = max(done) + 1 if done else 0
            if run.state == RunState.completed and nxt < cfg.run.rounds:
                run.state, run.message = RunState.running, f"extended to {cfg.run.rounds} rounds"
                solved = s.exec(select(func.count(func.distinct(StoredProof.problem_id))).where(
                    StoredProof.run_id == h.run_id)).one()
                s.add(Round(run_id=h.run_id, index=nxt, state="pending", unsolved=run.targets - solved))
                for kind in cfg.phases_of_round(nxt):
                    s.add(Phase(run_id=h.run_id, round=nxt, kind=kind, shards=cfg.shard_count(kind)))
            run.rounds = cfg.run.rounds
        s.add(run)
    atomic_write_text(h.paths.config, text)
    return RunHandle(cfg, h.paths, h.db, h.run_id), changes
