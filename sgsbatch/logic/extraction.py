"""Strict extraction of Solver proofs and Conjecturer statements from model replies.

Covered: the spec's extraction rules, the Lean file a Solver sample is checked as
(`solver_file`), and the small Lean-lexing helpers these rules need (comment stripping, word
matching). Not covered: deduplicating conjectures, or checking anything in Lean.

Decisions beyond the spec's wording, applied to both roles:

- Line ends are normalised first (CRLF and lone CR become LF) and a leading byte-order mark is
  dropped; every other character, unicode included, is kept as is.
- Declaration keywords, two rules (`extraction.declarations`). "reference" (the default, the
  Solver only): the reference's `extract_proof_deepseek_v2_strict` (sgs/utils/prompts.py:151-156)
  counts the substrings `theorem `, `lemma `, `def ` anywhere in the stripped reply, comments and
  longer names (`my_theorem x`, `dilemma x`) included. "code_only" (ours): they are counted as
  Lean words outside comments: a keyword preceded by an identifier character, a dot or a quote
  (`my_theorem_1`, `Foo.lemma`) or followed by anything but whitespace (`theorem_1`) is not a
  declaration, and neither is the word `theorem` in a `--` or `/- -/` comment. The Conjecturer's
  declaration check (not in the reference) always uses "code_only".
- `:= by` is matched as that exact text (the dataset statements all end with it).

Solver (`extract_proof`): the reply, stripped, opens with a line that is exactly ```` ```lean4 ````,
ends with ```` ``` ````, and holds exactly two fences (counted as occurrences of ```` ``` ````
anywhere). The block holds exactly one declaration (by the chosen rule); the proof is the text after the first `:= by`
with trailing whitespace dropped; it must not be blank.

Conjecturer (`extract_conjecture`), two rules (`extraction.conjecture`). "reference" (the default)
is the reference's `extract_conjecture_deepseek_v2` (sgs/utils/prompts.py:184-221): the text
after the last ```` ```lean4 ```` of the reply up to the last ```` ``` ```` after it (none: rejected);
it holds exactly one `:= by` and at most one `sorry`, both counted as substrings anywhere
(comments and names such as `t_sorry_free` included); stripped, it ends in `sorry` or `:= by`,
comments included; a statement containing the reference's failure tag `NO CONJECTURE FOUND` is
malformed (step1_data_gen.py:440 drops it). "code_only" (ours): the last ```` ```lean4 ```` block
with fences paired in order, inline code in prose skipped (a reply cut off inside that block is
rejected), `sorry` counted as a word outside comments, the ending checked outside comments, the
tag not special. Both:
the conjecture is the text up to and including the first `:= by`, stripped; its preamble is
tidied (logic/preamble.py: `open`/`set_option` lines scoped with `in`, `import` lines dropped or kept
by `extraction.conjecture_imports`, the dropped lines returned in `Extraction.dropped`); then it
must hold exactly one declaration ("code_only" count: a conjecture with none or two could never
pass the Solver's extraction, so it is dropped before costing 8 samples; not in the reference).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sgsbatch.logic.preamble import IMPORT_RULES, ImportRule, tidy_preamble

DeclarationRule = Literal["reference", "code_only"]
DECLARATION_RULES: tuple[str, ...] = ("reference", "code_only")
_REFERENCE_DECLARATIONS = ("theorem ", "lemma ", "def ")
ConjectureRule = Literal["reference", "code_only"]
CONJECTURE_RULES: tuple[str, ...] = ("reference", "code_only")
NO_CONJECTURE_FOUND_TAG = "NO CONJECTURE FOUND"  # sgs/utils/prompts.py:102

FENCE = "```"
LEAN_FENCE = "```lean4"
BY = ":= by"

EMPTY_REPLY = "empty_reply"
NO_FENCE = "no_fence"
TEXT_OUTSIDE_FENCE = "text_outside_fence"
WRONG_LANGUAGE = "wrong_language"
FENCE_COUNT = "fence_count"
UNCLOSED_FENCE = "unclosed_fence"
NO_DECLARATION = "no_declaration"
SEVERAL_DECLARATIONS = "several_declarations"
NO_BY = "no_by"
SEVERAL_BY = "several_by"
SEVERAL_SORRY = "several_sorry"
BAD_ENDING = "bad_ending"
EMPTY_PROOF = "empty_proof"
FAILURE_TAG = "failure_tag"  # the conjecture holds the reference's `NO CONJECTURE FOUND`

REASONS: frozenset[str] = frozenset(
    {
        EMPTY_REPLY,
        NO_FENCE,
        TEXT_OUTSIDE_FENCE,
        WRONG_LANGUAGE,
        FENCE_COUNT,
        UNCLOSED_FENCE,
        NO_DECLARATION,
        SEVERAL_DECLARATIONS,
        NO_BY,
        SEVERAL_BY,
        SEVERAL_SORRY,
        BAD_ENDING,
        EMPTY_PROOF,
        FAILURE_TAG,
    }
)

# Characters that may sit right before a keyword inside a longer Lean name: identifier
# characters (unicode letters, digits, subscripts, `_`), `.` of a qualified name, `'`, `!`, `?`.
_NAME_BEFORE = r"(?<![\w.'!?])"
_DECLARATION_RE = re.compile(_NAME_BEFORE + r"(?:theorem|lemma|def)(?=\s)")
_SORRY_RE = re.compile(_NAME_BEFORE + r"sorry(?![\w'!?])")
_ENDS_IN_SORRY_RE = re.compile(_NAME_BEFORE + r"sorry\Z")


@dataclass(frozen=True)
class Extraction:
    """The outcome of an extraction: `value` when `ok`, else a `reason` code from `REASONS`;
    `dropped`: lines removed from a conjecture's preamble (logic/preamble.py)."""

    ok: bool
    value: str | None
    reason: str | None
    dropped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.ok == (self.value is not None), "an Extraction has a value iff it is ok"
        assert self.ok == (self.reason is None), "an Extraction has a reason iff it failed"
        assert self.ok or not self.dropped, "only a kept conjecture has dropped lines"
        assert self.reason is None or self.reason in REASONS, f"unknown reason {self.reason!r}"


