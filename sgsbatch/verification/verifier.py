"""Choosing the verifier a verify task uses: `lean` (the real REPL pool) or `simulated` (not Lean).

Both speak one interface: `verify_stream(jobs)` checks a batch of proofs and yields
`(job, verdict)` pairs as they complete (any order), so a pool of REPL processes stays busy and
the caller can record each finished problem at once. The simulated verifier is a deterministic
stand-in for CPU test runs on machines without Lean; it is never the default (the default backend
is `lean`), and every run using it is marked `simulated` in its config, status, logs and
TensorBoard. The Lean REPL pool lives in verification/lean.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from sgsbatch.config.schema import Config
from sgsbatch.verification.verdict import Verdict

log = logging.getLogger(__name__)


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


class SimulatedVerifier:
    """SIMULATED: deterministic stand-in, not Lean (see verification/simulated.py)."""

    def verify_stream(self, jobs: Sequence[ProofJob]) -> Iterator[tuple[ProofJob, Verdict, float]]:
        from sgsbatch.verification.simulated import simulated_verify

        for job in jobs:
            t0 = time.perf_counter()
            verdict = simulated_verify(job.header, job.theorem, job.proof)
            yield job, verdict, time.perf_counter() - t0

    def close(self) -> None:
        return None


def make_verifier(cfg: Config, processes: int) -> Verifier:
    """The configured verifier, with `processes` REPL processes for Lean."""
    if cfg.verification.backend == "simulated":
        log.warning("verification.backend = 'simulated': verdicts come from a SIMULATED verifier, not Lean")
        return SimulatedVerifier()
    from sgsbatch.verification.lean import LeanVerifier  # type: ignore[import-not-found,unused-ignore]

    verifier: Verifier = LeanVerifier(cfg.verification, processes=processes)
    return verifier
