"""Target statements: the `Target` record and its loaders.

Covered layouts:
- ``reference_json``: the SGS reference file, ``{"iterations": [], "target_statements": {ID: {id,
  header, theorem, ...}}}``; a row whose key differs from its ``id`` is rejected, and so is a key
  that appears twice in the file (plain ``json`` would silently keep the last one).
- ``jsonl``: one ``{"id", "header", "theorem"}`` object a line; blank lines are skipped.
- the provers' layout, in any of the above: ``{"name", "header", "formal_statement", "split"?}``, as
  DeepSeek-Prover's ``datasets/minif2f.jsonl``, ``proofnet.jsonl`` and ``putnam.jsonl`` (copied by
  Goedel-Prover and others) publish miniF2F, ProofNet and PutnamBench: ``name`` is the id and
  ``formal_statement`` the theorem, ending in ``:= by`` as read, or made to (a trailing ``sorry`` is
  dropped, ``:=`` gets `` by``: ProofNet's statements end in ``:=``; PutnamBench's ``:=`` and ``by`` on
  two lines become one ``:= by``). In a file (not a Hugging Face
  dataset, whose split is chosen by `split` already) a row with a string ``split`` field is kept only
  if it equals `split` (miniF2F's one file holds ``valid`` and ``test``); the rows left out are
  counted by split in `LoadResult.other_splits`, never rejected.
- ``hf``: a Hugging Face dataset with those columns, either a directory written by
  ``save_to_disk`` (a ``DatasetDict`` gives its `split`) or a hub id for ``load_dataset``.
  ``datasets`` is imported only inside that loader.

``fmt="auto"`` picks: a directory -> hf; ``*.jsonl`` -> jsonl; ``*.json`` -> reference_json; a
path that does not exist and looks like ``owner/name`` -> hf (hub); any other missing path is a
`FileNotFoundError` naming it.

Rows are checked: ``id``, ``header`` and ``theorem`` present and strings, non-empty ``id`` and
``theorem``, ``theorem`` ending in ``:= by`` (trailing whitespace is dropped from the stored
statement), no duplicate id (the first one wins). Bad rows are skipped and reported in
`LoadResult.rejected` by id, or by line/row number where there is no usable id; with
``strict=True`` a `DataError` names the file and every bad row. Not covered: downloading or
caching hub data sets, and the conjectures of a round (they are not loaded from files).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sgsbatch.errors import SgsError


class DataSource(Protocol):
    """What `load_data_source` reads of a config's `[data]` table (config/schema.DataConfig), read-only."""

    @property
    def source(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def split(self) -> str: ...
    @property
    def limit(self) -> int: ...
    @property
    def strict(self) -> bool: ...

FORMATS: tuple[str, ...] = ("auto", "reference_json", "jsonl", "hf")
STATEMENT_END = ":= by"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class DataError(SgsError, ValueError):
    """The target data is malformed (strict mode) or unreadable. Names the file."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    """One target statement: `theorem` ends in `:= by`; `header` holds imports and options."""

    id: str
    header: str
    theorem: str


@dataclass(frozen=True)
class Rejected:
    """A skipped row: its id, or ``line N`` / ``row N`` where it has no usable id."""

    id_or_line: str
    reason: str


@dataclass(frozen=True)
class LoadResult:
    targets: list[Target] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    other_splits: dict[str, int] = field(default_factory=dict)  # rows of a file's other splits, left out

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.targets]


class _PairsDict(dict[str, Any]):
    """A JSON object that remembers keys it saw more than once."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _PairsDict:
    out = _PairsDict()
    out.duplicates = []
    for k, v in pairs:
        if k in out:
            out.duplicates.append(k)  # the first value is kept
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class _BadJson:
    """A JSONL line that did not parse."""

    message: str


def _provers_layout(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A row of the provers' layout (`name`, `formal_statement`) as `id`, `header`, `theorem`; others as given."""
    if "theorem" in row or "formal_statement" not in row:
        return row
    statement = row["formal_statement"]
    if isinstance(statement, str):
        statement = statement.rstrip()
        if statement.endswith("sorry"):
            statement = statement[: -len("sorry")].rstrip()
        if statement.endswith(":="):
            statement += " by"
        statement = re.sub(r":=\s+by$", ":= by", statement)  # PutnamBench's `:=\n  by`
    return {**row, "id": row.get("id", row.get("name")), "theorem": statement}


def _check_row(row: Any, where: str) -> tuple[Target | None, Rejected | None]:
    """A `Target` from one row, or the reason to reject it (named by id when it has one)."""
    if not isinstance(row, Mapping):
        return None, Rejected(where, f"not a JSON object ({type(row).__name__})")
    row = _provers_layout(row)
    raw_id = row.get("id")
    name = raw_id if isinstance(raw_id, str) and raw_id.strip() else where
    for key in ("id", "header", "theorem"):
        if key not in row or row[key] is None:
            return None, Rejected(name, f"missing field {key!r}")
        if not isinstance(row[key], str):
            return None, Rejected(name, f"field {key!r} is not a string")
    if not row["id"].strip():
        return None, Rejected(where, "empty id")
    theorem = row["theorem"].rstrip()
    if not theorem:
        return None, Rejected(name, "empty theorem")
    if not theorem.endswith(STATEMENT_END):
        return None, Rejected(name, f"theorem does not end in {STATEMENT_END!r}")
    return Target(id=row["id"].strip(), header=row["header"], theorem=theorem), None


def _reference_rows(path: Path) -> Iterator[tuple[Any, str, str | None]]:
    """(row, where, key) for each entry of a reference JSON file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_pairs_hook)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(doc, Mapping) or not isinstance(doc.get("target_statements"), Mapping):
        raise DataError(f"{path}: not the reference layout (no 'target_statements' object)")
    statements = doc["target_statements"]
    for key in getattr(statements, "duplicates", []):
        yield {"id": key}, f"key {key}", "__duplicate_key__"
    for key, row in statements.items():
        yield row, f"key {key}", key


def _jsonl_rows(path: Path) -> Iterator[tuple[Any, str, str | None]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield _BadJson(str(exc.msg)), where, None
                continue
            yield row, where, None


def _hf_rows(source: str, split: str) -> Iterator[tuple[Any, str, str | None]]:
    import datasets  # heavy: imported only when a Hugging Face source is loaded

    path = Path(source)
    if path.is_dir():
        loaded: Any = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DataError(f"{source}: no split {split!r} (has {', '.join(loaded)})")
            loaded = loaded[split]
    else:
        loaded = datasets.load_dataset(source, split=split)
    for number, row in enumerate(loaded):
        yield row, f"row {number}", None


def _detect(path: Path, source: str) -> str:
    if path.is_dir():
        return "hf"
    if path.suffix == ".jsonl":
        return "jsonl"
    if path.suffix == ".json":
        return "reference_json"
    if not path.exists() and _HUB_ID.fullmatch(source) and not source.startswith((".", "/")):
        return "hf"
    if not path.exists():
        raise FileNotFoundError(f"target data not found: {path}")
    raise DataError(f"{path}: cannot tell the format from the name; set the format explicitly")


def _collect(rows: Iterable[tuple[Any, str, str | None]], limit: int | None, split: str | None) -> LoadResult:
    """The targets of `rows`; with `split`, a row whose string `split` field differs is left out (counted)."""
    result = LoadResult()
    seen: set[str] = set()
    for row, where, key in rows:
        if split is not None and isinstance(row, Mapping) and isinstance(row.get("split"), str) \
                and row["split"] != split:
            result.other_splits[row["split"]] = result.other_splits.get(row["split"], 0) + 1
            continue
        if key == "__duplicate_key__":
            result.rejected.append(Rejected(row["id"], "duplicate key in target_statements"))
            continue
        if isinstance(row, _BadJson):
            result.rejected.append(Rejected(where, f"bad JSON: {row.message}"))
            continue
        target, bad = _check_row(row, where)
        if bad is None and target is not None:
            if key is not None and key != target.id:
                bad = Rejected(target.id, f"id does not match its key {key!r}")
            elif target.id in seen:
                bad = Rejected(target.id, "duplicate id")
        if bad is not None:
            result.rejected.append(bad)
            continue
        assert target is not None
        if limit is not None and len(result.targets) >= limit:
            continue  # keep scanning so every bad row is still reported
        seen.add(target.id)
        result.targets.append(target)
    return result


def load_targets(
    source: str | Path,
    fmt: str = "auto",
    strict: bool = False,
    limit: int | None = None,
    split: str = "train",
) -> LoadResult:
    """Load target statements from `source` (see the module docstring for the layouts).

    `limit` keeps the first `limit` good targets in file order (None or 0 = all).
    """
    if fmt not in FORMATS:
        raise ValueError(f"load_targets: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if limit is not None and limit < 0:
        raise ValueError(f"load_targets: limit must be >= 0, got {limit}")
    text = str(source)
    path = Path(source).expanduser()
    if fmt == "auto":
        fmt = _detect(path, text)
    if fmt in ("reference_json", "jsonl") and not path.is_file():
        raise FileNotFoundError(f"target data not found: {path}")
    if fmt == "reference_json":
        rows = _reference_rows(path)
    elif fmt == "jsonl":
        rows = _jsonl_rows(path)
    else:
        rows = _hf_rows(str(path) if path.is_dir() else text, split)
    result = _collect(rows, limit or None, None if fmt == "hf" else split)
    if strict and result.rejected:
        lines = "\n".join(f"  {r.id_or_line}: {r.reason}" for r in result.rejected)
        raise DataError(f"{text}: {len(result.rejected)} malformed row(s):\n{lines}")
    return result


def load_data_source(data: DataSource, where: str, key: str = "data.source") -> LoadResult:
    """The targets of a config's `[data]` table, for `launch` and `plan` alike. Any failure to load them (a bad
    or unreadable file, an unknown layout, the hub, the datasets library) and a source with no usable row is
    a ConfigError on data.source naming `where`: whoever set it, the jobs file or the `--set`
    (config.loading.origin_of). `key` names the key in errors: an evaluation set's is `eval.sets.<name>`
    (ops/evaluate.py). Not covered: checking rows beyond `load_targets`."""
    from sgsbatch.errors import ConfigError

    try:
        loaded = load_targets(data.source, fmt=data.format, split=data.split, strict=data.strict,
                              limit=data.limit or None)
    except Exception as e:  # a bad file, the hub or the datasets library: a data problem either way
        raise ConfigError(where, key, f"could not load {data.source!r}: {str(e).rstrip('.')}; give a readable targets "
                          "file (.jsonl, .json), a saved dataset directory or a reachable dataset id") from e
    if not loaded.targets:
        why = f" (every row rejected, first: {loaded.rejected[0].id_or_line}: {loaded.rejected[0].reason})" \
            if loaded.rejected else ""
        if loaded.other_splits:
            table = key.split(".")[0]
            why += (f" of split {data.split!r}: its rows are of split(s) "
                    f"{', '.join(f'{k} ({n})' for k, n in sorted(loaded.other_splits.items()))}; choose one with "
                    f"{table}.split" + (" or eval.splits.<name>" if table == "eval" else ""))
        raise ConfigError(where, key, f"{data.source} holds no usable targets{why}")
    return loaded
