"""The SIMULATED generation backend and trainer: determinism, the solve-rate target, real parsers.

Covered: the same request gets the same replies (and another seed different ones); the share of
Solver attempts the SIMULATED verifier accepts matches the drawn target probability within
4 binomial standard deviations (fixed seeds); every reply goes through the real extraction /
review parsers and is either parsed or recorded as malformed (with malformed ones present);
token counts are capped by the completion budget; the draw marker is ignored without it;
the SIMULATED trainer plans real steps and publishes a checkpoint with the real protocol.
Not covered: a whole run (tests/integration/test_rehearsal_local.py, tests/slurm/test_rehearsal_slurm.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from sgsbatch.backends.batches import Example, TrainSettings
from sgsbatch.backends.generation import Request
from sgsbatch.backends.simulated_generation import (
    SimulatedGenerator,
    attempt_probability,
    curve,
    settings_from,
    statement_of,
)
from sgsbatch.backends.simulated_trainer import simulated_train
from sgsbatch.backends.train_steps import TrainStep
from sgsbatch.backends.weights import stored_result
from sgsbatch.config.schema import Config
from sgsbatch.logic.extraction import extract_conjecture, extract_proof
from sgsbatch.logic.prompts import conjecturer_messages, guide_messages, reference_prompts, solver_messages
from sgsbatch.logic.review import parse_review
from sgsbatch.run.checkpoint import is_complete, read_marker
from sgsbatch.verification.simulated import simulated_verify

HEADER = "import Mathlib\nimport Aesop\n\n"
THEOREMS = [f"theorem t{i} (x : ℝ) (h : {i} < x) : x ^ 2 ≥ {i} * x := by" for i in range(300)]
TAGS = reference_prompts().guide_tags


def _gen(role: str, round_index: int = 0, **kw: object) -> SimulatedGenerator:
    cfg = Config()
    cfg = dataclasses.replace(cfg, generation=dataclasses.replace(cfg.generation, **kw))  # type: ignore[arg-type]
    return SimulatedGenerator(settings_from(cfg, role, round_index), TAGS)


def _solver_requests(seed: int = 0) -> list[list[dict[str, str]]]:
    return [solver_messages(HEADER, t) for t in THEOREMS]


def test_same_request_same_replies_other_seed_other_replies() -> None:
    msgs = _solver_requests()[:20]
    a = _gen("solver").generate(msgs, 4, seed=7, max_tokens=8192, temperature=1.0)
    b = _gen("solver").generate(msgs, 4, seed=7, max_tokens=8192, temperature=1.0)
    c = _gen("solver").generate(msgs, 4, seed=8, max_tokens=8192, temperature=1.0)
    assert a == b
    assert [s.token_ids for g in a for s in g.samples] != [s.token_ids for g in c for s in g.samples]


def test_solve_rate_matches_target_within_binomial_error() -> None:
    n = 8
    for r in (0, 30):
        gen = _gen("solver", r, simulated_malformed_solver=0.0)
        outs = gen.generate(_solver_requests(), n, seed=11, max_tokens=8192, temperature=1.0)
        expected = sum(attempt_probability(gen.s, statement_of(m)) for m in _solver_requests()) * n
        verified = 0
        for theorem, out in zip(THEOREMS, outs, strict=True):
            for s in out.samples:
                ex = extract_proof(s.text)
                if ex.ok and simulated_verify(HEADER, theorem, ex.value or "").verdict == "verified":
                    verified += 1
        total = len(THEOREMS) * n
        p = expected / total
        sd = math.sqrt(total * p * (1 - p))
        assert abs(verified - expected) <= 4 * sd, (r, verified, expected, sd)
    later = dataclasses.replace(gen.s, round=0)
    assert curve(gen.s) > curve(later)  # the target rises with the round


def test_every_reply_parses_or_is_recorded_malformed() -> None:
    targets = THEOREMS[:60]
    solver = _gen("solver").generate([solver_messages(HEADER, t) for t in targets], 8, seed=1,
                                     max_tokens=8192, temperature=1.0)
    proofs = [extract_proof(s.text) for g in solver for s in g.samples]
    conj = _gen("conjecturer").generate([conjecturer_messages(HEADER, t) for t in targets], 8, seed=2,
                                        max_tokens=8192, temperature=1.0)
    statements = [extract_conjecture(s.text) for g in conj for s in g.samples]
    guide = _gen("guide").generate([guide_messages(t, t) for t in targets], 1, seed=3,
                                   max_tokens=8192, temperature=1.0)
    reviews = [parse_review(s.text, TAGS) for g in guide for s in g.samples]
    for results in (proofs, statements):
        assert all(x.ok or x.reason for x in results)
        assert any(x.ok for x in results) and any(not x.ok for x in results)
    assert any(rv.ok for rv in reviews) and any(not rv.ok and rv.reason for rv in reviews)
    ok_share = sum(x.ok for x in statements) / len(statements)
    assert 0.7 < ok_share < 0.95  # simulated_malformed_conjecturer = 0.15


def test_tokens_follow_the_role_and_are_capped_by_the_budget() -> None:
    msgs = _solver_requests()[:40]
    outs = _gen("solver").generate(msgs, 4, seed=5, max_tokens=8192, temperature=1.0)
    lens = [len(s.token_ids) for g in outs for s in g.samples]
    assert 900 < sorted(lens)[len(lens) // 2] < 2500  # median ~1500
    assert all(len(s.logprobs) == len(s.token_ids) and all(lp <= 0 for lp in s.logprobs)
               for g in outs for s in g.samples)
    capped = _gen("solver").generate(msgs, 4, seed=5, max_tokens=300, temperature=1.0)
    flat = [s for g in capped for s in g.samples]
    assert all(len(s.token_ids) <= 300 for s in flat)
    assert all(not extract_proof(s.text).ok for s in flat if s.finish_reason == "length")
    assert any(s.finish_reason == "length" for s in flat)


def test_draw_marker_only_counts_after_the_other_rules() -> None:
    theorem = THEOREMS[0]
    ok = "\n  -- SGSBATCH-SIMULATED-DRAW: verified\n  norm_num"
    assert simulated_verify(HEADER, theorem, ok).verdict == "verified"
    assert simulated_verify(HEADER, theorem, ok.replace("verified", "failed")).verdict == "failed"
    assert simulated_verify(HEADER, theorem, ok + "\n  sorry").verdict == "failed"


def test_engine_interface_add_step_abort() -> None:
    gen = _gen("guide")
    gen.add(Request("a", guide_messages("x", "y"), 2, 1, 1000, 1.0))
    gen.add(Request("b", guide_messages("x", "z"), 2, 2, 1000, 1.0))
    assert gen.in_flight() == 2
    gen.abort()
    assert gen.in_flight() == 0 and gen.step() == []
    gen.add(Request("c", guide_messages("x", "y"), 3, 1, 1000, 1.0))
    done = gen.step()
    assert [r.key for r, _ in done] == ["c"] and len(done[0][1].samples) == 3
    assert gen.stats.sequences == 7 and gen.stats.generated_tokens > 0


def test_simulated_trainer_publishes_a_checkpoint_with_real_counts(tmp_path: Path) -> None:
    examples = [Example([1, 2, 3], [4] * (10 + i), 1.0) for i in range(20)]
    settings = TrainSettings(lr=1e-6, betas=(0.9, 0.95), weight_decay=0.0, grad_clip=1.0, batch_size=8,
                             micro_batch_size=1, zero_stage=2, bf16=True, gradient_checkpointing=True, seed=3)
    out = tmp_path / "r0000" / "solver"
    seen: list[TrainStep] = []
    warm = dataclasses.replace(settings, warmup_steps=4, steps_before=1)
    res = simulated_train("some/model", out, examples, warm, param_count=1000, on_step=seen.append)
    assert res.steps == 3 and res.sequences == 20 and res.tokens == sum(10 + i for i in range(20))
    # every planned step is reported as the real trainer reports it: its sequences, tokens and LR (warm-up)
    assert [(x.step, x.steps, x.sequences) for x in seen] == [(1, 3, 8), (2, 3, 8), (3, 3, 4)]
    assert sum(x.tokens for x in seen) == res.tokens and [x.lr for x in seen] == [5e-7, 7.5e-7, 1e-6]
    assert all(x.simulated for x in seen)  # named so: TensorBoard's train_step run gets a SIMULATED label
    assert is_complete(out) and stored_result(out) == res
    marker = read_marker(out)
    assert marker["simulated"] is True and marker["simulated_bytes"] == 2000
    assert json.loads((out / "SIMULATED_WEIGHTS.json").read_text())["SIMULATED"]


def test_cumulative_solve_rate_follows_the_scaling_curve() -> None:
    """Problems solved at least once by round r vs the paper's curve at that round (R_r): within
    4 binomial sd plus 0.05 for the smoothing around the reach threshold (fixed seeds)."""
    solved: set[int] = set()
    msgs = _solver_requests()
    for r in (0, 1, 2, 5, 10):
        gen = _gen("solver", r, simulated_malformed_solver=0.0)
        for i, out in enumerate(gen.generate(msgs, 8, seed=100 + r, max_tokens=8192, temperature=1.0)):
            for s in out.samples:
                ex = extract_proof(s.text)
                if ex.ok and simulated_verify(HEADER, THEOREMS[i], ex.value or "").verdict == "verified":
                    solved.add(i)
        target = curve(gen.s)
        sd = math.sqrt(target * (1 - target) / len(THEOREMS))
        assert abs(len(solved) / len(THEOREMS) - target) <= 4 * sd + 0.05, (r, len(solved), target)
