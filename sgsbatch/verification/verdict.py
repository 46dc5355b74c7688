"""The outcome of checking one proof: `Verdict`, shared by the Lean and the simulated verifiers.

Covered: the four verdict values and the record. Not covered: how any verifier decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
