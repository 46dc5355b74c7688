"""Conjecture extraction and conjecture preambles worked out from the reference's code.

Every case quotes the line of github.com/LukeBailey181/sgs it was worked out from (paths relative to
that repository). The reference extracts with `extract_conjecture_deepseek_v2` (sgs/utils/prompts.py:
184-221) and drops a conjecture whose text holds its failure tag (step1_data_gen.py:440 "if
NO_CONJECTURE_FOUND_TAG not in conjecture_strs[i]"). A Solver sample of a conjecture is checked as
one file, `conjecture.header + conjecture.conjecture + proof.proof_str` (step1_data_gen.py:818), sent
to the REPL whole (verifier.py `verify_lean4_file_kimina`: `command = dict(cmd=code, ...)`): Lean
alone decides what a preamble may hold. No Lean runs here: whether Lean accepts a preamble is
stated per case, with the reason.
"""

from __future__ import annotations

import dataclasses

import pytest

from sgsbatch.backends.generation import Generation, Sample
from sgsbatch.config.schema import Config
from sgsbatch.logic.extraction import extract_conjecture, extract_proof, solver_file
from sgsbatch.phases.conjecture import extractor
from sgsbatch.phases.sampling import extracted_samples
from sgsbatch.verification.checks import check_statement, statement_name
from sgsbatch.verification.lean import static_verdict
from sgsbatch.verification.verdict import ProofJob

CONJ = "theorem c1 (x : ℝ) (hx : 0 < x) : 0 < x ^ 3 := by"


def outcome(reply: str, rule: str) -> str:
    """The statement, or `<reason>` when the reply is malformed."""
    got = extract_conjecture(reply, rule)  # type: ignore[arg-type]
    return got.value if got.value is not None else f"<{got.reason}>"


# ----------------------------------------------------------------------------- where the rules differ

# (name, reply, the reference's outcome (the default), "code_only"'s outcome)
RULE_CASES = [
    # prompts.py:204 "if proposed_problem.count("sorry") not in [0, 1]": a substring count, so the name
    # `t_sorry_free` and the proof's `sorry` are two
    ("sorry_in_a_name", "```lean4\ntheorem t_sorry_free (n : ℕ) : n + 0 = n := by\n  sorry\n```",
     "<several_sorry>", "theorem t_sorry_free (n : ℕ) : n + 0 = n := by"),
    # ... and a `sorry` in a comment counts too
    ("sorry_in_a_comment", f"```lean4\n{CONJ}\n  -- no proof yet, so sorry\n  sorry\n```", "<several_sorry>", CONJ),
    # prompts.py:207-212 "proposed_problem = proposed_problem.strip(); if (not proposed_problem.endswith("sorry"))
    # and (not proposed_problem.endswith(":= by"))": the ending is checked with comments, here "Solver"
    ("comment_after_sorry", f"```lean4\n{CONJ}\n  sorry -- left to the Solver\n```", "<bad_ending>", CONJ),
    # prompts.py:193 "final_code_idx = proposed_problem.rfind("```")": the last fence of the reply, here the
    # plain block's, so the text ends in "lake build"
    ("plain_block_after", f"```lean4\n{CONJ}\n  sorry\n```\nCheck it with:\n```\nlake build\n```",
     "<bad_ending>", CONJ),
    # prompts.py:186 "split_idx = generation.rfind("```lean4")": the last ```lean4 anywhere, here one in the
    # prose after the block, with no fence after it
    ("fence_named_in_prose_after", f"```lean4\n{CONJ}\n  sorry\n```\nI wrapped it in ```lean4 as asked.",
     "<unclosed_fence>", CONJ),
    # prompts.py:186-195: the text after the last "```lean4" up to the last "```", fence line included
    ("one_line_block", "Here: ```lean4 theorem c : 1 = 1 := by sorry```", "theorem c : 1 = 1 := by",
     "<no_fence>"),
    # step1_data_gen.py:440 "if NO_CONJECTURE_FOUND_TAG not in conjecture_strs[i]": the tag (prompts.py:102
    # "NO_CONJECTURE_FOUND_TAG = "NO CONJECTURE FOUND"") anywhere in the statement, a comment included
    ("failure_tag_in_a_comment", f"```lean4\n-- NO CONJECTURE FOUND in the target, so a lemma:\n{CONJ}\n  sorry\n```",
     "<failure_tag>", f"-- NO CONJECTURE FOUND in the target, so a lemma:\n{CONJ}"),
    # both: inline code in the prose before the block (the reference takes the last ```lean4: the block)
    ("inline_code_before", f"Lean blocks start with ```lean4 theorem``` here.\n```lean4\n{CONJ}\n  sorry\n```",
     CONJ, CONJ),
    # both: prompts.py:219 "theorem = proposed_problem[: by_idx + len(":= by")].strip()"
    ("statement_on_two_lines", "```lean4\ntheorem c2 (a b : ℕ) :\n    a + b = b + a := by\n  sorry\n```",
     "theorem c2 (a b : ℕ) :\n    a + b = b + a := by", "theorem c2 (a b : ℕ) :\n    a + b = b + a := by"),
]


