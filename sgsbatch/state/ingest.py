"""Writing one round's rows into the database: one transaction, idempotent.

`ingest_rows` takes plain rows (built from the round's shard files by round/lifecycle.round_rows)
and writes attempts, conjectures, reviews, new stored proofs and the given metrics with bulk
`INSERT OR IGNORE` in one `BEGIN IMMEDIATE` transaction, guarded by an `ingestions` row: a second
ingestion of the same round changes nothing. The solved store keeps at most `store_cap` verified
proofs per target, first come first kept (round order, then sample order); how many it took is
recorded under `rows.store_metric`. This module defines no metric and reads no file: it only
writes what it is given (the state package imports nothing of the package's logic).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert
from sqlmodel import select

from sgsbatch.state.db import Database, locked_retry
from sgsbatch.state.schema import Attempt, Conjecture, Ingestion, Metric, ProblemRow, ReviewRow, StoredProof


@dataclass
class RoundRows:
    attempts: list[dict[str, Any]] = field(default_factory=list)
    conjectures: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)  # the round's conjectures as problems
    metrics: dict[str, float] = field(default_factory=dict)
    store_metric: str = ""  # the metric name for the number of proofs the solved store took ("" = none)


def _insert_ignore(s: Any, model: Any, rows: list[dict[str, Any]]) -> None:
    """Bulk insert that skips rows already present (unique constraints), as one executemany."""
    if not rows:
        return
    table = model.__table__
    conn = s.connection()
    if conn.dialect.name == "sqlite":
        stmt = insert(table).prefix_with("OR IGNORE")
    else:
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt = pg_insert(table).on_conflict_do_nothing()
    conn.execute(stmt, rows)


@locked_retry
def ingest_rows(db: Database, run_id: int, r: int, rows: RoundRows, store_cap: int) -> bool:
    """Write one round's rows; False (and no change) when the round was ingested before."""
    with db.write() as s:
        done = s.exec(select(Ingestion).where(Ingestion.run_id == run_id, Ingestion.round == r,
                                              Ingestion.phase == "round")).first()
        if done is not None:
            return False
        tag = {"run_id": run_id}
        _insert_ignore(s, ProblemRow, [{**tag, **p} for p in rows.problems])
        _insert_ignore(s, Conjecture, [{**tag, "round": r, **c} for c in rows.conjectures])
        _insert_ignore(s, Attempt, [{**tag, "round": r, **a} for a in rows.attempts])
        _insert_ignore(s, ReviewRow, [{**tag, "round": r, **v} for v in rows.reviews])
        counts = dict(s.exec(select(StoredProof.problem_id, func.count()).where(
            StoredProof.run_id == run_id).group_by(StoredProof.problem_id)).all())
        new = []
        for a in rows.attempts:
            if a["is_target"] and a["verdict"] == "verified":
                slot = counts.get(a["problem_id"], 0)
                if slot < store_cap:
                    counts[a["problem_id"]] = slot + 1
                    new.append({**tag, "problem_id": a["problem_id"], "slot": slot, "round": r,
                                "sample": a["sample"], "proof": a["proof"]})
        _insert_ignore(s, StoredProof, new)
        if rows.store_metric:
            rows.metrics[rows.store_metric] = len(new)
        _insert_ignore(s, Metric, [{**tag, "round": r, "name": k, "value": float(v)} for k, v in rows.metrics.items()])
        s.add(Ingestion(run_id=run_id, round=r, phase="round", rows=len(rows.attempts), at=time.time()))
    return True


def is_ingested(db: Database, run_id: int, r: int) -> bool:
    with db.read() as s:
        return s.exec(select(Ingestion).where(Ingestion.run_id == run_id, Ingestion.round == r)).first() is not None
