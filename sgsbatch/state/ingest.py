"""Ingesting a finished round's shard files into the database: one transaction, idempotent.

`ingest_round` reads the round back from its shards (round_data), builds plain rows and hands
them to `ingest_rows`, which writes attempts, conjectures, reviews, new stored proofs and the
round's generation metrics with bulk `INSERT OR IGNORE` in one `BEGIN IMMEDIATE` transaction,
guarded by an `ingestions` row: a second ingestion of the same round changes nothing.
Attempts keep the proof text only when verified (the database holds every proof found; all
samples, failed ones included, stay in the round's shard files). The solved store keeps at most `solver.store_cap` verified proofs per target, first come first
kept (round order, then sample order). Train metrics are added later by `advance.finish_round`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert
from sqlmodel import select

from sgsbatch.config.schema import Config
from sgsbatch.round.examples import conjecture_band, guide_reviews
from sgsbatch.round.results import ProblemResult, load_targets, round_conjectures
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import phase_wall_s
from sgsbatch.state.db import Database, locked_retry
from sgsbatch.state.schema import Attempt, Conjecture, Ingestion, Metric, Problem, Review, StoredProof


@dataclass
class RoundRows:
    attempts: list[dict[str, Any]] = field(default_factory=list)
    conjectures: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)  # the round's conjectures as problems
    metrics: dict[str, float] = field(default_factory=dict)


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


def round_rows(cfg: Config, paths: RunPaths, r: int, results: dict[str, ProblemResult]) -> RoundRows:
    """Everything a round adds to the database, derived from its shard files and `round_results`."""
    out = RoundRows()
    targets = load_targets(paths)
    conj, conj_rows, funnel = round_conjectures(cfg, paths, r, targets)
    out.conjectures = conj_rows
    out.problems = [{"problem_id": p.problem_id, "header": p.header, "theorem": p.theorem} for p in conj]
    extract_fail: dict[str, int] = {}
    for pid, res in results.items():
        for k, smp in enumerate(res.samples):
            if not smp["ok"]:
                extract_fail[smp["reason"]] = extract_fail.get(smp["reason"], 0) + 1
            out.attempts.append({
                "problem_id": pid, "is_target": res.problem.is_target, "sample": k, "extracted": smp["ok"],
                "extract_reason": smp["reason"], "verdict": smp["verdict"],
                # proof text is kept for verified proofs; every sample stays in the shard files
                "proof": smp.get("proof") if smp["verdict"] == "verified" else None,
                "verify_reason": smp.get("verify_reason"), "tokens": len(smp["token_ids"]),
                "finish_reason": smp["finish_reason"], "verify_s": smp.get("time_s", 0.0)})
    reviews = guide_reviews(cfg, paths, r)
    out.reviews = [{"conjecture_id": k, "parsed": v["ok"], "reason": v["reason"], "relevance": v["relevance"] or 0.0,
                    "redundant": v["redundant"] or 0.0, "complexity": v["complexity"] or 0.0, "score": v["score"],
                    "tokens": len(v["token_ids"])} for k, v in sorted(reviews.items())]
    m = out.metrics
    tgt = [res for res in results.values() if res.problem.is_target]
    conj_res = [res for res in results.values() if not res.problem.is_target]
    m["pass@8"] = sum(1 for x in tgt if x.verified) / len(tgt) if tgt else 0.0
    m["pass@1"] = sum(x.rate for x in tgt) / len(tgt) if tgt else 0.0
    m["conjectures/generated"] = funnel.generated
    m["conjectures/well_formed"] = funnel.well_formed
    m["conjectures/unique"] = funnel.unique
    m["conjectures/valid"] = sum(1 for x in conj_res if x.verified)
    m["conjectures/in_band"] = len(conjecture_band(cfg, results)) if conj_res else 0
    for reason, n in funnel.rejected.items():
        m[f"conjectures/rejected/{reason}"] = n
    for reason, n in extract_fail.items():
        m[f"extraction_failures/{reason}"] = n
    n_attempts = len(out.attempts)
    m["verify/timeout_rate"] = sum(a["verdict"] == "timeout" for a in out.attempts) / max(n_attempts, 1)
    m["verify/error_rate"] = sum(a["verdict"] == "error" for a in out.attempts) / max(n_attempts, 1)
    m["verify/verified"] = sum(a["verdict"] == "verified" for a in out.attempts)
    for b in range(cfg.solver.samples + 1):
        m[f"solve_rate_hist/targets_{b}"] = sum(1 for x in tgt if x.verified == b)
        if conj_res:
            m[f"solve_rate_hist/conjectures_{b}"] = sum(1 for x in conj_res if x.verified == b)
    if out.reviews:
        for key in ("score", "relevance", "redundant", "complexity"):
            m[f"guide/{key}_mean"] = sum(float(x[key]) for x in out.reviews) / len(out.reviews)
        m["guide/failed_reviews"] = sum(1 for x in out.reviews if not x["parsed"])
    for phase in cfg.phases_of_round(r):
        wall = phase_wall_s(paths.phase_dir(r, phase), cfg.shard_count(phase)) if phase != "train" else None
        if wall is not None:
            m[f"wall_s/{phase}"] = wall
    m["generations/round"] = funnel.generated + n_attempts + len(out.reviews)
    m["tokens/round"] = (sum(a["tokens"] for a in out.attempts) + sum(c["tokens"] for c in conj_rows)
                         + sum(x["tokens"] for x in out.reviews))
    return out


@locked_retry
def ingest_rows(db: Database, run_id: int, r: int, rows: RoundRows, store_cap: int) -> bool:
    """Write one round's rows; False (and no change) when the round was ingested before."""
    with db.write() as s:
        done = s.exec(select(Ingestion).where(Ingestion.run_id == run_id, Ingestion.round == r,
                                              Ingestion.phase == "round")).first()
        if done is not None:
            return False
        tag = {"run_id": run_id}
        _insert_ignore(s, Problem, [{**tag, **p} for p in rows.problems])
        _insert_ignore(s, Conjecture, [{**tag, "round": r, **c} for c in rows.conjectures])
        _insert_ignore(s, Attempt, [{**tag, "round": r, **a} for a in rows.attempts])
        _insert_ignore(s, Review, [{**tag, "round": r, **v} for v in rows.reviews])
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
        rows.metrics["store/new_proofs"] = len(new)
        _insert_ignore(s, Metric, [{**tag, "round": r, "name": k, "value": float(v)} for k, v in rows.metrics.items()])
        s.add(Ingestion(run_id=run_id, round=r, phase="round", rows=len(rows.attempts), at=time.time()))
    return True


def ingest_round(db: Database, run_id: int, cfg: Config, paths: RunPaths, r: int,
                 results: dict[str, ProblemResult]) -> bool:
    """Ingest round r; `results` is its `round_results`, which the caller (the train job) needs too."""
    with db.read() as s:
        if s.exec(select(Ingestion).where(Ingestion.run_id == run_id, Ingestion.round == r)).first() is not None:
            return False
    return ingest_rows(db, run_id, r, round_rows(cfg, paths, r, results), cfg.solver.store_cap)
