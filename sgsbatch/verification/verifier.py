"""Choosing the verifier a verify task uses: `lean` (the real REPL pool) or `simulated` (not Lean).

Both speak one interface (verdict.Verifier): `verify_stream(jobs)` checks a batch of proofs and
yields `(job, verdict, seconds)` as they complete (any order), so a pool of REPL processes stays
busy and the caller can record each finished problem at once. The simulated verifier is a
deterministic stand-in for CPU test runs on machines without Lean; it is never the default (the
default backend is `lean`), and every run using it is marked `simulated` in its config, status,
logs and TensorBoard. The Lean REPL pool lives in verification/lean.py.
"""

from __future__ import annotations

import logging

from sgsbatch.config.schema import Config
from sgsbatch.verification.verdict import Verifier

log = logging.getLogger(__name__)


def make_verifier(cfg: Config, processes: int) -> Verifier:
    """The configured verifier, with `processes` REPL processes for Lean."""
    if cfg.verification.backend == "simulated":
        log.warning("verification.backend = 'simulated': verdicts come from a SIMULATED verifier, not Lean")
        from sgsbatch.config.simulated_time import simulated_time
        from sgsbatch.verification.simulated import SimulatedVerifier

        return SimulatedVerifier(simulated_time(cfg), processes)
    from sgsbatch.verification.lean import LeanVerifier  # type: ignore[import-not-found,unused-ignore]

    verifier: Verifier = LeanVerifier(cfg.verification, processes=processes)
    return verifier
