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
import shlex
from pathlib import Path
from typing import Any

from sgsbatch.config.loading import PROMPT_KEYS
from sgsbatch.config.schema import SLURM_TABLES, Config
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import atomic_write_text

FILE = "amendments.jsonl"
OPERATIONAL, METHOD = "operational", "method"

# What may change on a live run (ops/amend.py changes it; run/handle.py advises it for an edited
# config.toml): operational keys, changes of method, and why everything else is refused.
SLURM_KEYS = ("partition", "account", "qos", "time_min", "mem", "cpus", "array_parallelism", "extra",
              "signal_delay_s", "scratch", "setup")
OPERATIONAL_KEYS = (
    *(f"slurm.{p}.{k}" for p in SLURM_TABLES for k in SLURM_KEYS),
    "slurm.mail_user", "slurm.mail_type", "slurm.mail_type_failure",  # jobs submitted after the change
    "run.rounds", "run.max_task_retries", "run.allow_env_drift", "run.poll_interval_s", "run.local_workers",
    "checkpoints.keep_last", "checkpoints.keep_every", "checkpoints.estimate_gb_per_role",
    "train.collective_timeout_s",
    "verification.streaming", "verification.stream_poll_s", "verification.stream_yield_s",  # when, not what
    # how rounds are scheduled, the same samples and training either way (scheduling/colocated.py): a running
    # colocated job ends before its next round once off; the chain hands a round to a job once on
    "solver.colocated_steps", "generation.sleep_level",
)
OPERATIONAL_SECTIONS = ("alerts", "report", "scaling", "projection", "eval")  # eval: what is measured, not trained
# a change of method -> the phases of a round that read it (None: every phase, the round's partition)
METHOD_KEYS: dict[str, tuple[str, ...] | None] = {
    "verification.timeout_s": ("verify",),
    "shards.conjecture": None, "shards.solve": None, "shards.guide": None, "shards.verify": None,
    "prompts.solver": ("solve",), "prompts.conjecturer": ("conjecture",),
    "prompts.conjecturer_unconditioned": ("conjecture",), "prompts.conjecturer_seeded": ("conjecture",),
    "prompts.guide": ("guide",),
    "prompts.guide_tags": ("conjecture", "solve", "guide"),  # the simulated generator writes them too
}
assert set(PROMPT_KEYS) <= set(METHOD_KEYS)
_ALGORITHM = ("an algorithm setting: the rounds already completed were computed with the old value, so the run "
              "would mix two experiments under one name")
REFUSED: dict[str, str] = {
    "run": "identifies the run or where its state lives",
    "data": "the targets were frozen at launch (targets.jsonl)",
    "models": "names the weights every round trains from: another model is another experiment",
    "generation": _ALGORITHM, "solver": _ALGORITHM, "conjecturer": _ALGORITHM, "extraction": _ALGORITHM,
    "guide": _ALGORITHM, "train": _ALGORITHM,
    "verification": "decides what counts as a proof (of this section only verification.timeout_s may change, "
                    "as a change of method, and the streaming keys, which decide when proofs are checked)",
    "records": "decides what compaction deletes from completed rounds, which cannot be undone",
    "slurm": "decides the training ranks and how generation is placed (slurm.<phase>.gpus, .nodes)",
}


def classify(key: str) -> tuple[str | None, str]:
    """(kind, why): kind "operational", "method" or None (refused, `why` says why)."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[0] == "slurm" and ".".join(parts[:3]) in OPERATIONAL_KEYS:
        return OPERATIONAL, ""  # slurm.<phase>.extra.<option> included
    if key in OPERATIONAL_KEYS or parts[0] in OPERATIONAL_SECTIONS:
        return OPERATIONAL, ""
    if key in METHOD_KEYS:
        return METHOD, ""
    return None, REFUSED.get(parts[0], "not a key of the run's config")


def flat_keys(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config as a dict, flattened to dotted keys as `--set` names them (`slurm.<phase>.extra` is one
    value: a table of sbatch options)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        leaf = not isinstance(v, dict) or k == "extra"
        out.update({key: v} if leaf else flat_keys(v, key))
    return out


def toml_value(value: Any) -> str:
    """`value` as TOML (an inline table for a dict), as `--set KEY=VALUE` reads it."""
    import tomli_w

    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return tomli_w.dumps({"v": value}).strip()[len("v = "):]


def set_argument(key: str, value: Any) -> str:
    """The shell word `KEY=VALUE` for `--set` (quoted when the shell would split or expand it)."""
    return shlex.quote(f"{key}={toml_value(value)}")


def drift_advice(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """For a config.toml edited after launch (`old`: the launch's, `new`: the file's, both `to_dict`):
    the `--set` words of its operational changes, the keys that change method, and the refused
    keys with why (`key (why)`)."""
    a, b = flat_keys(old), flat_keys(new)
    sets, method, refused = [], [], []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        kind, why = classify(key)
        if kind == OPERATIONAL and key in b:
            sets += ["--set", set_argument(key, b[key])]
        elif kind == METHOD:
            method.append(key)
        else:
            refused.append(f"{key} ({why or 'cannot be removed'})")
    return sets, method, refused


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
    out = read_jsonl(path, past_bad_lines=True)  # never a bad line from us (it is replaced whole), never fatal
    _cache[path] = (stamp, out)
    return out


def append(paths: RunPaths, records: list[dict[str, Any]]) -> None:
    """Add `records` to the run directory's history (the whole file rewritten atomically)."""
    if not records:
        return
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in [*read(paths), *records]]
    atomic_write_text(path_of(paths), "".join(lines))


def _replace(obj: Any, key: str, value: Any) -> Any:
    """`obj` (a config or one of its tables) with the dotted `key` set to `value` (any depth: `solver.lr`,
    `slurm.train.gpus`); a JSON list given for a tuple field stays a tuple."""
    head, _, rest = key.partition(".")
    current = getattr(obj, head)
    if rest:
        new = _replace(current, rest, value)
        return obj if new is current else dataclasses.replace(obj, **{head: new})
    if isinstance(current, tuple) and isinstance(value, list):
        value = tuple(value)
    if current == value:
        return obj
    return dataclasses.replace(obj, **{head: value})


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
