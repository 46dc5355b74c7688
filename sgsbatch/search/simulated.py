"""The SIMULATED tactic environment: proof states drawn from hashes, for the tiny config, tests and rehearsals.

THIS IS NOT LEAN. `search.environment = "simulated"` runs no Lean: a proof state is the theorem plus
the tactics applied so far, and what a tactic does is decided by SHA-256 coins of (theorem, path,
tactic) (verification/simulated.stable_unit), so the same search always sees the same tree:

- a tactic the verifier's static checks refuse (verification/checks.py) fails as `refused: <reason>`,
  as in the Lean environment, before any coin;
- otherwise it is a legal move with probability `search.simulated_branching`, else it fails
  ("SIMULATED: tactic failed");
- a legal move closes the proof when the path's closing tactics are strong enough for the theorem
  by the SIMULATED verifier's rule 4 (`proof_strength >= theorem_difficulty`, without its coin) or
  when the path reaches `search.simulated_depth` tactics with a closing tactic last; else it leaves
  one goal, one of three variants drawn from the path (so different tactics can reach the same goal:
  duplicates happen).

The verify phase then judges the linearized proof with the SIMULATED verifier, whose coin rejects
some proofs this environment closed: tactic mode is not the verdict, here too. Not covered: anything
Lean does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sgsbatch.search.environment import Apply, Start, TacticResult
from sgsbatch.verification.checks import check_proof
from sgsbatch.verification.simulated import closing_tactics, proof_strength, stable_unit, theorem_difficulty

log = logging.getLogger(__name__)
FAILED = "SIMULATED: tactic failed"


class SimulatedTacticEnvironment:
    name = "simulated"

    def __init__(self, branching: float, depth: int) -> None:
        if not 0.0 < branching <= 1.0:
            raise ValueError(f"search.simulated_branching must be in (0, 1], got {branching}")
        if depth < 1:
            raise ValueError(f"search.simulated_depth must be >= 1, got {depth}")
        self.branching = branching
        self.depth = depth
        self._states: list[tuple[str, str, tuple[str, ...]]] = []  # (key, theorem, tactics so far)
        log.warning("search environment: SIMULATED tactic states (search/simulated.py), NOT Lean")

    def _new(self, key: str, theorem: str, path: tuple[str, ...], goals: tuple[str, ...]) -> TacticResult:
        self._states.append((key, theorem, path))
        return TacticResult(True, len(self._states) - 1, goals)

    def start_many(self, starts: Sequence[Start]) -> list[TacticResult]:
        # the statement as the dataset has it (ending in `:= by`): the SIMULATED verifier hashes that text
        theorems = [s.theorem.rstrip().removesuffix("sorry").rstrip() for s in starts]
        return [self._new(s.key, t, (), (_goal(t, ()),)) for s, t in zip(starts, theorems, strict=True)]

    def apply_many(self, calls: Sequence[Apply]) -> list[TacticResult]:
        return [self._apply(c) for c in calls]

    def _apply(self, call: Apply) -> TacticResult:
        if not 0 <= call.state < len(self._states) or self._states[call.state][0] != call.key:
            return TacticResult(False, error="unknown_proof_state")
        refused = check_proof(call.tactic)
        if refused is not None:
            return TacticResult(False, error=f"refused: {refused.reason}")
        _, theorem, path = self._states[call.state]
        if stable_unit("search-legal", theorem, *path, call.tactic) >= self.branching:
            return TacticResult(False, error=FAILED)
        path = (*path, call.tactic)
        code = "\n".join(path)
        closes = bool(closing_tactics(call.tactic)) and (
            proof_strength(theorem, code) >= theorem_difficulty(theorem) or len(path) >= self.depth)
        return self._new(call.key, theorem, path, () if closes else (_goal(theorem, path),))

    def finish(self, key: str) -> None:
        return None  # states are small tuples; a task's environment lives as long as the task

    def close(self) -> None:
        self._states.clear()


def _goal(theorem: str, path: tuple[str, ...]) -> str:
    """A SIMULATED goal: the statement, and after some tactics one of three variants of the path."""
    statement = theorem.rstrip().removesuffix(":= by").strip()
    if not path:
        return f"⊢ {statement}"
    variant = int(stable_unit("search-goal", theorem, *path) * 3)
    return f"h{len(path)} : simulated step {variant}\n⊢ {statement}"
