"""Reading run configs: TOML files, `inherit`, `--set KEY=VALUE` overrides, validation, freezing.

A jobs file may start with `inherit = "sgs.toml"` (relative to itself); its tables are merged
over the parent's key by key. Path-valued keys (data.source, models.*, prompts.*, verification.project_dir)
that start with `.`, `/` or `~` are paths, resolved relative to the file that set them (or to
the working directory for `--set`); anything else there is a Hugging Face id or `tiny-random`.
Every problem is a `ConfigError` naming the file and the dotted key. Not covered here: the
meaning of keys (config/schema.py) and where a run lives on disk (run/paths.py).

Layers, each over the one before (`load_config`): the jobs file with what it inherits, the site
file (`--site FILE` or $SGSBATCH_SITE: facts of the cluster only, `SITE_KEYS`), the `--set`
overrides, then the runs directory the command line or the environment chose (ops/control.py).
Then `[slurm.defaults]` (from any layer) is merged into each of the six phases and the watcher
(`slurm.watcher`): a key that a
phase's own table sets (in any layer) wins over the defaults; a key only the defaults set applies
to every phase, over the built-in per-phase default (e.g. slurm.train.gpus = 8); keys neither
sets keep the built-in defaults. `extra` merges option by option; `setup` is replaced whole.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

from sgsbatch.config.schema import SLURM_TABLES, TINY_RANDOM, Config, SlurmPhaseConfig
from sgsbatch.config.validation import semantic_errors
from sgsbatch.errors import ConfigError
from sgsbatch.logic.prompts import PromptError, read_guide_tags, read_template

PROMPT_KEYS = ("prompts.solver", "prompts.conjecturer", "prompts.conjecturer_unconditioned",
               "prompts.conjecturer_seeded", "prompts.guide", "prompts.guide_tags")
PATH_KEYS = ("data.source", "models.solver", "models.conjecturer", "models.guide", "verification.project_dir",
             "verification.scratch_dir",
             *PROMPT_KEYS)
MODEL_KEYS = ("models.solver", "models.conjecturer", "models.guide")
REQUIRED_KEYS = {
    "run.name": 'name = "my-run" under [run]',
    "run.rounds": "rounds = 200 under [run]",
    "data.source": 'source = "LukeBailey181Pub/D_3k" (or a path) under [data]',
    "models.solver": 'solver = "deepseek-ai/DeepSeek-Prover-V2-7B" (or a path, or "tiny-random") under [models]',
}

SITE_ENV = "SGSBATCH_SITE"
# What a site file may set: where things are on this cluster and how its jobs are submitted. Not the
# experiment (models, data, the algorithm): a site file lies over every experiment, tiny ones included.
SITE_KEYS = ("slurm", "run.runs_dir", "run.database_url", "run.submit_from_jobs", "verification.project_dir",
             "verification.scratch_dir", "verification.repl_command", "verification.checker_command")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_path_like(value: str) -> bool:
    return value.startswith((".", "/", "~"))


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(str(path), "", "no such config file; pass a path such as jobs/sgs.toml")
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(path), "", f"not valid TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), "", f"not a text file (invalid UTF-8 at byte {e.start}); a jobs file is "
                          f"TOML text") from e
    except OSError as e:
        raise ConfigError(str(path), "", f"cannot be read: {e.strerror or e}") from e


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _get(raw: dict[str, Any], dotted: str) -> Any:
    cur: Any = raw
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _set(raw: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    parts = dotted.split(".")
    cur = raw
    for i, part in enumerate(parts[:-1]):
        nxt = cur.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(source, ".".join(parts[: i + 1]), "is a value, not a table; cannot set a key inside it")
        cur = nxt
    cur[parts[-1]] = value


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for key in PATH_KEYS:
        val = _get(raw, key)
        if isinstance(val, str) and is_path_like(val):
            _set(raw, key, str((base / Path(val).expanduser()).resolve()), str(base))
    sets = _get(raw, "eval.sets")
    if isinstance(sets, dict):  # each evaluation set's source is a path like data.source's
        for name, val in sets.items():
            if isinstance(val, str) and is_path_like(val):
                sets[name] = str((base / Path(val).expanduser()).resolve())


Origins = dict[str, str]  # dotted key -> where its value came from ("a.toml via b.toml", "--set k=v")


def _leaves(raw: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in raw.items():
        key = f"{prefix}.{k}" if prefix else k
        out += _leaves(v, key) if isinstance(v, dict) and v else [key]
    return out


def _set_origin(origins: Origins, key: str, source: str) -> None:
    for k in [k for k in origins if k.startswith(key + ".")]:  # a value set over a whole table
        del origins[k]
    origins[key] = source


def origin_of(origins: Origins, key: str, default: str) -> str:
    """Where `key` (or the table holding it) was set; for a table, where the keys inside it were set (an
    unknown table is whoever put a key in it: `--set nosuch.key=1`, not the jobs file); `default` for a key
    left at its default."""
    parts = re.sub(r"\[\d+\]", "", key).split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in origins:
            return origins[".".join(parts[:n])]
    inside = dict.fromkeys(v for k, v in origins.items() if k.startswith(".".join(parts) + "."))
    return " and ".join(inside) if inside else default


def data_origin(origins: Origins, default: str) -> str:
    """Who to blame when `[data]` cannot be loaded: whoever set data.source, and any `--set` of data.format or
    data.split besides (`--set data.format=hf` makes a good file unloadable); `default` for keys left alone."""
    where = [origin_of(origins, "data.source", default)]
    where += [o for o in (origin_of(origins, f"data.{k}", "") for k in ("format", "split"))
              if o.startswith("--set ") and o not in where]
    return " and ".join(where)


def load_raw(path: Path, _seen: tuple[Path, ...] = (), origins: Origins | None = None) -> dict[str, Any]:
    """The merged raw table of a jobs file and the files it inherits from, paths resolved.
    `origins` gets, for every key set, the file that set it (`parent.toml via child.toml`)."""
    path = path.resolve()
    if path in _seen:
        raise ConfigError(str(path), "inherit", "inheritance cycle: " + " -> ".join(str(p) for p in (*_seen, path)))
    raw = _read_toml(path)
    _resolve_paths(raw, path.parent)
    parent = raw.pop("inherit", None)
    if parent is not None and not isinstance(parent, str):
        raise ConfigError(str(path), "inherit", "must be a string: the path of the parent jobs file")
    merged = raw
    if parent is not None:
        parent_path = (path.parent / Path(parent).expanduser()).resolve()
        if not parent_path.is_file():
            what = "a directory" if parent_path.is_dir() else "not an existing file"
            raise ConfigError(str(path), "inherit", f"{parent!r} ({parent_path}) is {what}; give the path of the "
                              "parent jobs file, relative to this file, e.g. inherit = \"sgs.toml\"")
        merged = _merge(load_raw(parent_path, (*_seen, path), origins), raw)
    if origins is not None:
        label = " via ".join(str(p) for p in (path, *reversed(_seen)))
        for key in _leaves(raw):
            _set_origin(origins, key, label)
    return merged


def load_site(path: Path, origins: Origins | None = None) -> dict[str, Any]:
    """The raw table of a site file (it may `inherit` too), paths resolved against it; a key outside
    `SITE_KEYS` is a ConfigError naming the file and the key."""
    if not path.is_file():
        raise ConfigError(str(path), "", f"no such site file (--site or ${SITE_ENV}); see jobs/site.example.toml")
    site_origins: Origins = {}
    raw = load_raw(path, origins=site_origins)
    for key in _leaves(raw):
        if not any(key == k or key.startswith(k + ".") for k in SITE_KEYS) and _get(raw, key) != {}:
            raise ConfigError(origin_of(site_origins, key, str(path)), key,
                              "a site file sets only facts of the cluster, for every experiment: [slurm] "
                              "(with [slurm.defaults]), run.runs_dir, run.database_url, run.submit_from_jobs, "
                              "verification.project_dir, .scratch_dir, .repl_command, .checker_command; set "
                              f"{key} in the jobs file or with --set {key}=...")
    if origins is not None:
        for key, where in site_origins.items():
            _set_origin(origins, key, where)
    return raw


def apply_slurm_defaults(raw: dict[str, Any], source: str, origins: Origins | None = None) -> dict[str, Any]:
    """`raw` with `[slurm.defaults]` merged under each phase's table (a key the phase's table sets
    wins; `extra` merges option by option) and itself removed; checked as a phase table first, so
    an error names slurm.defaults.<key>."""
    slurm = raw.get("slurm")
    if not isinstance(slurm, dict) or "defaults" not in slurm:
        return raw
    raw = dict(raw)
    slurm = raw["slurm"] = dict(slurm)
    defaults = slurm.pop("defaults")
    if not isinstance(defaults, dict):
        raise ConfigError(source, "slurm.defaults", f"must be a table ([slurm.defaults]), got {defaults!r}")
    if "nodes" in defaults:
        raise ConfigError(source, "slurm.defaults.nodes", "not a default: only the train job spans nodes; set "
                                                          "slurm.train.nodes instead")
    build(SlurmPhaseConfig, defaults, source, "slurm.defaults")  # unknown keys and wrong types
    for phase in SLURM_TABLES:
        own = slurm.get(phase, {})
        if not isinstance(own, dict):
            continue  # `build` says what is wrong with it
        slurm[phase] = _merge(defaults, own)
        if origins is not None:
            for key in _leaves(defaults):
                if _get(own, key) is None:
                    origins[f"slurm.{phase}.{key}"] = origin_of(origins, f"slurm.defaults.{key}", source)
    return raw


def parse_override(text: str) -> tuple[str, Any]:
    """`run.rounds=3` -> ("run.rounds", 3); a value that is not TOML is taken as a plain string."""
    if "=" not in text:
        raise ConfigError("--set", text, "expected KEY=VALUE with a dotted key, e.g. --set run.rounds=3")
    key, _, value = text.partition("=")
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError("--set", text, "expected KEY=VALUE with a dotted key, e.g. --set run.rounds=3")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def apply_overrides(raw: dict[str, Any], overrides: typing.Sequence[str], cwd: Path,
                    origins: Origins | None = None) -> dict[str, Any]:
    raw = _merge(raw, {})
    for text in overrides:
        key, value = parse_override(text)
        if (key in PATH_KEYS or key.startswith("eval.sets.")) and isinstance(value, str) and is_path_like(value):
            value = str((cwd / Path(value).expanduser()).resolve())
        _set(raw, key, value, f"--set {text}")
        if origins is not None:
            _set_origin(origins, key, f"--set {text}")
    return raw


def type_name(tp: Any) -> str:
    """How a config type reads in messages and `config keys`: "an integer", "one of ..."."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (tuple, list):
        return "an array"
    if origin is dict:
        return "a table of strings"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, source: str, key: str) -> Any:
    """`value` (parsed TOML) as the declared type `tp` of `key`, or a ConfigError naming `source` and `key`."""
    origin = typing.get_origin(tp)
    bad = ConfigError(source, key, f"must be {type_name(tp)}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(source, key, f"must be a table ([{key}]), got {value!r}")
        return build(tp, value, source, key)  # type: ignore[arg-type]
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise bad
        return value
    if origin is tuple:
        return _convert_tuple(value, tp, source, key, bad)
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str | int) for v in value.values()):
            raise bad
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(tp, types.UnionType):
        raise AssertionError(f"union types are not supported in config: {key}")
    if tp in _SCALARS:
        return _SCALARS[tp](value, source, key, bad)
    raise AssertionError(f"unsupported config type {tp} for {key}")


