"""A fork's record of its parent: `<run>/forked_from.json`, written by `launch --from RUN --round N`
(ops/fork.py) and read by `status`, the report and `rebuild` (it lives in the run directory). Reading
only: a missing or unreadable file means the run is no fork.
"""

from __future__ import annotations

import json
from typing import Any

from sgsbatch.run.paths import RunPaths

FILE = "forked_from.json"


def read(paths: RunPaths) -> dict[str, Any] | None:
    """The run's `forked_from.json` (None: the run is no fork)."""
    path = paths.root / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # what `describe` and the report read; a file damaged into other JSON reads as unreadable too
    if not (isinstance(data, dict) and isinstance(data.get("parent"), str) and isinstance(data.get("parent_dir"), str)
            and isinstance(data.get("round"), int) and not isinstance(data["round"], bool)):
        return None
    return data


def describe(rec: dict[str, Any]) -> str:
    """One line: `forked from RUN at round N (its rounds 0..N-1 inherited; DIR)`."""
    n = int(rec["round"])
    rounds = "round 0" if n == 1 else f"rounds 0..{n - 1}"
    return f"forked from {rec['parent']} at round {n} (its {rounds} inherited; {rec['parent_dir']})"