@pytest.mark.parametrize(("name", "reply", "reference", "code_only"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_conjecture_rules(name: str, reply: str, reference: str, code_only: str) -> None:
    assert outcome(reply, "reference") == reference, name
    assert outcome(reply, "code_only") == code_only, name
    assert extract_conjecture(reply) == extract_conjecture(reply, "reference"), name  # the default


def test_unknown_rules_are_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="reference, code_only"):
        extract_conjecture(CONJ, "words")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="drop, keep"):
        extract_conjecture(CONJ, "reference", "strip")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- preambles

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
DOC = "/-- AM-GM for two positive reals. -/\n"
AMGM = "theorem amgm_two (a b : ℝ) (ha : 0 < a) (hb : 0 < b) :\n    2 * Real.sqrt (a * b) ≤ a + b := by"
WHOLE = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
SCOPED = "set_option maxHeartbeats 400000 in\n\nopen BigOperators Real Nat Topology Rat in\n\n"
IMPORT_AFTER_HEADER = "an `import` after the header's commands: \"invalid 'import' command\""


def reply_with(block: str) -> str:
    """A DeepSeek-Prover-V2-style reply: reasoning, then the file in a lean4 block, `sorry` as its proof."""
    return f"The target needs AM-GM for two terms; a lemma:\n\n```lean4\n{block}\n  sorry\n```"


# (name, the reply's block, the reference's conjecture (prompts.py:219), Lean accepts the reference's file
# (why not), sgsbatch's statement with "drop" (the default), the check's reason for it (None: goes to Lean),
# the dropped lines, the statement with "keep", the check's reason for it)
PREAMBLE_CASES = [
    # DeepSeek-Prover-V2's habit: the whole file
    ("whole_file", WHOLE + DOC + AMGM, WHOLE + DOC + AMGM, IMPORT_AFTER_HEADER,
     SCOPED + DOC + AMGM, None, ("import Mathlib", "import Aesop"),
     "import Mathlib\nimport Aesop\n\n" + SCOPED + DOC + AMGM, "bad_statement"),
    ("imports_only", "import Mathlib\n\n" + AMGM, "import Mathlib\n\n" + AMGM, IMPORT_AFTER_HEADER,
     AMGM, None, ("import Mathlib",), "import Mathlib\n\n" + AMGM, "bad_statement"),
    # `open` and `set_option` without `in` are commands Lean accepts in the reference's file; scoped, they
    # are the same Lean for the one theorem
    ("plain_open_and_option", "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n" + AMGM,
     "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n" + AMGM, None,
     "set_option maxHeartbeats 400000 in\nopen BigOperators Real Nat Topology Rat in\n\n" + AMGM, None, (),
     "set_option maxHeartbeats 400000 in\nopen BigOperators Real Nat Topology Rat in\n\n" + AMGM, None),
    ("already_scoped", "set_option maxHeartbeats 400000 in\nopen Real in\n" + AMGM,
     "set_option maxHeartbeats 400000 in\nopen Real in\n" + AMGM, None,
     "set_option maxHeartbeats 400000 in\nopen Real in\n" + AMGM, None, (),
     "set_option maxHeartbeats 400000 in\nopen Real in\n" + AMGM, None),
    ("open_on_the_theorem_line", "open Real in " + AMGM, "open Real in " + AMGM, None,
     "open Real in " + AMGM, None, (), "open Real in " + AMGM, None),
    ("comments_kept", "import Mathlib -- all of it\n-- for sqrt:\nopen Real -- sqrt\n" + AMGM,
     "import Mathlib -- all of it\n-- for sqrt:\nopen Real -- sqrt\n" + AMGM, IMPORT_AFTER_HEADER,
     "-- for sqrt:\nopen Real in -- sqrt\n" + AMGM, None, ("import Mathlib -- all of it",),
     "import Mathlib -- all of it\n-- for sqrt:\nopen Real in -- sqrt\n" + AMGM, "bad_statement"),
    # always on, both rules: the verifier refuses options off its allow-list and other commands (the
    # reference runs whatever the model wrote)
    ("option_off_the_allow_list", "set_option debug.skipKernelTC true in\n" + AMGM,
     "set_option debug.skipKernelTC true in\n" + AMGM, None,
     "set_option debug.skipKernelTC true in\n" + AMGM, "set_option", (), "set_option debug.skipKernelTC true in\n" + AMGM,
     "set_option"),
    ("namespace", "namespace Amgm\n\n" + AMGM, "namespace Amgm\n\n" + AMGM, None,
     "namespace Amgm\n\n" + AMGM, "bad_statement", (), "namespace Amgm\n\n" + AMGM, "bad_statement"),
]


