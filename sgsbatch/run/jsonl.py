"""Reading the run's JSON-lines files: one tolerant reader for every log and record file.

Append-only files (attempt and failure logs, item logs, train steps, job journals, histories) may end
in a line a killed writer or a full disk cut short; a file rewritten whole never does. Not covered: a
finished shard's output (run/shards.py reads it strictly: a damaged one is quarantined, not skipped).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path, *, past_bad_lines: bool = False) -> list[dict[str, Any]]:
    """The JSON-object lines of `path`, in order ([] when it does not exist). A line that is not one (no
    newline: cut short; not JSON; not an object) ends the read, as an append-only log's reader wants
    (its writer goes on after the last whole line), or with `past_bad_lines` is skipped and the read goes
    on (a file whose later lines still count: a job journal, the amendments, the canary's history)."""
    out: list[dict[str, Any]] = []
    try:
        f = path.open("rb")  # each line decoded alone
    except FileNotFoundError:
        return out
    with f:
        for raw in f:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:  # bytes that are not UTF-8: a bad line, as one that is not JSON
                rec, blank = None, False
            else:
                rec, blank = _record(line), not line.strip() and line.endswith("\n")
            if rec is not None:
                out.append(rec)
            elif not blank and not past_bad_lines:
                break
    return out


def _record(line: str) -> dict[str, Any] | None:
    if not line.endswith("\n"):
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) else None
