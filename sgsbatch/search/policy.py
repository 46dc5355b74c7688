"""The tactic policy's prompt and reply: what the Solver is asked at a proof state, and the tactic it gives.

The prompt (one user message, chat-templated by the engine as every role's) is the theorem, the
tactics so far as a proof in progress, and the current goals as Lean prints them, ending in `:::`:

    Give the next tactic of this Lean 4 proof.
    ```lean4
    theorem t (x : ℝ) : 0 ≤ x ^ 2 := by
      intro ...
    ```
    Goals:
    x : ℝ
    ⊢ 0 ≤ x ^ 2
    :::

The goal-state-then-`:::` ending is BFS-Prover's format (arXiv 2502.03438 §3: the prompt is the
state, the completion the tactic); the theorem and the tactics so far are added as the issue asks
(InternLM2.5-StepProver and nanoproof give the state only). Goals longer than
`search.max_goal_chars` are cut (their head kept). The reply: its text up to the first blank line,
dedented; a reply that wrote a whole ```lean4 proof gives the first tactic after its `:= by`
(a whole-proof model used as a tactic policy; the tactics so far, when it restates them first, are
skipped), or none when it has no `:= by`. An empty reply has no tactic (a failed edge,
counted as `malformed`). Not covered: a value prompt (nanoproof's value bins).
"""

from __future__ import annotations

import textwrap

from sgsbatch.backends.generation import Sample

INSTRUCTION = "Give the next tactic of this Lean 4 proof."
SEPARATOR = ":::"
FENCE = "```"


def proof_so_far(theorem: str, tactics: list[str]) -> str:
    """`theorem` (ending in `:= by`) and the tactics, each indented two spaces under it: the text
    that the linearized proof (`linearize`) continues."""
    return theorem.rstrip() + linearize(tactics)


def linearize(tactics: list[str]) -> str:
    """A path's tactics as the proof that follows `:= by`: one per line, indented two spaces (a
    multi-line tactic keeps its own lines' relative indentation). Tactic mode applies a tactic to
    the whole goal list, so the sequence of tactics is the proof."""
    return "".join("\n" + textwrap.indent(t, "  ") for t in tactics)


def prompt_messages(theorem: str, tactics: list[str], goals: tuple[str, ...], max_goal_chars: int) -> list[dict[str, str]]:
    shown = "\n\n".join(goals)
    if len(shown) > max_goal_chars:
        shown = shown[:max_goal_chars] + "\n..."
    content = f"{INSTRUCTION}\n{FENCE}lean4\n{proof_so_far(theorem, tactics)}\n{FENCE}\nGoals:\n{shown}\n{SEPARATOR}"
    return [{"role": "user", "content": content}]


def tactic_of(reply: str, so_far: list[str] | None = None) -> str | None:
    """The tactic in a reply (see the module docstring), or None. `so_far`: the tactics already applied,
    which a reply written as a whole proof may restate before its next tactic (they are skipped)."""
    text = reply.replace("\r\n", "\n")
    if FENCE in text:
        code = text.split(FENCE, 2)[1].partition("\n")[2]
        if ":= by" not in code:
            return None  # a statement without its proof (a reply cut at search.tactic_max_tokens)
        lines = [ln.strip() for ln in code.split(":= by", 1)[1].split("\n") if ln.strip()]
        done = [ln.strip() for t in so_far or [] for ln in t.split("\n") if ln.strip()]
        if done and lines[:len(done)] == done:
            lines = lines[len(done):]
        return lines[0] if lines else None
    text = text.lstrip("\n").split("\n\n", 1)[0]
    tactic = textwrap.dedent(text).strip()
    return tactic or None


def tactic_logprob(sample: Sample) -> float:
    """The sampled tactic's log-probability: its tokens' summed logprobs (BFS-Prover's node score)."""
    return float(sum(sample.logprobs))
