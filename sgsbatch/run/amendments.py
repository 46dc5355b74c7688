"""A run's amendments: `<run>/amendments.jsonl`, and the config each round runs with.

Every key changed by `sgsbatch resume RUN --set KEY=VALUE` after launch (ops/amend.py) is one
record, appended in order: {"at", "key", "old", "new", "kind", "from_round", "round", "command"}.
`kind` "operational" (where or how long work runs, alarms, polling, the run's length: effective
for every job that starts after it, `from_round` null) or "method" (changes results: in effect
from round `from_round` on). The file is rewritten whole and atomically at each amendment, so a
reader never sees a torn line; the database keeps the same records (table `amendments`) and
`sgsbatch rebuild` restores them from here.

`config.toml` always holds the newest values. `config_at(cfg, paths, r)` is the config of round
r: every method key set to the value of its last amendment in effect at round r (or its launch
value when none is), so a round created before a change of method keeps what it ran with (its
shard counts, its verification timeout, its prompts), whoever reads it: its tasks, the round's
end, compaction, status, the report. Operational keys are never rolled back: a job reads the
newest ones when it starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import atomic_write_text

FILE = "amendments.jsonl"
OPERATIONAL, METHOD = "operational", "method"

_cache: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = {}


def path_of(paths: RunPaths) -> Path:
    return paths.root / FILE


def read(paths: RunPaths) -> list[dict[str, Any]]:
    """The run's amendments, oldest first ([] when it has none). Cached per file version."""
    path = path_of(paths)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return []
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _cache.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # never written by us (the file is replaced whole), but never fatal either
    _cache[path] = (stamp, out)
    return out


def append(paths: RunPaths, records: list[dict[str, Any]]) -> None:
    """Add `records` to the run directory's history (the whole file rewritten atomically)."""
    if not records:
        return
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in [*read(paths), *records]]
    atomic_write_text(path_of(paths), "".join(lines))


def _replace(cfg: Config, key: str, value: Any) -> Config:
    section, _, name = key.partition(".")
    sub = getattr(cfg, section)
    if getattr(sub, name) == value:
        return cfg
    return dataclasses.replace(cfg, **{section: dataclasses.replace(sub, **{name: value})})


def method_values(records: list[dict[str, Any]], r: int) -> dict[str, Any]:
    """Each method key ever amended -> its value in round r."""
    out: dict[str, Any] = {}
    for rec in records:
        if rec.get("kind") != METHOD:
            continue
        key = rec["key"]
        if key not in out:
            out[key] = rec["old"]  # the launch value, until an amendment in effect at r says otherwise
        if rec["from_round"] is not None and int(rec["from_round"]) <= r:
            out[key] = rec["new"]
    return out


def config_at(cfg: Config, paths: RunPaths, r: int) -> Config:
    """The config round r runs with (see the module docstring); `cfg` itself without changes of method."""
    return config_with(cfg, read(paths), r)


def config_with(cfg: Config, records: list[dict[str, Any]], r: int) -> Config:
    """`config_at` for the amendments `records` (oldest first)."""
    for key, value in method_values(records, r).items():
        cfg = _replace(cfg, key, value)
    return cfg


def shards_at(cfg: Config, paths: RunPaths, r: int, phase: str) -> int:
    """Round r's task count for `phase` (what it was created with, whatever was amended since)."""
    return config_at(cfg, paths, r).shard_count(phase)
