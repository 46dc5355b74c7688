"""The round between its phases, in the order it runs: prepare, ingest, finish.

`prepare_round` writes what a round starts from (`inputs.json`: the unsolved targets, the targets
the Solver samples) before any of its jobs is submitted. `round_rows` derives everything a round
adds to the database from its shard files, and `ingest_round` writes it (state/ingest.py: one
transaction, idempotent). `finish_round` records (state/round_end.py, one transaction, the files read
before it) checkpoints and train metrics, the headline
cumulative solve rate and generations so far, the round's and its phases' start and end times
(round/timing.py; `wall_s/round`), applies the weight retention policy, writes TensorBoard points
with the alarms judged at the round's end (round/alarms.py; purge_step makes a repeated finish not
duplicate them), the run's HParams session and each optimizer step's `train_step/*` points
(round/step_metrics.py), marks the round completed and prepares the next
one, or completes the run. All are idempotent, so a retried or
resumed train job can run them again. Not covered: Slurm bookkeeping and submitting the next
round (scheduling/chain.py does both around these).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from sgsbatch.backends.batches import GRPO_FAMILY, RATIO_OBJECTIVES
from sgsbatch.config.loading import flat_config
from sgsbatch.config.schema import Config
from sgsbatch.logic.rewards import length_penalty, uses_try
from sgsbatch.logic.selection import conjecture_seeds, ei_targets, rollout_draw, unsolved
from sgsbatch.round import metrics as M
from sgsbatch.round.alarms import round_end_values
from sgsbatch.round.checkpoints import prune, prune_optimizer_states
from sgsbatch.round.compaction import token_count
from sgsbatch.round.examples import in_band_conjectures
from sgsbatch.round.refusals import refusal_metrics, tally
from sgsbatch.round.results import ProblemResult, guide_reviews, round_conjectures, round_results, run_targets
from sgsbatch.round.search_metrics import search_metrics
from sgsbatch.round.step_metrics import ROLES, steps_before, write_round_steps
from sgsbatch.round.timing import round_spans
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard, atomic_write_json, phase_wall_s, shards, unfinished
from sgsbatch.state.ingest import RoundRows, ingest_rows, is_ingested
from sgsbatch.state.round_end import RoundEnd, record_round_end
from sgsbatch.state.schema import (
    Checkpoint,
    Metric,
    Round,
    StoredProof,
)
from sgsbatch.verification.verdict import ERROR, TIMEOUT, VERIFIED


def prepare_round(h: RunHandle, r: int) -> None:
    """Write round r's inputs from the solved store (never overwritten once written): the unsolved
    targets (the Conjecturer's and the "unsolved" selection's), the targets the Solver samples (with
    `solver.rollout_prompts`, the round's rollout batch in draw order: selection.rollout_draw) and,
    with `conjecturer.setup = "seed_statement"`, the seeds: (target, stored proof slot, proof, samples)."""
    path = h.paths.round_inputs(r)
    if path.exists():
        return
    with h.db.read() as s:
        counts = dict(s.exec(select(StoredProof.problem_id, func.count()).where(
            StoredProof.run_id == h.run_id).group_by(StoredProof.problem_id)).all())
    ids = [t.problem_id for t in run_targets(h.paths)]
    todo = unsolved(ids, counts)
    mode, c = h.cfg.solver.selection_mode(), h.cfg.conjecturer
    draw = h.cfg.solver.rollout_draw()  # a rollout step's batch (solver.rollout_prompts), in draw order
    solve = (ei_targets(ids, counts, h.cfg.solver.store_cap) if mode == "less_16_proofs"
             else rollout_draw(ids, r, draw, str(h.cfg.run.seed)) if draw else ids)
    inputs: dict[str, Any] = {"round": r, "unsolved": todo if c.enabled or mode == "unsolved" else [],
                              "solve_targets": solve, "solved": len(ids) - len(todo)}
    if c.enabled and c.setup == "seed_statement":
        inputs["seeds"] = round_seeds(h, r, ids)
    atomic_write_json(path, inputs)


def round_seeds(h: RunHandle, r: int, ids: list[str]) -> list[dict[str, Any]]:
    """The seeded Conjecturer's prompts of round r (selection.conjecture_seeds over the solved store),
    each with its proof's text: the conjecture tasks read them without the database."""
    wanted = set(ids)
    slots: dict[str, list[int]] = {}
    with h.db.read() as s:  # the store's keys first (no proof text), then the chosen seeds' texts only
        for pid, slot in s.exec(select(StoredProof.problem_id, StoredProof.slot).where(
                StoredProof.run_id == h.run_id)).all():
            if pid in wanted:
                slots.setdefault(pid, []).append(slot)
        seeds = conjecture_seeds(ids, slots, h.cfg.conjecturer.samples_per_target, f"{h.cfg.run.seed}:{r}")
        proofs: dict[tuple[str, int], str] = {}
        chosen = sorted({t for t, _, _ in seeds})
        for i in range(0, len(chosen), 500):  # SQLite's bound on the variables of one statement
            proofs.update(((pid, slot), text) for pid, slot, text in s.exec(
                select(StoredProof.problem_id, StoredProof.slot, StoredProof.proof).where(
                    StoredProof.run_id == h.run_id, col(StoredProof.problem_id).in_(chosen[i:i + 500]))).all())
    return [{"target_id": t, "slot": k, "proof": proofs[(t, k)], "samples": n} for t, k, n in seeds]


def round_rows(cfg: Config, paths: RunPaths, r: int, results: dict[str, ProblemResult]) -> RoundRows:
    """Everything a round adds to the database, derived from its shard files and `round_results`."""
    out = RoundRows(store_metric=M.STORE_NEW_PROOFS)
    targets = run_targets(paths)
    conj, conj_rows, funnel = round_conjectures(cfg, paths, r, targets)
    out.conjectures = conj_rows
    out.problems = [{"problem_id": p.problem_id, "header": p.header, "theorem": p.theorem} for p in conj]
    extract_fail: dict[str, int] = {}
    try_proofs = long_samples = 0
    for pid, res in results.items():
        for k, smp in enumerate(res.samples):
            if not smp["ok"] and "search" not in smp:  # a search without a proof is no extraction failure
                extract_fail[smp["reason"]] = extract_fail.get(smp["reason"], 0) + 1
            try_proofs += smp["verdict"] == VERIFIED and uses_try(smp.get("proof") or "", cfg.solver.try_comments)
            long_samples += length_penalty(token_count(smp), cfg.solver.max_tokens,
                                           cfg.solver.length_penalty_start) is not None
            out.attempts.append({
                "problem_id": pid, "is_target": res.problem.is_target, "sample": k, "extracted": smp["ok"],
                "extract_reason": smp["reason"], "verdict": smp["verdict"],
                # proof text is kept for verified proofs; every sample stays in the shard files
                "proof": smp.get("proof") if smp["verdict"] == VERIFIED else None,
                "verify_reason": smp.get("verify_reason"), "tokens": token_count(smp),
                "finish_reason": smp["finish_reason"], "verify_s": smp.get("time_s", 0.0)})
    reviews = guide_reviews(cfg, paths, r)
    out.reviews = [{"conjecture_id": k, "parsed": v["ok"], "reason": v["reason"], "relevance": v["relevance"] or 0.0,
                    "redundant": v["redundant"] or 0.0, "complexity": v["complexity"] or 0.0, "score": v["score"],
                    "tokens": token_count(v)} for k, v in sorted(reviews.items())]
    m = out.metrics
    tgt = [res for res in results.values() if res.problem.is_target]
    conj_res = [res for res in results.values() if not res.problem.is_target]
    m[M.PASS_AT_8] = sum(1 for x in tgt if x.verified) / len(tgt) if tgt else 0.0
    m[M.PASS_AT_1] = sum(x.rate for x in tgt) / len(tgt) if tgt else 0.0
    m[M.conjectures("generated")] = funnel.generated
    m[M.conjectures("well_formed")] = funnel.well_formed
    m[M.conjectures("unique")] = funnel.unique
    m[M.conjectures("valid")] = sum(1 for x in conj_res if x.verified)
    m[M.conjectures("in_band")] = len(in_band_conjectures(cfg, results)) if conj_res else 0
    for reason, n in funnel.rejected.items():
        m[M.conjectures_rejected(reason)] = n
    for reason, n in extract_fail.items():
        m[M.extraction_failures(reason)] = n
    n_attempts = len(out.attempts)
    m[M.VERIFY_TIMEOUT_RATE] = sum(a["verdict"] == TIMEOUT for a in out.attempts) / max(n_attempts, 1)
    m[M.VERIFY_ERROR_RATE] = sum(a["verdict"] == ERROR for a in out.attempts) / max(n_attempts, 1)
    m[M.VERIFY_VERIFIED] = sum(a["verdict"] == VERIFIED for a in out.attempts)
    m.update(refusal_metrics(tally(s for res in results.values() for s in res.samples), cfg.alerts.refused_items))
    for b in range(cfg.solver.samples + 1):
        m[M.solve_rate_hist("targets", b)] = sum(1 for x in tgt if x.verified == b)
        if conj_res:
            m[M.solve_rate_hist("conjectures", b)] = sum(1 for x in conj_res if x.verified == b)
    if out.reviews:
        for key in M.GUIDE_MEANS:
            m[M.guide_mean(key)] = sum(float(x[key]) for x in out.reviews) / len(out.reviews)
        m[M.GUIDE_FAILED_REVIEWS] = sum(1 for x in out.reviews if not x["parsed"])
    for phase in cfg.phases_of_round(r):
        wall = phase_wall_s(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase)) if phase != "train" else None
        if wall is not None:
            m[M.wall_s(phase)] = wall
    m.update(generation_metrics(cfg, paths, r))
    m.update(search_metrics(cfg, paths, r, results))
    # the scaling law's C counts Conjecturer and Solver samples only (the SGS paper, the reference); not reviews
    m[M.GENERATIONS_ROUND] = funnel.generated + n_attempts
    m[M.GUIDE_REVIEWS] = len(out.reviews)
    m[M.SOLVER_TRY_PROOFS] = try_proofs
    m[M.SOLVER_LENGTH_PENALISED] = long_samples
    m[M.TOKENS_ROUND] = (sum(a["tokens"] for a in out.attempts) + sum(c["tokens"] for c in conj_rows)
                         + sum(x["tokens"] for x in out.reviews))
    return out


