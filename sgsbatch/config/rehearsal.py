"""Rehearsal mode (`launch CONFIG --rehearse`): a config exactly as written, with SIMULATED compute.

Keeps every key of the config (rounds, shard counts, targets, partitions, accounts, QOS, gres,
time limits, array sizes, dependencies, models named) and switches in only the SIMULATED
generation backend (backends/simulated_generation.py), the SIMULATED verifier
(verification/simulated.py), the SIMULATED trainer (backends/simulated_trainer.py) and, for a
search Solver, the SIMULATED tactic environment (search/simulated.py). The run
is named `<name>-rehearsal` unless `--set run.name=...` says otherwise, and `run.rehearsal = true`
makes status, logs and TensorBoard say REHEARSAL. A rehearsal proves the scheduling, state and
storage of a run at its real shape; it proves nothing about models, Lean or training.

Refused: `--rehearse` with `--smoke` (one replaces scale, the other keeps it), and `--set` of a
key the rehearsal itself sets (the backends and `run.rehearsal`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

from sgsbatch.config.loading import parse_override
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError

log = logging.getLogger(__name__)
REHEARSAL_SUFFIX = "-rehearsal"
SET_BY_REHEARSAL = ("generation.backend", "verification.backend", "train.backend", "search.environment",
                    "run.rehearsal")


def rehearsal_config(cfg: Config, config_path: Path, overrides: Sequence[str]) -> Config:
    """`cfg` with the SIMULATED backends switched in and the rehearsal name and flag; nothing else changed."""
    explicit = {parse_override(o)[0] for o in overrides}
    for key in SET_BY_REHEARSAL:
        if key in explicit:
            raise ConfigError("--set", key, "is set by --rehearse (SIMULATED generation, verifier and trainer); "
                                            "drop this --set, or launch without --rehearse")
    log.warning("REHEARSAL: generation, verifier and trainer are SIMULATED; nothing here is a model or Lean")
    r = dataclasses.replace
    name = cfg.run.name if "run.name" in explicit else cfg.run.name + REHEARSAL_SUFFIX
    return r(cfg,
             run=r(cfg.run, name=name, rehearsal=True),
             generation=r(cfg.generation, backend="simulated"),
             verification=r(cfg.verification, backend="simulated"),
             train=r(cfg.train, backend="simulated"),
             search=r(cfg.search, environment="simulated"))
