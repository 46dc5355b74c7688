"""A run's amendments as people read them: every config change after launch, oldest first (`history`), each
in words (`describe`). The write side, which checks and records a change, is ops/amend.py."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlmodel import select

from sgsbatch.run import amendments
from sgsbatch.run.handle import RunHandle
from sgsbatch.state.schema import Amendment


def history(h: RunHandle) -> list[dict[str, Any]]:
    """The run's amendments, oldest first: the database's rows (a database from before amendments
    were recorded, opened read-only, has no table: then the run directory's file)."""
    from sqlalchemy import inspect

    with h.db.read() as s:
        if not inspect(s.connection()).has_table("amendments"):
            return list(amendments.read(h.paths))
        rows = s.exec(select(Amendment).where(Amendment.run_id == h.run_id).order_by(Amendment.id)).all()  # type: ignore[arg-type]
        return [{"at": r.at, "key": r.key, "old": json.loads(r.old), "new": json.loads(r.new), "kind": r.kind,
                 "from_round": r.from_round, "round": r.round, "command": r.command} for r in rows]


def describe(rec: dict[str, Any]) -> str:
    """One amendment in words, e.g. `slurm.solve.time_min: 480 -> 960 (round 3, 2025-01-02 10:00)`."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec["at"]))
    what = (f"change of method from round {rec['from_round']}" if rec["kind"] == amendments.METHOD
            else f"during round {rec['round']}")
    return f"{rec['key']}: {rec['old']!r} -> {rec['new']!r} ({what}, {when})"
