"""Chat prompts of the three SGS roles: Solver, Conjecturer and Guide.

Each builder returns the chat messages for one request: a single user turn, no system prompt,
as a list of ``{"role": "user", "content": ...}`` dicts ready for a chat template.

Covered: the wording of the prompts and the answer format each one asks for (the formats that
`extraction.py` and `review.py` parse strictly). Not covered: chat templating, tokenisation,
sampling parameters, and parsing the replies.
"""

from __future__ import annotations

RELEVANCE_TAG = "relevance"
REDUNDANT_PREMISES_TAG = "redundant_premises"
CONCLUSION_COMPLEXITY_TAG = "conclusion_complexity"
GUIDE_TAGS: tuple[str, str, str] = (RELEVANCE_TAG, REDUNDANT_PREMISES_TAG, CONCLUSION_COMPLEXITY_TAG)

_FENCE = "```"
_LEAN_FENCE = "```lean4"

_SOLVER_TEMPLATE = """Complete the following Lean 4 code:

{code}

Write the complete theorem, its statement exactly as given and then its proof, in Lean 4 with \
Mathlib. Answer with exactly one ```lean4 fenced code block holding the complete theorem and \
proof, and nothing else: no explanation before or after the block, no second code block."""

_CONJECTURER_TEMPLATE = """Here is a Lean 4 theorem we want to prove:

{code}

Propose one lemma or related theorem that would help to prove it. Your statement must be \
simpler than the theorem above, must not be the same statement, and must not be the same \
statement up to renaming of variables or hypotheses. Think about it as much as you need, then \
give your answer in a final ```lean4 code block holding one Lean 4 `theorem` or `lemma` whose \
proof is `sorry`, for example:

```lean4
theorem my_helper_lemma (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by
  sorry
```"""

_UNCONDITIONED_CONJECTURER_PROMPT = """Propose one non-trivial theorem from a random area of \
mathematics, stated in Lean 4 with Mathlib. Think about it as much as you need, then give your \
answer in a final ```lean4 code block holding one Lean 4 `theorem` or `lemma` whose proof is \
`sorry`, for example:

```lean4
theorem my_theorem (n : ℕ) (hn : 2 ≤ n) : n < 2 ^ n := by
  sorry
```"""

_GUIDE_TEMPLATE = """You are a math expert. We are trying to prove the following target theorem \
in Lean 4:

{target}

Someone proposed the following conjecture as a stepping stone towards the target:

{conjecture}

Rate the conjecture with three scores.

1. Relevance, an integer from 0 to 5: how much proving the conjecture would help to prove the \
target. 0 means it is unrelated to the target and trivial, or it is the same statement as the \
target up to renaming; 5 means it is clearly a key step towards the target.
2. Redundant premises, 0 or 1: 1 if the conjecture has hypotheses that are not needed for its \
conclusion, 0 otherwise.
3. Conclusion complexity, an integer from 0 to 4: 0 for a single simple conclusion, higher for \
more complicated conclusions; 3 or 4 means the conclusion is a disjunction of several unrelated \
cases or is deeply nested.

Explain your reasoning briefly, then give each score between its own tags, exactly like this:
<{rel}>N</{rel}>
<{red}>N</{red}>
<{cpx}>N</{cpx}>"""


def _lean_block(code: str) -> str:
    """`code` inside a ```lean4 fence, with exactly one newline before the closing fence."""
    return f"{_LEAN_FENCE}\n{code.rstrip()}\n{_FENCE}"


def _user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def solver_messages(header: str, theorem: str) -> list[dict[str, str]]:
    """The Solver prompt: complete `header + theorem` (a statement ending in `:= by`)."""
    if not theorem.strip():
        raise ValueError("solver_messages: the theorem statement is empty")
    return _user(_SOLVER_TEMPLATE.format(code=_lean_block(header + theorem)))


def conjecturer_messages(header: str, theorem: str, conditioned: bool = True) -> list[dict[str, str]]:
    """The Conjecturer prompt for one target.

    With ``conditioned=False`` (the "no problem conditioning" ablation) the prompt is fixed and
    holds no target: `header` and `theorem` are ignored, and every unsolved target gets the same
    prompt (diversity comes from sampling).
    """
    if not conditioned:
        return _user(_UNCONDITIONED_CONJECTURER_PROMPT)
    if not theorem.strip():
        raise ValueError("conjecturer_messages: the theorem statement is empty")
    return _user(_CONJECTURER_TEMPLATE.format(code=_lean_block(header + theorem)))


def guide_messages(target: str, conjecture: str) -> list[dict[str, str]]:
    """The Guide prompt: score `conjecture` (a statement) as a stepping stone to `target`."""
    if not target.strip() or not conjecture.strip():
        raise ValueError("guide_messages: the target and the conjecture must both be non-empty")
    content = _GUIDE_TEMPLATE.format(
        target=_lean_block(target),
        conjecture=_lean_block(conjecture),
        rel=RELEVANCE_TAG,
        red=REDUNDANT_PREMISES_TAG,
        cpx=CONCLUSION_COMPLEXITY_TAG,
    )
    return _user(content)
