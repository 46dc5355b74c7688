"""The simulated verifier: a DETERMINISTIC stand-in for Lean, for CPU test runs only.

THIS IS NOT LEAN. It never checks a proof; it applies fixed rules to the text so that
pipelines, rewards and bands get a real, learnable signal where no Lean toolchain is installed.
It must never be the default verifier of a research config: every verdict it returns says
"simulated verifier" in its `reason` and its first message is "simulated verifier: not Lean".

Rules, in order (comments are stripped from the proof first):
1. Failed: empty proof; `sorry` / `admit`; a forbidden command or keyword (`#eval`, `#exit`,
   `run_cmd`, `axiom`, `unsafe`, `native_decide`, ...: the things the real verifier must refuse);
   unbalanced brackets.
2. Timeout: a proof longer than `timeout_chars` characters.
3. Failed: no closing tactic (`norm_num`, `linarith`, `nlinarith`, `positivity`, `simp`,
   `simp_all`, `ring_nf`, `omega`, `field_simp`, `aesop`, `decide`), or more than
   `max_closers` distinct ones (a stand-in for Lean's "no goals" error on piled-up tactics).
4. Each theorem has a hidden difficulty in 1..`difficulty_levels` and a favoured tactic family,
   both from a SHA-256 hash of its whitespace-normalised statement. The proof's strength is the
   largest weight among its closing tactics (1-3), +1 if it uses the favoured family, +0.5 per
   further distinct closing tactic. Verified iff strength >= difficulty and a SHA-256 coin of
   (statement, normalised proof) falls under `pass_probability`; otherwise failed.

Draw channel (rule 4 replaced): a proof carrying the comment `-- SGSBATCH-SIMULATED-DRAW: verified`
or `...: failed` (written by the SIMULATED generation backend, backends/simulated_generation.py)
gets that verdict once rules 1-3 pass; Lean reads it as a comment, the Lean verifier ignores it.

With the defaults about 20-60% of reasonable-looking proofs verify: a bare `simp` rarely does,
`nlinarith [...]` often does. The same (statement, proof) always gets the same verdict.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator, Sequence

from sgsbatch.config.simulated_time import SimulatedTime, sleep
from sgsbatch.logic.extraction import strip_lean_comments
from sgsbatch.verification.verdict import (
    FAILED,
    TIMEOUT,
    VERIFIED,
    FixedFeed,
    JobFeed,
    ProofJob,
    Result,
    Verdict,
    results_only,
)

NOT_LEAN = "simulated verifier: not Lean"

CLOSER_WEIGHTS: dict[str, float] = {
    "decide": 1.0,
    "simp": 1.0,
    "simp_all": 1.0,
    "field_simp": 1.0,
    "norm_num": 2.0,
    "ring_nf": 2.0,
    "positivity": 2.0,
    "linarith": 2.0,
    "aesop": 2.0,
    "omega": 2.0,
    "nlinarith": 3.0,
}
FAMILIES: tuple[frozenset[str], ...] = (
    frozenset({"nlinarith", "linarith", "positivity"}),
    frozenset({"norm_num", "simp", "simp_all", "field_simp", "ring_nf"}),
    frozenset({"omega", "decide", "aesop"}),
)
FORBIDDEN_WORDS: tuple[str, ...] = (
    "sorry",
    "admit",
    "axiom",
    "unsafe",
    "native_decide",
    "implemented_by",
    "extern",
    "run_cmd",
    "run_tac",
    "run_elab",
    "run_meta",
    "elab",
    "macro",
    "syntax",
    "import",
)
FORBIDDEN_COMMANDS: tuple[str, ...] = ("#eval", "#exit", "#print", "#check", "#reduce", "#synth")

_DRAW_RE = re.compile(r"--\s*SGSBATCH-SIMULATED-DRAW:\s*(verified|failed)\b")

_BRACKETS = {")": "(", "]": "[", "}": "{", "⟩": "⟨"}


def _word_re(word: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.'!?])" + re.escape(word) + r"(?![\w'!?])")


_CLOSER_RES = {name: _word_re(name) for name in CLOSER_WEIGHTS}
_FORBIDDEN_WORD_RES = {name: _word_re(name) for name in FORBIDDEN_WORDS}
_FORBIDDEN_COMMAND_RES = {
    name: re.compile(r"(?<![\w#])" + re.escape(name) + r"(?![\w])") for name in FORBIDDEN_COMMANDS
}


def stable_unit(salt: str, *parts: object) -> float:
    """A number in [0, 1) from the SHA-256 of `salt` and `parts` (stable across runs and machines);
    also the SIMULATED generation backend's source of draws (with its own salt)."""
    digest = hashlib.sha256("\x1f".join((salt, *map(str, parts))).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _unit(*parts: str) -> float:
    return stable_unit("sgsbatch-simulated", *parts)


def normalise(text: str) -> str:
    """Whitespace-normalised text: what a statement's hidden difficulty is hashed from."""
    return " ".join(text.split())


def _balanced(code: str) -> bool:
    stack: list[str] = []
    for ch in code:
        if ch in "([{⟨":
            stack.append(ch)
        elif ch in _BRACKETS and (not stack or stack.pop() != _BRACKETS[ch]):
            return False
    return not stack


def _verdict(verdict: str, reason: str, *details: str) -> Verdict:
    return Verdict(verdict=verdict, reason=f"simulated verifier: {reason}", messages=[NOT_LEAN, *details])


def theorem_difficulty(theorem: str, difficulty_levels: int = 5) -> int:
    """The hidden difficulty of a statement, 1..`difficulty_levels`."""
    if difficulty_levels < 1:
        raise ValueError(f"difficulty_levels must be >= 1, got {difficulty_levels}")
    return 1 + int(_unit("difficulty", normalise(theorem)) * difficulty_levels)


def favoured_family(theorem: str) -> frozenset[str]:
    """The tactic family that earns a statement's +1 bonus."""
    return FAMILIES[int(_unit("family", normalise(theorem)) * len(FAMILIES))]


def closing_tactics(proof: str) -> set[str]:
    """The closing tactics `proof` uses (as words, outside comments)."""
    code = strip_lean_comments(proof)
    return {name for name, pattern in _CLOSER_RES.items() if pattern.search(code)}


def proof_strength(theorem: str, proof: str) -> float:
    """Max closer weight, +1 for the statement's favoured family, +0.5 per further closer."""
    used = closing_tactics(proof)
    if not used:
        return 0.0
    bonus = 1.0 if used & favoured_family(theorem) else 0.0
    return max(CLOSER_WEIGHTS[t] for t in used) + bonus + 0.5 * (len(used) - 1)


def simulated_verify(
    header: str,
    theorem: str,
    proof: str,
    *,
    difficulty_levels: int = 5,
    pass_probability: float = 0.8,
    max_closers: int = 3,
    timeout_chars: int = 6000,
) -> Verdict:
    """Judge `header + theorem + proof` by the simulated rules (see the module docstring). NOT Lean.

    `header` is accepted for the verifier interface and does not affect the verdict.
    """
    del header  # the simulated rules look at the statement and the proof only
    if not 0.0 <= pass_probability <= 1.0:
        raise ValueError(f"pass_probability must be in [0, 1], got {pass_probability}")
    code = strip_lean_comments(proof)
    if not code.strip():
        return _verdict(FAILED, "empty proof")
    for name, pattern in _FORBIDDEN_WORD_RES.items():
        if pattern.search(code):
            return _verdict(FAILED, f"forbidden `{name}` in the proof")
    for name, pattern in _FORBIDDEN_COMMAND_RES.items():
        if pattern.search(code):
            return _verdict(FAILED, f"forbidden command `{name}` in the proof")
    if not _balanced(code):
        return _verdict(FAILED, "unbalanced brackets (stand-in for a parse error)")
    if len(proof) > timeout_chars:
        return _verdict(TIMEOUT, f"proof longer than {timeout_chars} characters, treated as a timeout")
    used = closing_tactics(code)
    if not used:
        return _verdict(FAILED, "no closing tactic (stand-in for unsolved goals)")
    if len(used) > max_closers:
        return _verdict(FAILED, f"more than {max_closers} closing tactics (stand-in for a 'no goals' error)")
    draw = _DRAW_RE.search(proof)
    if draw is not None:
        if draw.group(1) == "verified":
            return _verdict(VERIFIED, "drawn verified by the simulated generator")
        return _verdict(FAILED, "drawn failed by the simulated generator")
    difficulty = theorem_difficulty(theorem, difficulty_levels)
    strength = proof_strength(theorem, code)
    details = f"difficulty {difficulty}, strength {strength:g}, tactics {', '.join(sorted(used))}"
    if strength < difficulty:
        return _verdict(FAILED, "proof too weak for this statement", details)
    if _unit("coin", normalise(theorem), normalise(code)) >= pass_probability:
        return _verdict(FAILED, "unlucky coin (stand-in for a wrong proof step)", details)
    return _verdict(VERIFIED, "strength meets difficulty", details)


class SimulatedVerifier:
    """SIMULATED: deterministic stand-in, not Lean (see verification/simulated.py).

    With a `clock` (projection.simulated_time_scale > 0) it sleeps as `processes` Lean cores would:
    the REPLs' start when built, each proof's share (1 / lean_proofs_per_s / processes), and the
    REPLs' restart after every `max_proofs_per_process` proofs a core (config/simulated_time.py).
    """

    def __init__(self, clock: SimulatedTime | None = None, processes: int = 1) -> None:
        self.clock = clock
        self.processes = max(1, processes)
        self.checked = 0
        if clock is not None:
            sleep(clock.repl_s(), "REPL start (import Mathlib)")

    def verify_stream(self, jobs: Sequence[ProofJob]) -> Iterator[Result]:
        return results_only(self.verify_feed(FixedFeed(jobs)))

    def verify_feed(self, feed: JobFeed) -> Iterator[Result | None]:
        ended = False
        while not ended:
            jobs, ended = feed.poll()
            for job in jobs:
                yield self._check(job)
            if not jobs and not ended:
                time.sleep(feed.wait_s)
                yield None

    def _check(self, job: ProofJob) -> Result:
        t0 = time.perf_counter()
        if self.clock is not None:
            if self.checked and self.checked % (self.clock.max_proofs_per_process * self.processes) == 0:
                sleep(self.clock.repl_s(), "REPL restart (import Mathlib)")
            sleep(self.clock.proof_s(self.processes), "Lean proof")
        self.checked += 1
        verdict = simulated_verify(job.header, job.theorem, job.proof)
        return job, verdict, time.perf_counter() - t0

    def close(self) -> None:
        return None
