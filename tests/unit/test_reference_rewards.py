"""Rewards, selection, extraction and de-duplication worked out from the reference's code.

Every case quotes the line of github.com/LukeBailey181/sgs it was worked out from (paths relative to
that repository). The reference runs with `penalize_try = True`, `dapo_length_penalty = True` and
the other prover penalties off (scripts/standard_sgs.py:35-39, the same in every script). Where
sgsbatch keeps a deliberate difference (the spec's fixes: `try` as a token, not a substring), the
case says so and gives what the reference would compute. Lengths are in tokens, `max_tokens = 100`
(the penalty starts above 80: `start_negative_reward = model_config.max_tokens * gamma`, gamma 0.8).
"""

from __future__ import annotations

import pytest

from sgsbatch.logic.extraction import count_declarations, extract_proof
from sgsbatch.logic.review import Review, fill_failed
from sgsbatch.logic.rewards import (
    conjecturer_rewards,
    group_rewards,
    keep_group,
    length_penalty,
    solver_weight,
    uses_try,
)
from sgsbatch.logic.selection import conjecturer_band, solver_band
from sgsbatch.round.results import dedup_key

# ----------------------------------------------------------------------------- the length penalty

LENGTH_CASES = [
    # step2_train.py:63 "if total_length <= start_negative_reward: return 0.0" (None here: no penalty)
    (80, None),
    (50, None),
    # step2_train.py:70-71 "amount_too_long = total_length - start_negative_reward;
    # reward = -1 * amount_too_long / negative_reward_interval": (90 - 80) / 20
    (90, -0.5),
    (100, -1.0),
    # step2_train.py:73 "return max(-1.0, reward)"
    (250, -1.0),
]


@pytest.mark.parametrize(("length", "expected"), LENGTH_CASES)
def test_length_penalty(length: int, expected: float | None) -> None:
    got = length_penalty(length, max_tokens=100)
    assert got == (None if expected is None else pytest.approx(expected))


# ----------------------------------------------------------------------------- REINFORCE-1/2 and EI

# (name, proof, verified, length, weight; None = no example)
REINFORCE_CASES = [
    # step2_train.py:513-514 "if proof.is_correct: weight = 1.0"
    ("verified", "\n  nlinarith [sq_nonneg x]", True, 10, 1.0),
    # step2_train.py:508-511 "if not using_groups: if not proof.is_correct: continue"
    ("failed", "\n  nlinarith", False, 10, None),
    ("failed_over_long", "\n  nlinarith", False, 95, None),
    # step2_train.py:547-554 "if "try" in proof_str: ... weight = 0.0; if not using_groups: continue"
    ("try", "\n  try linarith\n  simp", True, 10, None),
    # the `continue` comes before the length penalty (step2_train.py:556), so an over-long `try` proof is
    # dropped, not penalised
    ("try_over_long", "\n  <;> try nlinarith", True, 95, None),
    # step2_train.py:556-564 "if len_reward < 0.0: weight = len_reward"
    ("over_long", "\n  nlinarith", True, 90, -0.5),
    ("far_too_long", "\n  nlinarith", True, 400, -1.0),
    # step2_train.py:529-530 strip "/- -/" and "--" comments before the try check
    ("try_in_comment", "\n  -- try simp first\n  simp", True, 10, 1.0),
    # spec fix (kept): `try` is a token. The reference's substring test ("try" in proof_str) drops these.
    ("symmetry_is_not_try", "\n  exact symmetry h", True, 10, 1.0),
    ("geometry_lemma_is_not_try", "\n  exact geometry_bound x", True, 10, 1.0),
]


@pytest.mark.parametrize(("name", "proof", "verified", "length", "expected"), REINFORCE_CASES,
                         ids=[c[0] for c in REINFORCE_CASES])
def test_reinforce_and_ei_weight(name: str, proof: str, verified: bool, length: int, expected: float | None) -> None:
    """REINFORCE-1/2 and Expert Iteration: the reference's EI (scripts/ei_solver_only.py:110,
    StatementSelectionMode.LESS_16_PROOFS, WeightedTrainer) goes through the same per-proof loop of
    prepare_prover_train_data (step2_train.py:503-594), so it is weighted the same way."""
    got = solver_weight(proof, verified, True, length, max_tokens=100)
    assert got == (None if expected is None else pytest.approx(expected)), name