def _convert_tuple(value: Any, tp: Any, source: str, key: str, bad: ConfigError) -> tuple[Any, ...]:
    args = typing.get_args(tp)
    if not isinstance(value, list):
        raise bad
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(v, args[0], source, f"{key}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise ConfigError(source, key, f"must be an array of {len(args)} values, got {value!r}")
    return tuple(_convert(v, a, source, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))


def _to_bool(value: Any, source: str, key: str, bad: ConfigError) -> bool:
    if not isinstance(value, bool):
        raise bad
    return value


def _to_int(value: Any, source: str, key: str, bad: ConfigError) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad
    if not INT64_MIN <= value <= INT64_MAX:  # the database stores 64-bit integers
        raise ConfigError(source, key, f"must be an integer within [{INT64_MIN}, {INT64_MAX}], got {value}")
    return value


def _to_float(value: Any, source: str, key: str, bad: ConfigError) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(source, key, f"must be a finite number, got {value!r}")
    return number


def _to_str(value: Any, source: str, key: str, bad: ConfigError) -> str:
    if not isinstance(value, str):
        raise bad
    return value


_SCALARS: dict[Any, Callable[[Any, str, str, ConfigError], Any]] = {
    bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


# Keys that existed once and did nothing; their errors say what to do instead.
REMOVED_KEYS = {
    "solver.beta": "renamed solver.kl_beta (the KL to the reference policy; solver.kl_estimator picks its estimator)",
    "train.epochs": "removed: every role trains exactly one epoch over the round's data (the SGS paper); delete the key",
    "slurm.submitit_folder": "removed: submitit's files always go to <run dir>/slurm/; delete the key",
}


def _field_default(cls: type, name: str) -> Any:
    """The default of field `name` of `cls` when it is a dataclass instance (e.g. SlurmConfig.train,
    whose built-in values differ from SlurmPhaseConfig's), else None."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return value if dataclasses.is_dataclass(value) else None


def build(cls: type, raw: dict[str, Any], source: str, prefix: str = "", base: Any = None) -> Any:
    """A frozen dataclass from a raw table; unknown keys and wrong types raise ConfigError. A key the
    table leaves out keeps `base`'s value (default: the field's default), so a partial
    `[slurm.train]` keeps the train job's built-in values for the keys it does not set."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for k in raw:
        if k not in names:
            where = f"{prefix}.{k}" if prefix else k
            if where in REMOVED_KEYS:
                raise ConfigError(source, where, f"unknown key ({REMOVED_KEYS[where]})")
            raise ConfigError(source, where, "unknown key; valid keys here: " + ", ".join(names))
    kwargs: dict[str, Any] = {}
    for k, v in raw.items():
        key = f"{prefix}.{k}" if prefix else k
        inner = getattr(base, k) if base is not None else _field_default(cls, k)
        if inner is not None and isinstance(v, dict) and dataclasses.is_dataclass(hints[k]):
            kwargs[k] = build(hints[k], v, source, key, inner)
        else:
            kwargs[k] = _convert(v, hints[k], source, key)
    return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)


