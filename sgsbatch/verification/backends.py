"""Choosing the verifier a verify task uses: `lean` (the real REPL) or `simulated` (not Lean).

The simulated verifier is a deterministic stand-in for CPU test runs on machines without Lean;
it is never the default (the default backend is `lean`), and every run using it is marked
`simulated` in its config, status, logs and TensorBoard. The Lean REPL pool is its own module.
"""

from __future__ import annotations

import logging
from typing import Protocol

from sgsbatch.config import Config
from sgsbatch.verification.verdict import Verdict

log = logging.getLogger(__name__)


class Verifier(Protocol):
    def verify(self, header: str, theorem: str, proof: str) -> Verdict: ...


class SimulatedVerifier:
    """SIMULATED: deterministic stand-in, not Lean (see verification/simulated.py)."""

    def verify(self, header: str, theorem: str, proof: str) -> Verdict:
        from sgsbatch.verification.simulated import simulated_verify

        return simulated_verify(header, theorem, proof)


def make_verifier(cfg: Config) -> Verifier:
    if cfg.verification.backend == "simulated":
        log.warning("verification.backend = 'simulated': verdicts come from a SIMULATED verifier, not Lean")
        return SimulatedVerifier()
    from sgsbatch.verification.lean import LeanVerifier  # type: ignore[import-not-found,unused-ignore]

    verifier: Verifier = LeanVerifier(cfg.verification)
    return verifier
