"""Prompts as data: the builders reproduce the reference's strings byte for byte; template choices."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from sgsbatch.logic.prompts import (
    GuideTags,
    PromptError,
    builtin_names,
    conjecturer_messages,
    guide_messages,
    load_prompts,
    read_guide_tags,
    read_template,
    reference_prompts,
    render,
    seeded_conjecturer_messages,
    solver_messages,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
REFERENCE_JSON = SHARED / "reference-prompts.json"
D3K = SHARED / "data" / "d3k" / "D_3k_prover_dataset.json"
needs_shared = pytest.mark.skipif(not (REFERENCE_JSON.is_file() and D3K.is_file()),
                                  reason=f"shared reference prompts or D_3k not found under {SHARED}")

HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat\n\n"
)
THEOREM = "theorem t1 (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by"
CONJ = "theorem c (x : ℝ) : 0 ≤ x ^ 2 := by"
PROOF = "\n  positivity"  # a stored proof: the text after the statement's `:= by`, leading newline kept


def reference_seeded_prompt(seed_theorem: str, seed_proof: str) -> str:
    """The reference's seeded Conjecturer prompt, copied from LukeBailey181/sgs sgs/utils/prompts.py:64-77
    (get_deepseek_prover_v2_conjecturer_prompt with ConjecturerSetup.SEED_STATEMENT): the shared
    reference-prompts.json does not hold this one, so its source is quoted here as it stands."""
    seed_post_theorem_prompt = (
        "Please generate a lean4 theorem that is more complex than the above statement and its proof. "
        "The generated theorem should build on the ideas in the seed statement but be harder to prove. "
        "It should NOT be identical to the seed statement. It should NOT be equivalent through renaming variables and premises.\n"  # noqa: E501
        "Output the final theorem as a syntactically correct lean4 theorem statement between ```lean4 and ``` tags. The final thing you output should be the theorem statement WITHOUT any proof, just put 'sorry' for the proof."  # noqa: E501
    )

    prompt = (
        f"Here is a Lean 4 problem statement and its proof:\n"
        f"```lean4\n"
        f"{(seed_theorem + seed_proof).strip()}\n"
        f"```\n"
        f"{seed_post_theorem_prompt}"
    )
    return prompt


def _ref() -> dict[str, object]:
    data: dict[str, object] = json.loads(REFERENCE_JSON.read_text(encoding="utf-8"))
    return data


def _rows(n: int = 5) -> list[dict[str, str]]:
    """A few D_3k rows: the first ones, and some spread over the file."""
    rows = list(json.loads(D3K.read_text(encoding="utf-8"))["target_statements"].values())
    picks = rows[:2] + rows[len(rows) // 2 : len(rows) // 2 + 1] + rows[-2:]
    return picks[:n]


def _fill(template: object, **values: str) -> str:
    """The reference string with its placeholders filled the plain way (str.replace)."""
    assert isinstance(template, str)
    for k, v in values.items():
        template = template.replace("{" + k + "}", v)
    return template


def _single_user_turn(messages: list[dict[str, str]]) -> str:
    assert len(messages) == 1
    assert set(messages[0]) == {"role", "content"}
    assert messages[0]["role"] == "user"
    return messages[0]["content"]


@needs_shared
def test_solver_prompt_is_the_reference_string_for_d3k_rows() -> None:
    ref = _ref()
    for row in _rows():
        got = _single_user_turn(solver_messages(row["header"], row["theorem"]))
        assert got == _fill(ref["solver"], header=row["header"], theorem=row["theorem"])
        assert got == f"Complete the following Lean 4 code:\n\n```lean4\n{row['header']}{row['theorem']}\n```"


@needs_shared
def test_conjecturer_prompts_are_the_reference_strings_for_d3k_rows() -> None:
    ref = _ref()
    for row in _rows():
        got = _single_user_turn(conjecturer_messages(row["header"], row["theorem"]))
        assert got == _fill(ref["conjecturer"], theorem=row["theorem"])
        assert row["header"].strip() not in got  # the Conjecturer sees the theorem without header
        assert "target statement.It should NOT" in got  # the reference's missing space is kept
        unconditioned = _single_user_turn(conjecturer_messages(row["header"], row["theorem"], conditioned=False))
        assert unconditioned == ref["conjecturer_unconditioned"]


@needs_shared
def test_guide_prompt_is_the_reference_string_for_d3k_rows() -> None:
    ref = _ref()
    rows = _rows()
    for target, conj in zip(rows, rows[1:] + rows[:1], strict=True):
        got = _single_user_turn(guide_messages(target["theorem"], conj["theorem"]))
        assert got == _fill(ref["guide"], theorem=target["theorem"], conjecture=conj["theorem"])
        assert got.endswith("===========================================\n")


@needs_shared
def test_seeded_conjecturer_prompt_is_the_reference_string_byte_for_byte() -> None:
    got = _single_user_turn(seeded_conjecturer_messages(HEADER, THEOREM, PROOF))
    assert got == reference_seeded_prompt(THEOREM, PROOF)
    assert got == (
        "Here is a Lean 4 problem statement and its proof:\n```lean4\n"
        "theorem t1 (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by\n  positivity\n```\n"
        "Please generate a lean4 theorem that is more complex than the above statement and its proof. The generated "
        "theorem should build on the ideas in the seed statement but be harder to prove. It should NOT be identical "
        "to the seed statement. It should NOT be equivalent through renaming variables and premises.\nOutput the "
        "final theorem as a syntactically correct lean4 theorem statement between ```lean4 and ``` tags. The final "
        "thing you output should be the theorem statement WITHOUT any proof, just put 'sorry' for the proof.")
    # (theorem + proof).strip(): surrounding whitespace goes, inner whitespace stays; the header is not shown
    padded = _single_user_turn(seeded_conjecturer_messages(HEADER, "\n" + THEOREM, PROOF + "  \n\n"))
    assert padded == got and HEADER not in got
    # the shipped template is the reference's string with one placeholder for (theorem + proof).strip()
    assert read_template("conjecturer_seeded", "reference") == reference_seeded_prompt("{statement_and_proof}", "")
    # no problem conditioning: the fixed prompt, whatever the seed
    assert seeded_conjecturer_messages(HEADER, THEOREM, PROOF, conditioned=False) == conjecturer_messages("", "x", False)


@needs_shared
def test_seeded_conjecturer_prompts_for_d3k_rows() -> None:
    for row in _rows():
        proof = "\n  nlinarith [sq_nonneg (a - b)]"
        got = _single_user_turn(seeded_conjecturer_messages(row["header"], row["theorem"], proof))
        assert got == reference_seeded_prompt(row["theorem"], proof)


def test_reference_tags_are_the_shared_ones() -> None:
    tags = reference_prompts().guide_tags
    assert {name: [b, e] for name, b, e in tags.pairs()} == _ref()["guide_tags"]


@needs_shared
def test_shipped_reference_set_is_the_shared_one() -> None:
    ref = _ref()
    for role in ("solver", "conjecturer", "conjecturer_unconditioned", "guide"):
        assert read_template(role, "reference") == ref[role]


def test_placeholders_are_filled_in_one_pass_and_other_braces_stay() -> None:
    # a theorem holding "{conjecture}" is not filled again; Lean's implicit binders are literal text
    assert render("A {theorem} B {conjecture}", theorem="x{conjecture}", conjecture="c") == "A x{conjecture} B c"
    assert render("{x : ℝ} {theorem}", theorem="t") == "{x : ℝ} t"
    theorem = "theorem t {a : ℕ} (h : {x | x = a} = ∅) : False := by"
    assert theorem in _single_user_turn(solver_messages(HEADER, theorem))


@pytest.mark.parametrize(
    "call",
    [
        lambda: solver_messages(HEADER, "  "),
        lambda: conjecturer_messages(HEADER, ""),
        lambda: guide_messages("", THEOREM),
        lambda: guide_messages(THEOREM, " \n"),
        lambda: seeded_conjecturer_messages(HEADER, THEOREM, " "),
        lambda: seeded_conjecturer_messages(HEADER, "", PROOF),
    ],
)
def test_empty_statements_are_user_errors(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        call()


def test_builtin_sets_are_listed_and_complete() -> None:
    assert {"reference", "legacy"} <= set(builtin_names())
    for name in builtin_names():
        choice = SimpleNamespace(solver=name, conjecturer=name, conjecturer_unconditioned=name,
                                 conjecturer_seeded=name, guide=name, guide_tags=name)
        p = load_prompts(choice)
        assert THEOREM in _single_user_turn(solver_messages(HEADER, THEOREM, p))
        content = _single_user_turn(guide_messages(THEOREM, CONJ, p))
        assert THEOREM in content and CONJ in content
        for _, begin, end in p.guide_tags.pairs():
            assert begin in content and end in content
        assert f"{THEOREM}\n  positivity" in _single_user_turn(seeded_conjecturer_messages(HEADER, THEOREM, PROOF, prompts=p))


def test_legacy_set_keeps_the_old_wording_and_tags() -> None:
    choice = SimpleNamespace(solver="legacy", conjecturer="legacy", conjecturer_unconditioned="legacy",
                             conjecturer_seeded="legacy", guide="legacy", guide_tags="legacy")
    p = load_prompts(choice)
    assert f"```lean4\n{HEADER}{THEOREM}\n```" in _single_user_turn(solver_messages(HEADER, THEOREM, p))
    assert f"```lean4\n{HEADER}{THEOREM}\n```" in _single_user_turn(conjecturer_messages(HEADER, THEOREM, prompts=p))
    assert "random area of mathematics" in _single_user_turn(conjecturer_messages("", "x", False, p))
    assert p.guide_tags == GuideTags(("<relevance>", "</relevance>"), ("<redundant_premises>", "</redundant_premises>"),
                                     ("<conclusion_complexity>", "</conclusion_complexity>"))


def test_user_template_files(tmp_path: Path) -> None:
    txt = tmp_path / "solver.txt"
    txt.write_text("Prove:\n{header}{theorem}\n", encoding="utf-8")  # read as is: the newline stays
    assert read_template("solver", str(txt)) == "Prove:\n{header}{theorem}\n"
    js = tmp_path / "set.json"
    js.write_text(json.dumps({"guide": "T={theorem} C={conjecture}",
                              "guide_tags": {"relevance": ["<r>", "</r>"], "redundancy": ["<d>", "</d>"],
                                             "conclusion_complexity": ["<c>", "</c>"]}}))
    assert read_template("guide", str(js)) == "T={theorem} C={conjecture}"
    assert read_guide_tags(str(js)).relevance == ("<r>", "</r>")
    choice = SimpleNamespace(solver=str(txt), conjecturer="reference", conjecturer_unconditioned="reference",
                             conjecturer_seeded="reference", guide=str(js), guide_tags=str(js))
    p = load_prompts(choice)
    assert _single_user_turn(solver_messages("H\n", "T", p)) == "Prove:\nH\nT\n"
    assert _single_user_turn(guide_messages("T", "C", p)) == "T=T C=C"


@pytest.mark.parametrize(
    ("role", "value", "words"),
    [
        ("solver", "nonesuch", "unknown template set 'nonesuch'; valid: 'legacy', 'reference'"),
        ("guide", "./missing.txt", "no such template file"),
        ("solver", "FILE:Complete this", "no {theorem} placeholder"),
        ("guide", "FILE:{theorem} only", "no {conjecture} placeholder"),
        ("solver", "FILE:{theorem} and {conjecture}", "uses {conjecture}"),
        ("conjecturer_seeded", "FILE:{theorem} only", "no {statement_and_proof} placeholder"),
        ("conjecturer", "FILE:{theorem}{statement_and_proof}", "uses {statement_and_proof}"),
        ("guide", "JSON:{\"solver\": \"{theorem}\"}", "has no 'guide' template"),
        ("guide", "JSON:[1, 2]", "JSON object"),
        ("guide", "JSON:{oops", "not valid JSON"),
    ],
)
def test_bad_template_choices(tmp_path: Path, role: str, value: str, words: str) -> None:
    if value.startswith("FILE:"):
        (tmp_path / "t.txt").write_text(value[5:])
        value = str(tmp_path / "t.txt")
    elif value.startswith("JSON:"):
        (tmp_path / "t.json").write_text(value[5:])
        value = str(tmp_path / "t.json")
    with pytest.raises(PromptError) as info:
        read_template(role, value)
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("tags", "words"),
    [
        ({"relevance": ["<r>", "</r>"]}, "must map exactly relevance, redundancy, conclusion_complexity"),
        ({"relevance": ["<r>"], "redundancy": ["<d>", "</d>"], "conclusion_complexity": ["<c>", "</c>"]},
         "relevance must be [begin tag, end tag]"),
        ({"relevance": ["<r>", ""], "redundancy": ["<d>", "</d>"], "conclusion_complexity": ["<c>", "</c>"]},
         "two non-empty strings"),
    ],
)
def test_bad_tag_files(tmp_path: Path, tags: dict[str, list[str]], words: str) -> None:
    path = tmp_path / "tags.json"
    path.write_text(json.dumps(tags))
    with pytest.raises(PromptError) as info:
        read_guide_tags(str(path))
    assert words in str(info.value)
    with pytest.raises(PromptError, match="unknown template set"):
        read_guide_tags("nonesuch")


def test_pyproject_ships_every_template_set_as_package_data() -> None:
    import fnmatch
    import tomllib

    repo = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sgsbatch"]
    shipped = sorted(p.relative_to(repo / "sgsbatch").as_posix() for p in (repo / "sgsbatch" / "prompt_templates").iterdir())
    assert shipped and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in shipped)
    assert sorted(builtin_names()) == sorted(Path(f).stem for f in shipped)
