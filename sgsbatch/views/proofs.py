"""Found proofs and conjecture lineage, read from a run's state database (read-only).

`found_proofs`: the solved store (every stored proof: target or conjecture, round, sample, slot)
with the problem's header and statement, each row also a `sgsbatch verify` input row (id, header,
statement, proof). `conjecture_lineage`: every well-formed, unique conjecture with its target,
round, statement, Guide review (whether its reply parsed, the failure's reason code, the
sub-scores and combined score: a failed review's are the stand-ins logic/review.py's `fill_failed` gave
it), the Solver's verified/attempted count and solve rate,
its first verified proof, and its Conjecturer training weight that round (the reward the train job
gave it, read from the `conjecturer_rewards.json` its `prepare` wrote; for runs prepared before
that file existed, recomputed from the round's shard files with round/examples.py, the one place it
is defined; None when it was out of the band, the Conjecturer did not train, the round is not
prepared yet, or an old run's round was compacted since). Every row of both has `simulated`: the
run's SIMULATED parts (`Config.simulated_label`: "generation, verifier, trainer"; "" for a run with
none), so a row read alone still says so (a SIMULATED verifier: the proof was not checked by Lean). Covered: both
executors' runs, a run in progress (completed rounds and whatever is ingested). Not covered:
malformed and duplicate conjectures (counted by the funnel metrics, not listed here).
"""

from __future__ import annotations

from typing import Any

from sqlmodel import func, select

from sgsbatch.errors import InputError
from sgsbatch.run.handle import RunHandle
from sgsbatch.state.schema import Attempt, Conjecture, ProblemRow, ReviewRow, StoredProof


def _problems(h: RunHandle, ids: set[str]) -> dict[str, tuple[str, str]]:
    """(header, theorem) of each problem id the run recorded."""
    if not ids:
        return {}
    with h.db.read() as s:
        rows = s.exec(select(ProblemRow.problem_id, ProblemRow.header, ProblemRow.theorem).where(
            ProblemRow.run_id == h.run_id, ProblemRow.problem_id.in_(sorted(ids)))).all()  # type: ignore[attr-defined]
    return {pid: (header, thm) for pid, header, thm in rows}


def proof_id(problem_id: str, slot: int) -> str:
    """A stored proof's id in `proofs --json`, the export and `sgsbatch verify`'s input: unique per run."""
    return f"{problem_id}#{slot}"


def _check_round(h: RunHandle, round_: int | None) -> None:
    from sgsbatch.run.handle import check_round

    check_round(round_, h.cfg)


def _check_target(h: RunHandle, target: str | None) -> None:
    """`target` is a problem (target or recorded conjecture) of the run; an InputError (exit 2) naming some when not."""
    if target is None:
        return
    with h.db.read() as s:
        if s.exec(select(ProblemRow.id).where(ProblemRow.run_id == h.run_id, ProblemRow.problem_id == target)).first():
            return
        some = s.exec(select(ProblemRow.problem_id).where(ProblemRow.run_id == h.run_id)
                      .order_by(ProblemRow.id).limit(3)).all()  # type: ignore[arg-type]
    raise InputError(f"--target {target}: run {h.cfg.run.name} has no target or conjecture with this id "
                     f"(its ids look like {', '.join(some) or '(none)'}; `sgsbatch proofs {h.cfg.run.name} --json` "
                     "lists the solved ones)")


def round_labels(h: RunHandle, rounds: set[int]) -> dict[int, str]:
    """Each round's SIMULATED parts ("" for none) as that round ran (`RunHandle.at`): a fork's inherited rounds
    keep their parent's (a Lean fork of a SIMULATED trunk still labels the trunk's proofs SIMULATED)."""
    return {r: h.at(r).simulated_label() for r in rounds}


def found_proofs(h: RunHandle, target: str | None = None, round_: int | None = None) -> list[dict[str, Any]]:
    """The stored proofs, oldest round first; `target` (a problem id, target or conjecture) and `round_` filter.

    Each row is also a row `sgsbatch verify` reads: `id` (`proof_id`), `header`, `statement` (read
    as its `theorem`) and `proof`; header and statement are None where the problem was not recorded;
    `simulated` names the run's SIMULATED parts ("" when none)."""
    _check_round(h, round_)
    _check_target(h, target)
    with h.db.read() as s:
        q = select(StoredProof).where(StoredProof.run_id == h.run_id)
        if target is not None:
            q = q.where(StoredProof.problem_id == target)
        if round_ is not None:
            q = q.where(StoredProof.round == round_)
        rows = s.exec(q.order_by(StoredProof.round, StoredProof.problem_id, StoredProof.slot)).all()  # type: ignore[arg-type]
        simulated = round_labels(h, {p.round for p in rows})
        out: list[dict[str, Any]] = [{"id": proof_id(p.problem_id, p.slot), "problem_id": p.problem_id,
                                      "round": p.round, "sample": p.sample, "slot": p.slot, "proof": p.proof,
                                      "simulated": simulated[p.round]} for p in rows]
    problems = _problems(h, {str(r["problem_id"]) for r in out})
    for r in out:
        r["header"], r["statement"] = problems.get(str(r["problem_id"]), (None, None))
    return out