def _good(value: str, dropped: tuple[str, ...] = ()) -> Extraction:
    return Extraction(ok=True, value=value, reason=None, dropped=dropped)


def _bad(reason: str) -> Extraction:
    return Extraction(ok=False, value=None, reason=reason)


def normalise_newlines(text: str) -> str:
    """CRLF and lone CR become LF; a leading byte-order mark is dropped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")


def strip_lean_comments(code: str) -> str:
    """`code` with `--` line comments and (nested) `/- ... -/` block comments replaced by a space.

    A lexer-free approximation: comment markers inside string literals are treated as comments.
    An unclosed block comment runs to the end of the text.
    """
    out: list[str] = []
    i, n, depth = 0, len(code), 0
    while i < n:
        two = code[i : i + 2]
        if depth:
            if two == "/-":
                depth, i = depth + 1, i + 2
            elif two == "-/":
                depth, i = depth - 1, i + 2
                if not depth:
                    out.append(" ")
            else:
                i += 1
        elif two == "/-":
            depth, i = 1, i + 2
        elif two == "--":
            end = code.find("\n", i)
            out.append(" ")
            i = n if end < 0 else end
        else:
            out.append(code[i])
            i += 1
    return "".join(out)


def count_declarations(code: str, rule: DeclarationRule = "code_only") -> int:
    """Declaration keywords (`theorem`, `lemma`, `def`) in `code`.

    "code_only": as words outside comments. "reference": occurrences of `theorem `, `lemma `,
    `def ` anywhere (sgs/utils/prompts.py:151-153: `generation.strip().count("theorem ")`, ...).
    """
    if rule == "reference":
        return sum(code.count(k) for k in _REFERENCE_DECLARATIONS)
    if rule != "code_only":
        raise ValueError(f"count_declarations: rule must be one of {', '.join(DECLARATION_RULES)}, got {rule!r}")
    return len(_DECLARATION_RE.findall(strip_lean_comments(code)))


def count_sorry(code: str) -> int:
    """`sorry` as a word outside comments."""
    return len(_SORRY_RE.findall(strip_lean_comments(code)))


def extract_proof(reply: str, declarations: DeclarationRule = "reference") -> Extraction:
    """The Solver's proof: the text after the first `:= by` of its single ```lean4 block.

    `declarations` is the rule that counts the block's declarations (see the module docstring);
    "reference" counts over the whole stripped reply, as the reference does.
    """
    text = normalise_newlines(reply).strip()
    if not text:
        return _bad(EMPTY_REPLY)
    fences = text.count(FENCE)
    if fences == 0:
        return _bad(NO_FENCE)
    if not text.startswith(FENCE):
        return _bad(TEXT_OUTSIDE_FENCE)
    first_line, _, rest = text.partition("\n")
    if first_line.rstrip() != LEAN_FENCE:
        return _bad(WRONG_LANGUAGE)
    if fences == 1:
        return _bad(UNCLOSED_FENCE)
    if fences > 2:
        return _bad(FENCE_COUNT)
    if not text.endswith(FENCE):
        return _bad(TEXT_OUTSIDE_FENCE)
    code = rest[: -len(FENCE)]
    count = count_declarations(text if declarations == "reference" else code, declarations)
    if count == 0:
        return _bad(NO_DECLARATION)
    if count > 1:
        return _bad(SEVERAL_DECLARATIONS)
    if BY not in code:
        return _bad(NO_BY)
    proof = code.split(BY, 1)[1].rstrip()
    if not proof.strip():
        return _bad(EMPTY_PROOF)
    return _good(proof)


def _last_lean_block(text: str) -> tuple[str | None, bool]:
    """(code of the last ```lean4 block, whether it was closed); (None, False) if there is none.

    Fences pair up in order: an opening fence starts its line and is ``` plus an info string
    without backticks up to the end of the line (```` ```lean4 x``` ```` in prose is inline code,
    not a block); the next ``` closes it.
    """
    last: str | None = None
    closed = False
    pos = 0
    while True:
        start = text.find(FENCE, pos)
        if start < 0:
            return last, closed
        line_end = text.find("\n", start)
        if line_end < 0:  # a fence on the very last line opens nothing
            return last, closed
        info = text[start + len(FENCE) : line_end]
        if text[text.rfind("\n", 0, start) + 1 : start].strip() or "`" in info:
            pos = line_end  # inline code
            continue
        end = text.find(FENCE, line_end)
        if info.strip() == "lean4":
            last = text[line_end + 1 : end] if end >= 0 else text[line_end + 1 :]
            closed = end >= 0
        if end < 0:
            return last, closed
        pos = end + len(FENCE)


def _reference_statement(text: str) -> str | Extraction:
    """The statement by the reference's `extract_conjecture_deepseek_v2`, or why it failed."""
    start = text.rfind(LEAN_FENCE)  # prompts.py:186 "split_idx = generation.rfind("```lean4")"
    if start < 0:
        return _bad(NO_FENCE)
    block = text[start + len(LEAN_FENCE) :]
    end = block.rfind(FENCE)  # prompts.py:193 "final_code_idx = proposed_problem.rfind("```")"
    if end < 0:
        return _bad(UNCLOSED_FENCE)
    block = block[:end]
    by_count = block.count(BY)  # prompts.py:202 "if proposed_problem.count(":= by") != 1"
    if by_count != 1:
        return _bad(NO_BY if by_count == 0 else SEVERAL_BY)
    if block.count("sorry") > 1:  # prompts.py:204 "if proposed_problem.count("sorry") not in [0, 1]"
        return _bad(SEVERAL_SORRY)
    block = block.strip()
    if not (block.endswith("sorry") or block.endswith(BY)):  # prompts.py:207-212
        return _bad(BAD_ENDING)
    statement = block[: block.find(BY) + len(BY)].strip()  # prompts.py:219
    if NO_CONJECTURE_FOUND_TAG in statement:  # step1_data_gen.py:440 "if NO_CONJECTURE_FOUND_TAG not in ..."
        return _bad(FAILURE_TAG)
    return statement


def _code_only_statement(text: str) -> str | Extraction:
    """The statement by sgsbatch's rule ("code_only"), or why it failed."""
    block, closed = _last_lean_block(text)
    if block is None:
        return _bad(NO_FENCE)
    if not closed:
        return _bad(UNCLOSED_FENCE)
    code = block.strip()
    by_count = code.count(BY)
    if by_count != 1:
        return _bad(NO_BY if by_count == 0 else SEVERAL_BY)
    if count_sorry(code) > 1:
        return _bad(SEVERAL_SORRY)
    code_only = strip_lean_comments(code).rstrip()
    if not (code_only.endswith(BY) or _ENDS_IN_SORRY_RE.search(code_only) is not None):
        return _bad(BAD_ENDING)
    return code.split(BY, 1)[0] + BY


def extract_conjecture(reply: str, rule: ConjectureRule = "reference", imports: ImportRule = "drop") -> Extraction:
    """The Conjecturer's statement: its last ```lean4 block's text up to and including `:= by`.

    `rule` (`extraction.conjecture`) and `imports` (`extraction.conjecture_imports`): see the
    module docstring.
    """
    for what, value, choices in (("rule", rule, CONJECTURE_RULES), ("imports", imports, IMPORT_RULES)):
        if value not in choices:
            raise ValueError(f"extract_conjecture: {what} must be one of {', '.join(choices)}, got {value!r}")
    text = normalise_newlines(reply).strip()
    if not text:
        return _bad(EMPTY_REPLY)
    found = _reference_statement(text) if rule == "reference" else _code_only_statement(text)
    if isinstance(found, Extraction):
        return found
    statement, dropped = tidy_preamble(found, imports)
    declarations = count_declarations(statement)
    if declarations == 0:
        return _bad(NO_DECLARATION)
    if declarations > 1:
        return _bad(SEVERAL_DECLARATIONS)
    return _good(statement, dropped)


def solver_file(header: str, theorem: str, proof: str) -> str:
    """The Lean file checked for a Solver sample: dataset header + dataset statement + proof.

    The statement always comes from the dataset (or the round's conjecture), never from the
    model's reply. A header that does not end in a newline gets one.
    """
    if header and not header.endswith("\n"):
        header += "\n"
    return header + theorem + proof