# (name, proof, uses `try` with the reference's comment stripping (the default), with Lean's comments)
TRY_COMMENT_CASES = [
    # step2_train.py:529 "proof_str = re.sub(r"/-[\s\S]*?-/", "", proof_str)" is non-greedy: a nested block
    # comment ends at its first `-/`, and the rest, ` try simp -/`, is read as code
    ("nested_block_comment", "\n  /- first /- a note -/ try simp -/\n  linarith", True, False),
    # ... and it runs before step2_train.py:530 "proof_str = re.sub(r"--.*", "", proof_str)": a `/-` inside a
    # `--` comment hides the code after it up to the next `-/`, a real `try` included
    ("block_opener_in_line_comment", "\n  -- the /- notation\n  try simp\n  /- done -/ linarith", False, True),
    # both agree on plain comments and on code
    ("line_comment", "\n  -- try simp\n  linarith", False, False),
    ("block_comment", "\n  /- try simp -/ linarith", False, False),
    ("code", "\n  try simp\n  linarith", True, True),
]


@pytest.mark.parametrize(("name", "proof", "reference", "lean"), TRY_COMMENT_CASES, ids=[c[0] for c in TRY_COMMENT_CASES])
def test_try_rule_comments(name: str, proof: str, reference: bool, lean: bool) -> None:
    """`solver.try_comments`: "reference" (the default) strips comments as the reference, "lean" as Lean reads them;
    a proof using `try` is dropped by REINFORCE-1/2 and EI and gets 0 under CISPO (step2_train.py:547-554)."""
    assert uses_try(proof) is reference, name  # the default
    for rule, hit in (("reference", reference), ("lean", lean)):
        assert uses_try(proof, rule) is hit, (name, rule)  # type: ignore[arg-type]
        weight = solver_weight(proof, True, True, 10, max_tokens=100, try_comments=rule)  # type: ignore[arg-type]
        assert weight == (None if hit else 1.0), (name, rule)
        assert group_rewards([True], [10], [proof], max_tokens=100, try_comments=rule) == [0.0 if hit else 1.0]  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reference, lean"):
        uses_try(proof, "nested")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- CISPO

# (name, verified, length, proof, reward)
CISPO_CASES = [
    # step2_train.py:513-516 "if proof.is_correct: weight = 1.0 else: weight = 0.0"
    ("verified", True, 10, "simp", 1.0),
    ("failed", False, 10, "simp", 0.0),
    # step2_train.py:556-564: the length penalty replaces the weight of any rollout, failed ones included
    # (with groups, nothing `continue`s before it)
    ("failed_over_long", False, 90, "simp", -0.5),
    ("verified_over_long", True, 95, "simp", -0.75),
    # step2_train.py:547-551 "weight = 0.0" (no `continue` with groups)
    ("verified_try", True, 10, "try simp", 0.0),
    # ... and the length penalty, looked at after the try rule, still replaces it
    ("verified_try_over_long", True, 90, "try simp", -0.5),
    ("failed_try_over_long", False, 100, "try simp", -1.0),
    # spec fix (kept): the reference's substring test would give 0 here
    ("verified_symmetry", True, 10, "exact symmetry h", 1.0),
]


@pytest.mark.parametrize(("name", "verified", "length", "proof", "expected"), CISPO_CASES,
                         ids=[c[0] for c in CISPO_CASES])
def test_cispo_reward(name: str, verified: bool, length: int, proof: str, expected: float) -> None:
    assert group_rewards([verified], [length], [proof], max_tokens=100) == [pytest.approx(expected)], name


KEEP_GROUP_CASES = [
    # step2_train.py:600-602 "if all(x["reward"] == 0.0 for x in group_train_data): continue"
    ("all_failed_short", [False] * 4, [10] * 4, False),
    # a failed over-long rollout's penalty makes the rewards not all 0: the group is kept
    ("all_failed_one_over_long", [False] * 4, [10, 10, 10, 90], True),
    ("one_verified", [True, False, False, False], [10] * 4, True),
]


@pytest.mark.parametrize(("name", "verified", "lengths", "kept"), KEEP_GROUP_CASES,
                         ids=[c[0] for c in KEEP_GROUP_CASES])
def test_cispo_keeps_group(name: str, verified: list[bool], lengths: list[int], kept: bool) -> None:
    assert keep_group(group_rewards(verified, lengths, ["simp"] * len(verified), max_tokens=100)) is kept, name


