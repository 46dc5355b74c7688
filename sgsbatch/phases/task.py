"""What every phase task shares: its context, its slice of the items, its seeds, stopping.

A task is one shard of one phase of one round. It reads the frozen config and the files of
earlier phases and never writes the database (the train job around the train phase does:
scheduling/chain.py).
Item i of a phase belongs to shard i % shards. Every item gets a seed derived from the run
seed, the round, the phase and the item's key, so results do not depend on sharding, batch
composition or on where a requeued task resumed. Not covered: the phases' own logic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from sgsbatch.backends.generation import Generator
from sgsbatch.config.schema import Config
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard

T = TypeVar("T")


REQUEUE_EXIT = 75  # EX_TEMPFAIL: a process that stopped on request (SIGUSR2/SIGTERM): "run me again"
UPSTREAM_EXIT = 76  # the shard this task reads as it is written ran out of retries: "not my failure, don't count it"


class UpstreamFailed(RuntimeError):
    """The shard this task follows while it is written (a streaming verify task's solve shard) ran out
    of retries: nothing more will come until `resume` runs it again."""


class Interrupted(Exception):
    """The task was asked to stop (SIGUSR2: preemption or time limit); its files are consistent."""


def phase_seed(cfg: Config, r: int, phase: str, key: str) -> int:
    """The 31-bit seed of item `key` of round r's `phase` (a task's, or held-out evaluation's: phase "eval")."""
    text = f"{cfg.run.seed}:{r}:{phase}:{key}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & 0x7FFFFFFF


def phase_threads(cfg: Config, phase: str) -> int:
    """The transformers backend's CPU threads in a job of `phase`: generation.threads, else its CPUs."""
    return cfg.generation.threads or cfg.phase_resources(phase).cpus


class EngineLender(Protocol):
    """An engine kept across tasks (a colocated rollout job's: phases/sampling.ResidentEngine), lent to each
    with the weights `weights()` names."""

    def lend(self, cfg: Config, role: str, r: int, phase: str, weights: Callable[[], Path],
             threads: int) -> Generator: ...


@dataclass
class Task:
    cfg: Config
    paths: RunPaths
    round: int
    phase: str
    shard: Shard
    should_stop: Callable[[], bool]
    # called with each optimizer step's number (1-based, per role) after the step: a test fault
    # injector's hook (SGSBATCH_FAULT_INJECT_RANK, scheduling/worker.py); nothing else sets it
    after_step: Callable[[int], None] | None = None
    # the colocated rollout job's engine, kept across its rollout steps (scheduling/colocated.py); None: a task
    # builds its own generator (phases/sampling.generator_for)
    engine: EngineLender | None = None

    @property
    def shards(self) -> int:
        return self.cfg.shard_count(self.phase)

    def mine(self, items: Sequence[T]) -> list[T]:
        return [it for i, it in enumerate(items) if i % self.shards == self.shard.index]

    def seed(self, key: str) -> int:
        return phase_seed(self.cfg, self.round, self.phase, key)

    def threads(self) -> int:
        return phase_threads(self.cfg, self.phase)

    def check_stop(self) -> None:
        if self.should_stop():
            raise Interrupted(f"round {self.round} {self.phase} shard {self.shard.index}: stop requested")
