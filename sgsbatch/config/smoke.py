"""Smoke mode (`launch CONFIG --smoke`): any config's algorithm at tiny scale on CPU.

Keeps every algorithm key of the config (objective, bands, samples, conditioning, guide on or
off, ...) and replaces only scale and hardware: `tiny-random` models, the transformers backend,
a handful of targets, 2 rounds and the local executor unless `--set` says otherwise, one CPU per
task (each phase keeps its Slurm account, QOS and setup lines: the site's), short generations (a
search Solver: one Lean process a task, at most 4 tactics an expansion and 12 expansions a search). The verifier stays the config's: a Lean config where the REPL's launcher
(`lake`) is not on PATH is refused, never switched to the SIMULATED stand-in on its own; say so
to smoke-test without Lean (`--smoke --set verification.backend=simulated`: the SIMULATED
verifier, said loudly in the log, status and TensorBoard). The run name gets `-smoke`.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path

from sgsbatch.checkout import embedded_tiny_targets
from sgsbatch.config.loading import is_path_like, parse_override
from sgsbatch.config.schema import SLURM_TABLES, TINY_RANDOM, Config, SlurmConfig, SlurmPhaseConfig
from sgsbatch.errors import ConfigError

SMOKE_TARGETS = 12  # the embedded set whole: smoke runs share tiny.toml's tiny-random models (init cache key)
SMOKE_MAX_TOKENS = 96
SMOKE_EXPANSIONS = 12  # a search Solver's budget per search (solver.mode = "search")
SMOKE_GEN_BATCHES = 2  # DAPO: generation batches a rollout step may take (the smoke run's 2 rounds)


def smoke_config(cfg: Config, config_path: Path, overrides: Sequence[str]) -> Config:
    explicit = {parse_override(o)[0] for o in overrides}

    r = dataclasses.replace
    source = cfg.data.source
    if not (is_path_like(source) and Path(source).exists()):
        source = str(embedded_tiny_targets())  # a hub dataset cannot be assumed reachable from a smoke test
    verifier = cfg.verification.backend
    program = cfg.verification.repl_command[0] if cfg.verification.repl_command else ""
    if verifier == "lean" and program and "/" not in program and shutil.which(program) is None:
        raise ConfigError("--smoke", "verification.backend",
                          f"is \"lean\", but `{program}` (verification.repl_command) is not on PATH, so this smoke "
                          "run cannot verify with Lean, and it does not switch to a stand-in on its own: install "
                          "Lean (`./setup.sh --lean`), or smoke-test with the SIMULATED verifier by saying so: "
                          "--smoke --set verification.backend=simulated")
    if (cfg.solver.mode == "search" and cfg.search.environment == "lean" and program and "/" not in program
            and shutil.which(program) is None):
        raise ConfigError("--smoke", "search.environment",
                          f"is \"lean\" (the search Solver applies its tactics in the REPL), but `{program}` "
                          "(verification.repl_command) is not on PATH: install Lean (`./setup.sh --lean`), or "
                          "smoke-test on SIMULATED proof states by saying so: --smoke --set "
                          "search.environment=simulated")

    def phase(name: str) -> SlurmPhaseConfig:  # small, but with the site's account, QOS and job-script setup
        own = cfg.phase_resources(name)
        return SlurmPhaseConfig(cpus=1, mem="3G", time_min=30, account=own.account, qos=own.qos, setup=own.setup)

    return r(
        cfg,
        run=r(cfg.run, name=cfg.run.name if "run.name" in explicit else cfg.run.name + "-smoke",
              rounds=cfg.run.rounds if "run.rounds" in explicit else 2,
              executor=cfg.run.executor if "run.executor" in explicit else "local", smoke=True),
        data=r(cfg.data, source=source, format="auto", limit=SMOKE_TARGETS),
        models=r(cfg.models, solver=TINY_RANDOM, conjecturer=TINY_RANDOM, guide=TINY_RANDOM),
        generation=r(cfg.generation, backend="transformers", threads=1, max_in_flight=4),
        solver=r(cfg.solver, max_tokens=SMOKE_MAX_TOKENS, batch_size=min(cfg.solver.batch_size, 8),
                 # DAPO's re-sampling within the smoke run's rounds: its last round trains what it has
                 rollout_max_gen_batches=(cfg.solver.rollout_max_gen_batches
                                          if "solver.rollout_max_gen_batches" in explicit
                                          else min(cfg.solver.rollout_max_gen_batches, SMOKE_GEN_BATCHES))),
        conjecturer=r(cfg.conjecturer, max_tokens=SMOKE_MAX_TOKENS, batch_size=min(cfg.conjecturer.batch_size, 8)),
        guide=r(cfg.guide, max_tokens=SMOKE_MAX_TOKENS),  # the reference tags take ~50 tiny tokens
        search=r(cfg.search, lean_processes=1, concurrent=min(cfg.search.concurrent, 8),
                 width=min(cfg.search.width, 4), max_expansions=min(cfg.search.max_expansions, SMOKE_EXPANSIONS),
                 mcts_simulations=min(cfg.search.mcts_simulations, SMOKE_EXPANSIONS),
                 tactic_max_tokens=min(cfg.search.tactic_max_tokens, 48)),
        train=r(cfg.train, bf16=False, gradient_checkpointing=False, zero_stage=0),
        verification=r(cfg.verification, backend=verifier),
        shards=r(cfg.shards, conjecture=2, solve=2, guide=1, verify=0),
        slurm=SlurmConfig(**{p: phase(p) for p in SLURM_TABLES}, mail_user=cfg.slurm.mail_user,  # the site's mail
                          mail_type=cfg.slurm.mail_type, mail_type_failure=cfg.slurm.mail_type_failure),
    )