# ----------------------------------------------------------------------------- Conjecturer

# (name, rates, guide scores, lengths, rewards); all conjectures in band
CONJECTURER_CASES = [
    # step2_train.py:205-207 "rewards = [review_reward * (1 - solve_rate) ...]",
    # step2_train.py:218-225 min-max over `rewards`: raw a 7, b 2, c 0 -> 1, 2/7, 0
    ("normalised", {"a": 1 / 8, "b": 4 / 8, "c": 6 / 8}, {"a": 8.0, "b": 4.0, "c": 0.0}, {},
     {"a": 1.0, "b": 2 / 7, "c": 0.0}),
    # step2_train.py:220-221 "if max_reward == min_reward: normalized_rewards = [1.0 for _ in rewards]"
    ("all_equal", {"a": 0.5, "b": 0.5}, {"a": 3.0, "b": 3.0}, {}, {"a": 1.0, "b": 1.0}),
    # the pool is every in-band conjecture, over-long ones included (the length penalty comes after the
    # normalisation, step2_train.py:304-310 "if len_reward < 0.0: weight = len_reward"): raw a 3.5,
    # b 2, c 7 -> a (3.5 - 2) / (7 - 2) = 0.3, b 0, c replaced by -0.5
    ("pool_includes_over_long", {"a": 1 / 8, "b": 4 / 8, "c": 1 / 8}, {"a": 4.0, "b": 4.0, "c": 8.0},
     {"a": 10, "b": 10, "c": 90}, {"a": 0.3, "b": 0.0, "c": -0.5}),
    # zero-weight conjectures stay (every one is appended to train_data, step2_train.py:277-323)
    ("zero_kept", {"a": 1 / 8, "b": 6 / 8}, {"a": 8.0, "b": 0.0}, {}, {"a": 1.0, "b": 0.0}),
]


@pytest.mark.parametrize(("name", "rates", "guide", "lengths", "expected"), CONJECTURER_CASES,
                         ids=[c[0] for c in CONJECTURER_CASES])
def test_conjecturer_reward(name: str, rates: dict[str, float], guide: dict[str, float], lengths: dict[str, int],
                            expected: dict[str, float]) -> None:
    got = conjecturer_rewards(sorted(rates), rates, guide, lengths, max_tokens=100)
    assert got == pytest.approx(expected), name


def test_all_reviews_failed_fill_is_zero_and_rewards_are_all_one() -> None:
    # llm_judge_guide.py:105-106 "if len(non_failed_reviews) == 0: average_review = 0.0"
    bad = Review(None, None, None, False, "missing_relevance")
    filled = fill_failed([bad, bad, bad])
    assert [f.score for f in filled] == [0.0, 0.0, 0.0]
    rates = {"a": 1 / 8, "b": 3 / 8, "c": 5 / 8}
    guide = {k: f.score for k, f in zip(sorted(rates), filled, strict=True)}
    # every reward 0 * (1 - s) = 0: all equal, so all 1 (step2_train.py:220-221)
    assert conjecturer_rewards(sorted(rates), rates, guide) == {"a": 1.0, "b": 1.0, "c": 1.0}


# ----------------------------------------------------------------------------- selection

SOLVER_BAND_CASES = [
    # step1_data_gen.py:1042 "if statement_solve_rate <= 0.5 and statement_solve_rate > 0.0" (HARD)
    ("hard", 0.5, True, {"s0": 0.0, "s1": 0.125, "s4": 0.5, "s5": 0.625, "s8": 1.0}, {"s1", "s4"}),
    # step1_data_gen.py:1048 "if statement_solve_rate > 0.0 and statement_solve_rate < 1.0" (ALL_NONE_0_1, CISPO)
    ("cispo", 1.0, False, {"s0": 0.0, "s1": 0.125, "s4": 0.5, "s7": 0.875, "s8": 1.0}, {"s1", "s4", "s7"}),
]


@pytest.mark.parametrize(("name", "high", "include_high", "rates", "expected"), SOLVER_BAND_CASES,
                         ids=[c[0] for c in SOLVER_BAND_CASES])
def test_solver_band(name: str, high: float, include_high: bool, rates: dict[str, float], expected: set[str]) -> None:
    assert solver_band(rates, 0.0, high, include_high) == expected, name


