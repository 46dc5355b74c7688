"""Rewards: length penalties at and past the limit, the `try` token, conjecturer normalisation, CISPO."""

from __future__ import annotations

import math

import pytest

from sgsbatch.logic.rewards import (
    advantages,
    conjecturer_rewards,
    group_advantages,
    group_rewards,
    keep_group,
    length_penalty,
    min_max_normalise,
    solver_weight,
    uses_try,
)


@pytest.mark.parametrize(
    "proof",
    [
        "\n  try norm_num",
        "\n  nlinarith [sq_nonneg x] <;> try simp",
        "\n  constructor\n  (try linarith)",
        "\n  first | try rfl | simp",
        "\n  try?",
        "\n  all_goals try positivity",
    ],
)
def test_try_tactic_hits(proof: str) -> None:
    assert uses_try(proof)


@pytest.mark.parametrize(
    "proof",
    [
        "\n  exact symmetry h",
        "\n  simp [geometry]",
        "\n  exact Finset.entry",
        "\n  exact retry_lemma x",
        "\n  exact h_try",
        "\n  exact try_this",
        "\n  exact Foo.try",
        "\n  -- try nlinarith here\n  linarith",
        "\n  /- try simp -/ linarith",
        "\n  exact h.try'",
    ],
)
def test_try_substrings_are_not_the_tactic(proof: str) -> None:
    assert not uses_try(proof)


def test_length_penalty_at_and_past_the_limit() -> None:
    # Lmax = 100, start = 0.8: no penalty up to 80 tokens; -(L - 80) / 20 beyond; floor -1
    assert length_penalty(80, max_tokens=100) is None
    assert length_penalty(81, max_tokens=100) == pytest.approx(-0.05)
    assert length_penalty(90, max_tokens=100) == pytest.approx(-0.5)
    assert length_penalty(100, max_tokens=100) == pytest.approx(-1.0)
    assert length_penalty(150, max_tokens=100) == -1.0
    # defaults: Lmax = 8192, 0.8 * 8192 = 6553.6
    assert length_penalty(6553) is None
    assert length_penalty(7372) == pytest.approx(-(7372 - 6553.6) / 1638.4)
    assert length_penalty(8192) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        length_penalty(10, max_tokens=0)
    with pytest.raises(ValueError):
        length_penalty(10, length_penalty_start=1.0)


def test_solver_weight() -> None:

    assert solver_weight("\n  linarith", verified=True, in_band=True, length=50, max_tokens=100) == 1.0
    assert solver_weight("\n  linarith", verified=False, in_band=True, length=50, max_tokens=100) is None
    assert solver_weight("\n  linarith", verified=True, in_band=False, length=50, max_tokens=100) is None
    # a `try` proof is dropped (the reference `continue`s), not trained on with weight 0
    assert solver_weight("\n  try linarith", verified=True, in_band=True, length=50, max_tokens=100) is None
    assert solver_weight("\n  try linarith", True, True, 50, max_tokens=100, zero_try=False) == 1.0
    assert solver_weight("\n  exact symmetry h", True, True, 50, max_tokens=100) == 1.0
    # the try rule comes before the length penalty (step2_train.py:547-565): dropped, not penalised
    assert solver_weight("\n  try linarith", True, True, 90, max_tokens=100) is None
    assert solver_weight("\n  try linarith", True, True, 90, max_tokens=100, zero_try=False) == pytest.approx(-0.5)
    assert solver_weight("\n  linarith", True, True, 200, max_tokens=100) == -1.0


def test_min_max_normalise() -> None:
    assert min_max_normalise({}) == {}
    assert min_max_normalise({"a": 3.0}) == {"a": 1.0}
    assert min_max_normalise({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    assert min_max_normalise({"a": 1.0, "b": 2.0, "c": 5.0}) == {"a": 0.0, "b": 0.25, "c": 1.0}


def test_conjecturer_rewards_with_guide() -> None:
    rates = {"a": 1 / 8, "b": 4 / 8, "c": 6 / 8}
    guide = {"a": 8.0, "b": 4.0, "c": 0.0}
    # raw: a = 8 * 7/8 = 7, b = 4 * 1/2 = 2, c = 0 -> normalised 1, 2/7, 0
    out = conjecturer_rewards(["a", "b", "c"], rates, guide)
    assert out == pytest.approx({"a": 1.0, "b": 2 / 7, "c": 0.0})


def test_conjecturer_rewards_all_equal_and_no_guide() -> None:
    rates = {"a": 0.5, "b": 0.5}
    assert conjecturer_rewards(["a", "b"], rates, {"a": 3.0, "b": 3.0}) == {"a": 1.0, "b": 1.0}
    # no guide: R = 1 - s: a = 7/8, b = 1/2 -> 1, 0
    rates2 = {"a": 1 / 8, "b": 4 / 8}
    assert conjecturer_rewards(["a", "b"], rates2, use_guide=False) == {"a": 1.0, "b": 0.0}
    assert conjecturer_rewards([], rates2, {}) == {}


def test_conjecturer_rewards_over_long_get_the_penalty() -> None:
    rates = {"a": 1 / 8, "b": 4 / 8, "c": 1 / 8}
    guide = {"a": 4.0, "b": 4.0, "c": 8.0}
    lengths = {"a": 10, "b": 10, "c": 90}
    out = conjecturer_rewards(["a", "b", "c"], rates, guide, lengths, max_tokens=100)
    # raw a 3.5, b 2, c 7: normalised over all three (c included, as the reference), then the
    # over-long c gets -0.5 instead
    assert out == pytest.approx({"a": 0.3, "b": 0.0, "c": -0.5})


def test_conjecturer_rewards_user_errors() -> None:
    with pytest.raises(ValueError):
        conjecturer_rewards(["a"], {"a": 0.5})  # guide scores required
    with pytest.raises(ValueError):
        conjecturer_rewards(["a"], {"a": 0.5}, {"b": 1.0})
    with pytest.raises(ValueError):
        conjecturer_rewards(["a"], {}, {"a": 1.0})


def test_group_rewards_and_advantages() -> None:
    assert group_rewards([True, False, True, False]) == [1.0, 0.0, 1.0, 0.0]
    # a failed over-long rollout gets the penalty too
    assert group_rewards([True, True, False], lengths=[10, 90, 95], max_tokens=100) == pytest.approx(
        [1.0, -0.5, -0.75]
    )
    assert group_rewards([True, True], proofs=["try simp", "simp"]) == [0.0, 1.0]
    adv = advantages([1.0, 0.0, 1.0, 0.0])
    # mean 0.5, population std 0.5
    assert adv == pytest.approx([0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6)] * 2)
    assert advantages([1.0, 1.0]) == [0.0, 0.0]
    assert math.isclose(sum(advantages([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])), 0.0, abs_tol=1e-9)
    assert not keep_group([0.0] * 8)
    assert keep_group([0.0] * 7 + [1.0])
    assert set(group_advantages({"a": [0.0, 0.0], "b": [1.0, 0.0]})) == {"b"}
    with pytest.raises(ValueError):
        advantages([])
    with pytest.raises(ValueError):
        group_rewards([True], lengths=[1, 2])
