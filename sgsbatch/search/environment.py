"""Where a search's tactics run: the interface every tactic environment gives the search.

A search starts from a theorem's statement ending in `sorry` (its proof state) and applies tactics
to proof states, reading the new goals. Three environments implement it: `lean` (the REPL's tactic
mode in verify's sandbox, search/lean_env.py), `simulated` (SIMULATED proof states,
search/simulated.py) and `replay` (recorded REPL transcripts, search/replay.py).

The calls of one wave go to the environment together (`apply_many`): an environment with several
Lean processes runs them in parallel, each search pinned to one process (its proof states live
there). A proof state is named by the environment's own integer; the search never reads it.

What a result means: `ok` is a legal edge (Lean accepted the tactic: no error message, no
`sorry`); `goals` are the goals left, `()` when the proof is complete; `error` says why an edge
failed (a Lean error, `timeout`, `refused: <reason>` for a tactic the verifier's static checks
refuse before Lean sees it, `unknown_proof_state`). Tactic mode is not the verdict (leanprover-community/repl issue #44):
a found proof goes through the verify phase. Not covered: the search (search/tree.py), prompts
(search/policy.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TacticResult:
    """One tactic applied (or a search started): the new proof state and its goals, or why not."""

    ok: bool
    state: int | None = None  # the environment's name for the new proof state (None when not ok)
    goals: tuple[str, ...] = ()  # the goals left; () with ok = the proof is complete
    error: str | None = None  # why the edge failed (None when ok)
    lean_s: float = 0.0  # seconds Lean spent on it (wall clock of the call)

    @property
    def solved(self) -> bool:
        return self.ok and not self.goals


@dataclass(frozen=True)
class Start:
    """A search to start: `key` names it (and pins it to one process); the Lean file is `header`
    then `theorem` ending in `:= by sorry`."""

    key: str
    header: str
    theorem: str


@dataclass(frozen=True)
class Apply:
    """A tactic to apply to proof state `state` of search `key`."""

    key: str
    state: int
    tactic: str


class TacticEnvironment(Protocol):
    name: str  # "lean" | "simulated" | "replay": in logs and the shard's completion marker

    def start_many(self, starts: Sequence[Start]) -> list[TacticResult]:
        """The root proof state of each search, in order (`ok` False: the statement does not elaborate)."""
        ...

    def apply_many(self, calls: Sequence[Apply]) -> list[TacticResult]:
        """Each tactic applied to its proof state, in order; calls of different searches may run in parallel."""
        ...

    def finish(self, key: str) -> None:
        """Search `key` is over: its proof states may be forgotten."""
        ...

    def close(self) -> None:
        """Stop every process; idempotent."""
        ...
