"""Every config key with its type, default and help text, read from the schema (config/schema.py).

`config_keys` walks `Config()`: one `KeyInfo` per leaf key (`slurm.<phase>.*` once per phase, with
that phase's defaults), its help from the schema's `key(default, help)`, its table's help from the
table's docstring. `sgsbatch config keys` prints them (`--markdown`: `keys_markdown`, the page
docs/keys.md is, checked by tests/unit/test_docs.py); nothing here holds a second copy of a help
text or a default.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any

from sgsbatch.config.loading import type_name
from sgsbatch.config.schema import Config
from sgsbatch.errors import InputError


@dataclass(frozen=True)
class KeyInfo:
    key: str  # dotted path, e.g. solver.lr
    type: str  # as messages say it: "an integer", "one of 'a', 'b'"
    default: Any  # TOML-ready: lists for tuples
    help: str
    table: str  # the dotted table it is in, e.g. slurm.solve
    range: str = ""  # a number key's declared range (schema.Bound spec: ">= 1", "[0.0, 1.0]"), else ""

    def kind(self) -> str:
        """Its type, with its range where one is declared: "an integer, >= 1"."""
        return f"{self.type}, {self.range}" if self.range else self.type


def table_help(obj: Any) -> str:
    """The first paragraph of a table's docstring, on one line."""
    doc = type(obj).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def tables(obj: Any = None, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted name, instance) of every table, the root ("") first, in schema order."""
    obj = Config() if obj is None else obj
    out = [(prefix, obj)]
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += tables(value, f"{prefix}.{f.name}" if prefix else f.name)
    return out


def config_keys(prefix: str = "") -> list[KeyInfo]:
    """Every leaf key under `prefix` (a dotted table or key; "" = all), in schema order; an
    InputError (exit 2) naming the tables when nothing is under it."""
    out = []
    for table, obj in tables():
        hints = typing.get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                continue
            name = f"{table}.{f.name}" if table else f.name
            bound = f.metadata.get("bound")
            out.append(KeyInfo(name, type_name(hints[f.name]), _plain(value), f.metadata.get("help", ""), table,
                               bound.spec if bound is not None else ""))
    if prefix:
        out = [k for k in out if k.key == prefix or k.key.startswith(prefix.rstrip(".") + ".")]
        if not out:
            names = ", ".join(t for t, _ in tables() if t and "." not in t)
            raise InputError(f"no config key is {prefix!r} or under it; the tables: {names} "
                             "(`sgsbatch config keys` lists every key)")
    return out


KEYS_PAGE_HEAD = """# Every config key

Generated from the schema (sgsbatch/config/schema.py) by `sgsbatch config keys --markdown > docs/keys.md`;
a test fails when this page and the schema differ. Each key: its default, its type (and range, where one is declared), what it does.
Tables, keys and the `[slurm.<phase>]` layers are explained in [configuration](configuration.md)."""


def keys_markdown(prefix: str = "") -> str:
    """Every key under `prefix` as a Markdown page: a heading per table, a list item per key."""
    helps = {name: table_help(obj) for name, obj in tables()}
    lines = [KEYS_PAGE_HEAD]
    table = None
    for k in config_keys(prefix):
        if k.table != table:
            table = k.table
            lines += ["", f"## [{table}]", "", helps[table], ""]
        default = json.dumps(k.default)
        lines.append(f"- `{k.key}` = `{default}` ({k.kind()}): {' '.join(k.help.split())}")
    return "\n".join(lines) + "\n"