def _check_models(cfg: Config, source: str) -> None:
    for key in MODEL_KEYS:
        val = _get(dataclasses.asdict(cfg), key)
        if val == TINY_RANDOM:
            continue
        if is_path_like(val):
            if not Path(val).is_dir():
                raise ConfigError(source, key, f"model path {val} does not exist; give an existing directory "
                                  f"with Hugging Face weights, a hub id (org/name) or {TINY_RANDOM!r}")
        elif val.count("/") != 1:
            raise ConfigError(source, key, f"{val!r} is neither a hub id (org/name), a path (starting with ./, ../ "
                              f"or /) nor {TINY_RANDOM!r}")


def check_prompts(cfg: Config, source: str) -> None:
    """Every `[prompts]` value names a shipped template set or a readable file with the right placeholders."""
    for key in PROMPT_KEYS:
        role = key.split(".", 1)[1]
        value = getattr(cfg.prompts, role)
        try:
            if role == "guide_tags":
                read_guide_tags(value)
            else:
                read_template(role, value)
        except PromptError as e:
            raise ConfigError(source, key, str(e)) from e


def check_eval_sets(cfg: Config, origins: Origins, default: str, load_remote: bool) -> None:
    """Each evaluation set of `eval.sets` loads like data.source (a path always; a hub id with `load_remote`):
    a ConfigError on `eval.sets.<name>` naming who set it: launch (before the run exists) and `resume --set`
    (ops/amend.py) check them; ops/evaluate.py reads them again when it evaluates."""
    from sgsbatch.logic.data import load_data_source

    e = cfg.eval
    for name, source in sorted(e.sets.items()):
        if load_remote or is_path_like(source):
            load_data_source(e.set_data(name), origin_of(origins, f"eval.sets.{name}", default),
                             key=f"eval.sets.{name}")


