"""What every verifier shares: the proof to check (`ProofJob`), the outcome (`Verdict`), the interface.

Covered: the four verdict values, the records and the `Verifier` protocol the Lean and the
simulated verifiers implement. Not covered: how any verifier decides (rules.py, simulated.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

VERIFIED = "verified"
FAILED = "failed"
TIMEOUT = "timeout"
ERROR = "error"
VERDICTS: tuple[str, ...] = (VERIFIED, FAILED, TIMEOUT, ERROR)


@dataclass(frozen=True)
class Verdict:
    """`verdict` is one of `VERDICTS`: failed = the proof is wrong; timeout and error = the
    check itself did not finish or broke (a system problem, counted apart). `reason` is a short
    human-readable cause (None for a verified proof is fine); `messages` are the checker's own.
    """

    verdict: str
    reason: str | None = None
    messages: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Verdict: unknown verdict {self.verdict!r} (one of {', '.join(VERDICTS)})")

    @property
    def ok(self) -> bool:
        """True for a verified proof."""
        return self.verdict == VERIFIED


@dataclass(frozen=True)
class ProofJob:
    """One proof to check: Lean sees `header + theorem + proof` (extraction.solver_file)."""

    key: str
    header: str
    theorem: str
    proof: str


class Verifier(Protocol):
    def verify_stream(self, jobs: Sequence[ProofJob]) -> Iterator[tuple[ProofJob, Verdict, float]]:
        """Yield (job, verdict, seconds) for every job exactly once, in completion order."""
        ...

    def close(self) -> None: ...