def _weights(h: RunHandle, r: int) -> dict[str, float]:
    """Round r's Conjecturer training weights: the file the train job's `prepare` wrote; for a run
    prepared before that file existed, recomputed from the round's shard files; {} (weight unknown)
    while the round is not prepared or, in such an old run, the round was compacted since (its
    token ids are gone: round/compaction.py) or a shard of the round is unfinished."""
    from sgsbatch.phases import train as train_phase

    rewards = train_phase.conjecturer_rewards(h.paths, r)
    if rewards is not None:
        return rewards
    if not (h.paths.phase_dir(r, "train") / train_phase.PREPARED).is_file():
        return {}  # not prepared yet: the Conjecturer has not trained on this round
    from sgsbatch.round.compaction import is_compacted
    from sgsbatch.round.examples import conjecturer_examples
    from sgsbatch.round.results import round_results
    from sgsbatch.run.shards import unfinished

    if is_compacted(h.paths, r) or not h.paths.round_inputs(r).is_file() or any(
            unfinished(h.paths.phase_dir(r, p), h.at(r).shard_count(p)) for p in h.cfg.phases_of_round(r) if p != "train"):
        return {}
    _, rewards = conjecturer_examples(h.cfg, h.paths, r, round_results(h.cfg, h.paths, r))
    return rewards


def conjecture_lineage(h: RunHandle, target: str | None = None, round_: int | None = None,
                       weights: bool = True) -> list[dict[str, Any]]:
    """Every unique conjecture (of `target`, of round `round_`) with its lineage; see the module docstring."""
    _check_round(h, round_)
    _check_target(h, target)
    with h.db.read() as s:
        q = select(Conjecture).where(Conjecture.run_id == h.run_id, Conjecture.status == "ok",
                                     Conjecture.conjecture_id.is_not(None))  # type: ignore[union-attr]
        if target is not None:
            q = q.where(Conjecture.target_id == target)
        if round_ is not None:
            q = q.where(Conjecture.round == round_)
        conj = s.exec(q.order_by(Conjecture.round, Conjecture.target_id, Conjecture.sample)).all()  # type: ignore[arg-type]
        ids = sorted({c.conjecture_id for c in conj if c.conjecture_id})
        reviews = {r.conjecture_id: r for r in s.exec(select(ReviewRow).where(
            ReviewRow.run_id == h.run_id, ReviewRow.conjecture_id.in_(ids))).all()}  # type: ignore[attr-defined]
        counts: dict[str, list[int]] = {}
        for pid, verdict, n in s.exec(select(Attempt.problem_id, Attempt.verdict, func.count()).where(
                Attempt.run_id == h.run_id, Attempt.problem_id.in_(ids)).group_by(  # type: ignore[attr-defined]
                Attempt.problem_id, Attempt.verdict)).all():
            c = counts.setdefault(pid, [0, 0])
            c[1] += n
            c[0] += n if verdict == "verified" else 0
        proofs: dict[str, str] = {}
        for pid, proof in s.exec(select(Attempt.problem_id, Attempt.proof).where(
                Attempt.run_id == h.run_id, Attempt.problem_id.in_(ids),  # type: ignore[attr-defined]
                Attempt.verdict == "verified").order_by(Attempt.round, Attempt.sample)).all():  # type: ignore[arg-type]
            proofs.setdefault(pid, proof or "")
        rows = [(c.round, c.target_id, c.conjecture_id, c.statement) for c in conj]
    per_round = {r: _weights(h, r) for r in sorted({r for r, *_ in rows})} if weights else {}
    simulated = round_labels(h, {r for r, *_ in rows})
    out, seen = [], set()
    for r, tgt, cid, statement in rows:
        if cid in seen:
            continue
        seen.add(cid)
        rv = reviews.get(str(cid))
        verified, attempts = counts.get(str(cid), [0, 0])
        out.append({
            "conjecture_id": cid, "target_id": tgt, "round": r, "statement": statement,
            "guide": None if rv is None else {"parsed": rv.parsed, "reason": rv.reason, "relevance": rv.relevance,
                                              "redundant": rv.redundant, "complexity": rv.complexity,
                                              "score": rv.score},
            "verified": verified, "attempts": attempts, "solve_rate": verified / attempts if attempts else None,
            "proof": proofs.get(str(cid)),
            "training_weight": per_round.get(r, {}).get(str(cid)) if weights else None,
            "simulated": simulated[r],
        })
    return out
