"""What a canary found, kept: per config fingerprint, in `<runs_dir>/.canary/`, and what launch asks of it.

A result holds the fingerprint (`fingerprint`: every section of the config that decides what the
jobs load and run, i.e. all but `run`, `canary` and the bookkeeping sections `alerts`, `report`,
`scaling`, `records`, `checkpoints`, `projection`), the environment the jobs ran in (the packages of
run/environment.MATTERS and Python), the site (Slurm's ClusterName), the time and every row.
`<fingerprint>.json` holds the latest result, `history.jsonl` every one. A result also holds the
`throughput_key` (the sections that decide how fast the jobs run: models, engine, verifier,
trainer, resources, a search Solver's search) and its rows their measured numbers (`Row.measures`): `measured(runs_dir, cfg)`
finds the latest passed canary a projection of `cfg` may read (views/plan.py), also one of another
shard count or algorithm setting. `clearance(cfg)` says
whether a launch of `cfg` may go ahead: a passed canary of the same fingerprint, run in the same
environment, less than `canary.max_age_days` ago. `needs_canary(cfg)` says which configs must
have one: research configs on Slurm (no tiny-random model, no SIMULATED part, not a smoke run or
rehearsal).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from sgsbatch.config.schema import TINY_RANDOM, Config
from sgsbatch.run import environment
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.shards import atomic_write_json

DIR = ".canary"
HISTORY = "history.jsonl"
RUN_FILE = "canary.json"  # in a run directory: what cleared its launch (or that it was skipped)
NOT_FINGERPRINTED = ("run", "canary", "alerts", "report", "scaling", "records", "checkpoints", "projection")


THROUGHPUT_SECTIONS = ("models", "generation", "verification", "train", "slurm", "search")


def _digest(cfg: Config, keep: Any) -> str:
    from sgsbatch.config.loading import to_dict

    d = {k: v for k, v in to_dict(cfg).items() if keep(k)}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(cfg: Config) -> str:
    return _digest(cfg, lambda k: k not in NOT_FINGERPRINTED)


def throughput_key(cfg: Config) -> str:
    """What decides the canary's measured figures: the models, engine, verifier, trainer, resources and search."""
    return _digest(cfg, lambda k: k in THROUGHPUT_SECTIONS)


def environment_key(env: dict[str, Any]) -> dict[str, Any]:
    packages = env.get("packages") or {}
    return {"python": env.get("python"), "packages": {p: packages.get(p) for p in environment.MATTERS}}


def needs_canary(cfg: Config) -> bool:
    tiny = TINY_RANDOM in (cfg.models.solver, cfg.models.conjecturer, cfg.models.guide)
    return not (cfg.run.smoke or cfg.run.rehearsal or cfg.simulated or tiny)


def site() -> str:
    """Slurm's ClusterName, or "" where no controller answers."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ""
    for line in out.stdout.splitlines():
        if line.strip().startswith("ClusterName"):
            return line.split("=", 1)[1].strip()
    return ""


def canary_dir(runs_dir: str | Path) -> Path:
    return Path(runs_dir) / DIR


def save(runs_dir: str | Path, cfg: Config, rows: list[dict[str, Any]], env: dict[str, Any],
         jobs: list[str]) -> dict[str, Any]:
    """Keep a canary's result (latest per fingerprint, and appended to the history); returns it."""
    result = {"fingerprint": fingerprint(cfg), "throughput_key": throughput_key(cfg),
              "passed": bool(rows) and all(r["ok"] for r in rows),
              "time": time.time(), "site": site(), "config_name": cfg.run.name, "environment": environment_key(env),
              "jobs": jobs, "rows": rows}
    d = canary_dir(runs_dir)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / f"{result['fingerprint']}.json", result)
    with open(d / HISTORY, "a", encoding="utf-8") as f:
        f.write(json.dumps(result, sort_keys=True) + "\n")
    return result


def latest(runs_dir: str | Path, cfg: Config) -> dict[str, Any] | None:
    path = canary_dir(runs_dir) / f"{fingerprint(cfg)}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def measured(runs_dir: str | Path, cfg: Config) -> dict[str, Any] | None:
    """The latest passed canary whose figures hold for `cfg`: of its fingerprint, or any in the
    history with its `throughput_key`; None when there is none."""
    found = [r for r in [latest(runs_dir, cfg)] if r is not None and r.get("passed")]
    history, want = canary_dir(runs_dir) / HISTORY, throughput_key(cfg)
    for rec in read_jsonl(history, past_bad_lines=True):  # a line cut short by a full disk: the others count
        if rec.get("passed") and rec.get("throughput_key") == want:
            found.append(rec)
    return max(found, key=lambda r: float(r.get("time", 0.0)), default=None)


def clearance(cfg: Config, env: dict[str, Any] | None = None, now: float | None = None) -> tuple[bool, str]:
    """(cleared, why): whether a passed canary covers a launch of `cfg` in this environment now."""
    res = latest(cfg.run.runs_dir, cfg)
    fp = fingerprint(cfg)
    if res is None:
        return False, f"no canary has run for this config (fingerprint {fp}) in {canary_dir(cfg.run.runs_dir)}"
    if not res.get("passed"):
        bad = [r for r in res.get("rows", []) if not r.get("ok")]
        return False, (f"the last canary of this config (fingerprint {fp}) failed {len(bad)} check(s), e.g. "
                       + "; ".join(f"{r['component']} {r['check']}: {r['figure']}" for r in bad[:2]))
    here = environment_key(env if env is not None else environment.capture())
    if res.get("environment") != here:
        return False, (f"the canary of this config passed in another environment ({res.get('environment')}); "
                       f"this one is {here}")
    age_days = ((now if now is not None else time.time()) - float(res["time"])) / 86400
    if age_days > cfg.canary.max_age_days:
        return False, (f"the canary of this config passed {age_days:.1f} days ago, more than canary.max_age_days "
                       f"= {cfg.canary.max_age_days}")
    return True, f"canary of fingerprint {fp} passed {age_days:.1f} days ago on {res.get('site') or 'this site'}"


def write_run_record(run_dir: Path, record: dict[str, Any]) -> None:
    atomic_write_json(run_dir / RUN_FILE, record)


def read_run_record(run_dir: Path) -> dict[str, Any] | None:
    """What cleared the run's launch (`launch` wrote it), or None (no canary was asked for)."""
    path = run_dir / RUN_FILE
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data