def validate(raw: dict[str, Any], source: str, origins: Origins | None = None) -> Config:
    """The checked config; an error names the key and where its value came from (`origins`;
    `source` for a key left at its default or a missing one)."""
    try:
        return _validate(apply_slurm_defaults(raw, source, origins), source)
    except ConfigError as e:
        if origins is None or e.source != source:
            raise
        raise ConfigError(origin_of(origins, e.key, source), e.key, e.message) from None


def _validate(raw: dict[str, Any], source: str) -> Config:
    cfg: Config = build(Config, raw, source)  # types first: `--set run=3` is "run: must be a table"
    for key, example in REQUIRED_KEYS.items():
        if _get(raw, key) is None:
            raise ConfigError(source, key, f"is required; add {example}")
    errs = semantic_errors(cfg)
    if errs:
        key, msg = errs[0]
        more = f" (and {len(errs) - 1} more: " + ", ".join(k for k, _ in errs[1:]) + ")" if len(errs) > 1 else ""
        raise ConfigError(source, key, msg + more)
    _check_models(cfg, source)
    check_prompts(cfg, source)
    src = cfg.data.source
    if is_path_like(src) and not Path(src).exists():
        raise ConfigError(source, "data.source", f"no such file or directory: {src}")
    _check_runs_dir(cfg, source)
    _check_database_url(cfg, source)
    return cfg