def ingest_round(h: RunHandle, r: int, results: dict[str, ProblemResult] | None = None) -> bool:
    """Ingest round r once; `results` (its `round_results`) is read here when the caller has none."""
    if is_ingested(h.db, h.run_id, r):
        return False
    if results is None:
        results = round_results(h.cfg, h.paths, r)
    return ingest_rows(h.db, h.run_id, r, round_rows(h.cfg, h.paths, r, results), h.cfg.solver.store_cap)


GENERATING_PHASES = ("conjecture", "solve", "guide")


def generation_metrics(cfg: Config, paths: RunPaths, r: int) -> dict[str, float]:
    """`gen/<phase>/...` from the generating tasks' completion markers (what reached their engines).

    tokens_per_s is one task's throughput (generated tokens / seconds in the engine, over the
    phase's tasks), startup_s the mean engine start-up of the tasks that started one. A requeued
    task's marker counts its last attempt only.
    """
    out: dict[str, float] = {}
    for phase in GENERATING_PHASES:
        if phase not in cfg.phases_of_round(r):
            continue
        metas = [s.meta() for s in shards(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase)) if s.is_done()]
        metas = [x for x in metas if "generated_tokens" in x]
        if not metas:
            continue
        tokens = sum(int(x["generated_tokens"]) for x in metas)
        secs = sum(float(x["generate_s"]) for x in metas)
        out[M.gen(phase, "tokens")] = tokens
        out[M.gen(phase, "sequences")] = sum(int(x["sequences"]) for x in metas)
        out[M.gen(phase, "tokens_per_s")] = tokens / secs if secs > 0 else 0.0
        out[M.gen(phase, "startup_s")] = sum(float(x["startup_s"]) for x in metas) / len(metas)
        if tokens and all("neg_logprob_sum" in x for x in metas):
            out[M.sampled_entropy(phase)] = sum(float(x["neg_logprob_sum"]) for x in metas) / tokens
    return out


