"""Prompts: one user turn, the code in a lean4 block, the answer format stated."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sgsbatch.prompts import (
    CONCLUSION_COMPLEXITY_TAG,
    GUIDE_TAGS,
    REDUNDANT_PREMISES_TAG,
    RELEVANCE_TAG,
    conjecturer_messages,
    guide_messages,
    solver_messages,
)

HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
)
THEOREM = "theorem t1 (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by"


def _single_user_turn(messages: list[dict[str, str]]) -> str:
    assert len(messages) == 1
    assert set(messages[0]) == {"role", "content"}
    assert messages[0]["role"] == "user"
    return messages[0]["content"]


def test_solver_prompt_holds_header_and_statement_in_a_lean4_block() -> None:
    content = _single_user_turn(solver_messages(HEADER, THEOREM))
    assert f"```lean4\n{HEADER}{THEOREM}\n```" in content
    assert "exactly one ```lean4" in content
    assert "nothing else" in content


def test_conjecturer_prompt_conditioned_shows_target_and_asks_for_sorry() -> None:
    content = _single_user_turn(conjecturer_messages(HEADER, THEOREM))
    assert THEOREM in content
    assert "simpler" in content
    assert "renaming" in content
    assert "sorry" in content
    assert "final ```lean4" in content


def test_conjecturer_prompt_unconditioned_is_fixed_and_has_no_target() -> None:
    a = _single_user_turn(conjecturer_messages(HEADER, THEOREM, conditioned=False))
    b = _single_user_turn(conjecturer_messages("", "theorem other : True := by", conditioned=False))
    assert a == b
    assert THEOREM not in a
    assert "random area of mathematics" in a
    assert "sorry" in a and "final ```lean4" in a


def test_guide_prompt_has_target_conjecture_and_all_tags() -> None:
    conj = "theorem c (x : ℝ) : 0 ≤ x ^ 2 := by"
    content = _single_user_turn(guide_messages(THEOREM, conj))
    assert content.startswith("You are a math expert")
    assert THEOREM in content and conj in content
    assert GUIDE_TAGS == (RELEVANCE_TAG, REDUNDANT_PREMISES_TAG, CONCLUSION_COMPLEXITY_TAG)
    for tag in GUIDE_TAGS:
        assert f"<{tag}>" in content and f"</{tag}>" in content
    assert "0 to 5" in content and "0 or 1" in content and "0 to 4" in content


@pytest.mark.parametrize(
    "call",
    [
        lambda: solver_messages(HEADER, "  "),
        lambda: conjecturer_messages(HEADER, ""),
        lambda: guide_messages("", THEOREM),
        lambda: guide_messages(THEOREM, " \n"),
    ],
)
def test_empty_statements_are_user_errors(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        call()