CONJECTURER_BAND_CASES = [
    # step1_data_gen.py:1069 "if solve_rate > 0 and solve_rate < 1", :1076
    # "solve_rates[int(len(solve_rates) * 0.7)]", :1101 "if solve_rate > 0 and solve_rate <= ...":
    # (0, 1) rates .125 .25 .25 .5 .75 -> index int(3.5) = 3 -> t = .5
    ("percentile", {"a": 0.0, "b": 0.125, "c": 0.25, "d": 0.25, "e": 0.5, "f": 0.75, "g": 1.0}, {"b", "c", "d", "e"}),
    # step1_data_gen.py:1080 "solve_rate_70th_percentile = 0.0" when none is in (0, 1): none selected
    ("none_in_0_1", {"a": 0.0, "b": 1.0}, set()),
]


@pytest.mark.parametrize(("name", "rates", "expected"), CONJECTURER_BAND_CASES,
                         ids=[c[0] for c in CONJECTURER_BAND_CASES])
def test_conjecturer_band(name: str, rates: dict[str, float], expected: set[str]) -> None:
    assert conjecturer_band(rates, 0.7) == expected, name


# ----------------------------------------------------------------------------- extraction

STATEMENT = "theorem t (a : ℕ) : a + 0 = a := by"
EXTRACTION_CASES = [
    # prompts.py:151-156 "num_theorem = generation.strip().count("theorem ") ... if num_theorem + num_lemma +
    # num_def != 1: return NO_CODE_FOUND_TAG": a keyword in a comment counts ...
    ("keyword_in_comment", f"```lean4\n{STATEMENT}\n  -- by the theorem above\n  simp\n```", False, True),
    ("lemma_in_block_comment", f"```lean4\n{STATEMENT}\n  /- a lemma would help -/\n  simp\n```", False, True),
    # ... and so does one ending a longer name, when a space follows
    ("longer_name", f"```lean4\n{STATEMENT}\n  exact my_lemma a\n  -- or: undef x\n```", False, True),
    # only with a space after it: `theorem\n` is not counted by the reference (no declaration), but is a
    # Lean word followed by whitespace for "code_only"
    ("keyword_then_newline", "```lean4\ntheorem\n  t (a : ℕ) : a + 0 = a := by\n  simp\n```", False, True),
    # both rules agree on a clean reply
    ("clean", f"```lean4\n{STATEMENT}\n  simp\n```", True, True),
]


@pytest.mark.parametrize(("name", "reply", "ok_reference", "ok_code_only"), EXTRACTION_CASES,
                         ids=[c[0] for c in EXTRACTION_CASES])
def test_solver_extraction_declaration_rules(name: str, reply: str, ok_reference: bool, ok_code_only: bool) -> None:
    assert extract_proof(reply).ok is ok_reference, name  # the default is the reference's rule
    assert extract_proof(reply, "reference").ok is ok_reference, name
    assert extract_proof(reply, "code_only").ok is ok_code_only, name


def test_count_declarations_rules() -> None:
    text = "theorem t : True := by\n  -- a lemma \n  exact my_theorem x"
    assert count_declarations(text, "reference") == 3
    assert count_declarations(text, "code_only") == 1
    with pytest.raises(ValueError):
        count_declarations(text, "bogus")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- conjecture de-duplication

DEDUP_CASES = [
    # step1_data_gen.py:449 "if conjecture.conjecture not in conjecture_str_set": exact string equality
    ("same", "theorem c : 1 = 1 := by", "theorem c : 1 = 1 := by", True, True),
    ("extra_space", "theorem c : 1 = 1 := by", "theorem c :  1 = 1 := by", False, True),
    ("newline_vs_space", "theorem c : 1 = 1 := by", "theorem c :\n  1 = 1 := by", False, True),
    ("different", "theorem c : 1 = 1 := by", "theorem c : 2 = 2 := by", False, False),
]


@pytest.mark.parametrize(("name", "a", "b", "dup_exact", "dup_whitespace"), DEDUP_CASES,
                         ids=[c[0] for c in DEDUP_CASES])
def test_dedup_rules(name: str, a: str, b: str, dup_exact: bool, dup_whitespace: bool) -> None:
    assert (dedup_key(a) == dedup_key(b)) is dup_exact, name  # the default is exact, as the reference
    assert (dedup_key(a, "exact") == dedup_key(b, "exact")) is dup_exact, name
    assert (dedup_key(a, "whitespace") == dedup_key(b, "whitespace")) is dup_whitespace, name