def _check_runs_dir(cfg: Config, source: str) -> None:
    """run.runs_dir is (or can become) a writable directory."""
    path = Path(cfg.run.runs_dir).expanduser().absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(source, "run.runs_dir", f"{probe} is not a directory, so runs cannot live in {path}; "
                          f"choose a directory (--set run.runs_dir=...)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(source, "run.runs_dir", f"{probe} is not writable; choose a directory you can write "
                          f"(--set run.runs_dir=...)")


def _check_database_url(cfg: Config, source: str) -> None:
    """run.database_url, when set, is a URL SQLAlchemy can open with an installed driver."""
    url = cfg.run.database_url
    if not url:
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        dialect = make_url(url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as e:
        raise ConfigError(source, "run.database_url", f"{url!r} is not a database URL SQLAlchemy knows ({e}); "
                          f"e.g. postgresql://user@host/db, or \"\" for the run's own SQLite file") from None
    try:
        dialect.import_dbapi()
    except ImportError as e:
        raise ConfigError(source, "run.database_url", f"the driver for {url.split(':', 1)[0]!r} is not installed "
                          f"({e}); install it or leave run.database_url empty") from None


def load_config(path: Path, overrides: typing.Sequence[str] = (), cwd: Path | None = None, *,
                site: Path | None = None, runs_dir: tuple[str, str] | None = None,
                origins: Origins | None = None) -> Config:
    """Load, merge, override and validate a jobs file: the jobs file, then the site file `site`, then
    `overrides`, then `runs_dir` (directory, where it came from: ops/control.runs_dir_layer).
    `origins`, when given, gets where each key set came from. Raises ConfigError; no side effects."""
    origins = {} if origins is None else origins
    raw = load_raw(path, origins=origins)
    if site is not None:
        raw = _merge(raw, load_site(site, origins))
    raw = apply_overrides(raw, overrides, cwd or Path.cwd(), origins)
    if runs_dir is not None and isinstance(raw.get("run", {}), dict):  # else `--set run=3`: validate says so
        _set(raw, "run.runs_dir", runs_dir[0], runs_dir[1])
        _set_origin(origins, "run.runs_dir", runs_dir[1])
    return validate(raw, str(path), origins)


def to_dict(cfg: Config) -> dict[str, Any]:
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, tuple | list):
            return [clean(x) for x in v]
        return v

    out: dict[str, Any] = clean(dataclasses.asdict(cfg))
    return out


def to_toml(cfg: Config) -> str:
    return tomli_w.dumps(to_dict(cfg))


def from_toml_text(text: str, source: str) -> Config:
    """The frozen config of a run (runs/<name>/config.toml): already resolved and checked at launch."""
    cfg: Config = build(Config, tomllib.loads(text), source)
    return cfg


def flat_config(cfg: Config) -> dict[str, Any]:
    """Every key of `cfg` as a dotted path (`solver.lr`) with its value (lists for tuples; a table
    value such as `slurm.solve.extra` is one key while empty, else one key per entry)."""
    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else k
            out.update(flat(v, key) if isinstance(v, dict) and v else {key: v})
        return out

    return flat(to_dict(cfg))


def config_changes(old: Config, new: Config) -> list[str]:
    """`key: old -> new` for every key whose value differs between two configs."""
    a, b = flat_config(old), flat_config(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