def check_reason(statement: str) -> str | None:
    rejection = check_statement(statement)
    return None if rejection is None else rejection.reason


@pytest.mark.parametrize(
    ("name", "block", "reference", "lean_refuses", "drop", "drop_check", "dropped", "keep", "keep_check"),
    PREAMBLE_CASES, ids=[c[0] for c in PREAMBLE_CASES])
def test_preamble(name: str, block: str, reference: str, lean_refuses: str | None, drop: str, drop_check: str | None,
                  dropped: tuple[str, ...], keep: str, keep_check: str | None) -> None:
    reply = reply_with(block)
    for rule in ("reference", "code_only"):  # the preamble is tidied after either rule found the statement
        got = extract_conjecture(reply, rule)  # type: ignore[arg-type]
        assert (got.value, got.dropped) == (drop, dropped), (name, rule)
        assert extract_conjecture(reply, rule, "drop") == got, (name, rule)  # "drop" is the default
        kept = extract_conjecture(reply, rule, "keep")  # type: ignore[arg-type]
        assert (kept.value, kept.dropped) == (keep, ()), (name, rule)
    assert check_reason(drop) == drop_check, name
    assert check_reason(keep) == keep_check, name
    # the theorem itself is the reference's text, untouched
    assert drop.endswith(AMGM) and keep.endswith(AMGM) and reference.endswith(AMGM), name


@pytest.mark.parametrize(
    ("name", "block", "reference", "lean_refuses", "drop", "drop_check", "dropped", "keep", "keep_check"),
    PREAMBLE_CASES, ids=[c[0] for c in PREAMBLE_CASES])
def test_dropping_imports_never_loses_a_conjecture(
        name: str, block: str, reference: str, lean_refuses: str | None, drop: str, drop_check: str | None,
        dropped: tuple[str, ...], keep: str, keep_check: str | None) -> None:
    """"drop" is the default because it never turns a conjecture the reference could verify into one
    sgsbatch cannot: where Lean accepts the reference's file, "drop" and "keep" give the same verdict;
    where Lean refuses it (an import after the header), "drop" is the one that can verify."""
    if lean_refuses is None:
        assert drop_check == keep_check, name
    else:
        assert keep_check is not None and drop_check is None, name
    if keep_check is None:
        assert drop_check is None, name
    if drop_check is None:
        assert statement_name(drop) == "amgm_two", name


def test_a_salvaged_conjecture_reaches_lean_with_the_solvers_whole_file_reply() -> None:
    """The Solver (prompted with header + conjecture) answers with a whole file again; its proof is the
    text after the first `:= by`, and the checked file is header + conjecture + proof, imports only at the top."""
    statement = extract_conjecture(reply_with(WHOLE + DOC + AMGM)).value
    assert statement == SCOPED + DOC + AMGM
    proof_text = "\n  nlinarith [Real.sq_sqrt (mul_pos ha hb).le, sq_nonneg (Real.sqrt (a * b) - (a + b) / 2)]"
    solver_reply = f"```lean4\n{WHOLE}{DOC}{AMGM}{proof_text}\n```"
    proof = extract_proof(solver_reply)  # the reference's rule: one `theorem ` in the reply
    assert proof.value == proof_text
    assert static_verdict(ProofJob("c", HEADER, statement, proof.value)) is None
    file = solver_file(HEADER, statement, proof.value)
    assert file.startswith(HEADER) and "import" not in file[len(HEADER) :]


def test_the_conjecture_phase_extracts_by_the_config_and_records_dropped_lines() -> None:
    replies = [reply_with(WHOLE + DOC + AMGM), f"```lean4\n{CONJ}\n  sorry -- left to the Solver\n```"]
    out = Generation([1], [Sample(text, [5, 6], [-0.1, -0.2], "stop") for text in replies])
    default = Config().extraction
    whole, commented = extracted_samples(out, extractor(default), "statement")
    assert (whole["ok"], whole["statement"], whole["dropped"]) == (True, SCOPED + DOC + AMGM,
                                                                    ["import Mathlib", "import Aesop"])
    assert (commented["ok"], commented["reason"], "dropped" in commented) == (False, "bad_ending", False)
    ours = dataclasses.replace(default, conjecture="code_only", conjecture_imports="keep")
    whole, commented = extracted_samples(out, extractor(ours), "statement")
    assert (whole["statement"], "dropped" in whole) == ("import Mathlib\nimport Aesop\n\n" + SCOPED + DOC + AMGM, False)
    assert (commented["ok"], commented["statement"]) == (True, CONJ)