def _train_metrics(train: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The train job's results per role as the round's metrics (steps, sequences, loss, its statistics and the
    examples' own from phases/train.prepare)."""
    new: dict[str, float] = {}
    for role, res in train.items():
        new[M.train(role, "steps")] = res["steps"]
        new[M.train(role, "sequences")] = res["sequences"]
        new[M.train(role, "loss")] = res["mean_loss"]
        if res.get("tokens"):  # results stored before these statistics existed have none
            new[M.train_entropy(role)] = res["entropy"]
            objective = res.get("objective")
            if objective in RATIO_OBJECTIVES:
                new[M.CISPO_CLIP_FRACTION] = res["clip_fraction"]
                # clip sides: the GRPO family's; results stored before these statistics existed have none
                new |= {M.train_ratio(role, k): res[f] for k, f in M.TRAIN_RATIO_STATS.items()
                        if f in res and (objective in GRPO_FAMILY or not k.startswith(("clip_", "ref_")))}
        if "reward_mean" in res:
            new[M.reward_mean(role)] = res["reward_mean"]
        new |= res.get("metrics", {})  # the examples' own (phases/train.prepare)
    return new


def _record(h: RunHandle, r: int, train: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Round r's end in the database (state/round_end.py), from its files read first."""
    marker = Shard(h.paths.phase_dir(r, "train"), 0)  # done: ending a round again (resume, rebuild)
    ended = float(marker.meta()["time"]) if marker.is_done() else time.time()
    spans = round_spans(h.cfg, h.paths, r, train_end=ended)
    metrics = _train_metrics(train)
    if "train" in spans:
        metrics[M.wall_s("train")] = ended - spans["train"][0]
    started = min((start for start, _ in spans.values()), default=None)
    if started is not None:
        metrics[M.ROUND_WALL_S] = ended - started
    nxt = h.at(r + 1)  # the next round's own config (a change of method from it on; a fork's first round)
    end = RoundEnd(round=r, checkpoints=[(role, str(h.paths.checkpoint(r, role)), res["steps"], res["sequences"])
                                         for role, res in train.items()],
                   metrics=metrics, ended=ended, started=started, spans=spans,
                   wall_metric=M.wall_s,
                   next_phases=[(kind, nxt.shard_count(kind)) for kind in nxt.phases_of_round(r + 1)],
                   solved_rate=M.CUMULATIVE_SOLVE_RATE, solved_targets=M.SOLVED_TARGETS,
                   generations_total=M.GENERATIONS_TOTAL, generations_round=M.GENERATIONS_ROUND)
    return record_round_end(h.db, h.run_id, end)


def finish_round(h: RunHandle, r: int, train: dict[str, dict[str, Any]]) -> None:
    """End round r with the train job's results per role (see the module docstring)."""
    metrics = _record(h, r, train)
    deleted = prune(h.cfg, h.paths, r)  # before the alarms: the disk they project is what stays
    prune_optimizer_states(h.paths, keep_newest=h.cfg.train.optimizer == "carry")
    M.write_tensorboard(h.paths.tb, r, metrics, simulated=h.cfg.simulated, smoke=h.cfg.run.smoke,
                        rehearsal=h.cfg.run.rehearsal, alerts=round_end_values(h.cfg, h.paths, r, metrics))
    M.write_hparams(h.paths.tb, r, flat_config(h.cfg), metrics)
    write_round_steps(h.paths.tb, h.paths, r, steps_before_round(h, r))  # train_step/*: why here, round/step_metrics.py
    if deleted:
        with h.db.write() as s:
            for ck in s.exec(select(Checkpoint).where(Checkpoint.run_id == h.run_id)).all():
                if any(str(d) in ck.path for d in deleted):
                    ck.deleted = True
                    s.add(ck)
    if r + 1 < h.cfg.run.rounds:
        prepare_round(h.for_round(r + 1), r + 1)


def steps_before_round(h: RunHandle, r: int) -> dict[str, int]:
    """Each trainable role's optimizer steps in rounds 0..r-1 (the first global step of round r, less 1)."""
    with h.db.read() as s:
        out = {}
        for role in ROLES:
            rows = s.exec(select(Metric.round, Metric.value).where(
                Metric.run_id == h.run_id, Metric.name == M.train(role, "steps"), Metric.round < r)).all()
            out[role] = steps_before(dict(rows), r)
        return out


def round_completed(h: RunHandle, r: int) -> bool:
    with h.db.read() as s:
        rnd = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r)).first()
        return rnd is not None and rnd.state == "completed"


def first_unfinished_round(h: RunHandle) -> int:
    """The first round not completed (the last round when all are); one query whatever the round."""
    with h.db.read() as s:
        done = set(s.exec(select(Round.index).where(Round.run_id == h.run_id, Round.state == "completed")).all())
    return next((i for i in range(h.cfg.run.rounds) if i not in done), h.cfg.run.rounds - 1)


def current_phase(cfg: Config, paths: RunPaths, r: int) -> str:
    """Round r's first phase with unfinished shards ("train" when every shard is done)."""
    for phase in cfg.phases_of_round(r):
        if unfinished(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase)):
            return phase
    return "train"
