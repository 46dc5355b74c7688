"""What every verifier shares: the proof to check (`ProofJob`), the outcome (`Verdict`), the interface.

Covered: the four verdict values, the records, the `Verifier` protocol the Lean and the
simulated verifiers implement, and `JobFeed`: jobs that arrive while the verifier runs (a verify
task streaming behind its solve task, phases/verify.py). Not covered: how any verifier decides
(rules.py, simulated.py).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

VERIFIED = "verified"
FAILED = "failed"
TIMEOUT = "timeout"
ERROR = "error"
VERDICTS: tuple[str, ...] = (VERIFIED, FAILED, TIMEOUT, ERROR)
# The first message of a verdict the static checks gave (lean.static_verdict): the proof never reached Lean.
STATIC_NOTE = "static check (not sent to Lean): "


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


Result = tuple[ProofJob, Verdict, float]


class JobFeed(Protocol):
    """Jobs that arrive over time. `poll()` returns the jobs new since its last call (never one twice)
    and True once no more will come; a verifier asks again at most every `wait_s` seconds while it
    has nothing to check, and after results. `poll` may raise: the exception ends the verifier's run."""

    wait_s: float

    def poll(self) -> tuple[list[ProofJob], bool]: ...


class FixedFeed:
    """A feed of jobs known at once: all on the first poll, and the end."""

    wait_s = 1.0

    def __init__(self, jobs: Sequence[ProofJob]) -> None:
        self._jobs: list[ProofJob] | None = list(jobs)

    def poll(self) -> tuple[list[ProofJob], bool]:
        jobs, self._jobs = self._jobs or [], None
        return jobs, True


def results_only(stream: Iterator[Result | None]) -> Generator[Result, None, None]:
    """A `verify_feed` stream without its waiting ticks."""
    return (r for r in stream if r is not None)


class Verifier(Protocol):
    def verify_stream(self, jobs: Sequence[ProofJob]) -> Iterator[Result]:
        """Yield (job, verdict, seconds) for every job exactly once, in completion order."""
        ...

    def verify_feed(self, feed: JobFeed) -> Iterator[Result | None]:
        """Yield (job, verdict, seconds) for every job the feed gives exactly once, in completion
        order, until the feed has ended and every job has its verdict; None while it waits (at most
        `feed.wait_s` apart), so the caller can check for a stop request."""
        ...

    def close(self) -> None: ...
