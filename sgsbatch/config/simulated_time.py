"""Simulated time: how long the SIMULATED components of a rehearsal sleep, from the `[projection]` figures.

One place for the throughput model that `sgsbatch plan` projects (views/projection.py) and that a
rehearsal with `projection.simulated_time_scale > 0` sleeps through (`launch --rehearse`):

* decode: one GPU's tokens/s at a context of L tokens is `decode_rate` = min(short figure, long
  figure x `generation.max_model_len` / L) (the KV cache bounds the batch, so throughput falls as
  1 / context); a task decodes at its GPUs x that (a GPU-less task, as in bench/rehearsal.toml,
  stands for one GPU). A SIMULATED engine step of samples i (n_i tokens at final context L_i =
  prompt + n_i) takes sum n_i / rate(L_i).
* model load: `model_load_s` when a generating task's engine starts and per trained role.
* Lean: 1 / `lean_proofs_per_s` per proof and core, the task's cores in parallel; `repl_start_s`
  when the cores' REPLs start, again every `verification.max_proofs_per_process` proofs a core.
* training: tokens (prompt + completion) / (GPUs x nodes x `train_tokens_per_s`), then
  `checkpoint_write_s` per role written.

Each figure's seconds are multiplied by the scale (1 = real time, 0.01 = 100x faster than real)
before sleeping; 0 sleeps nothing (the default: tests and plain rehearsals stay fast).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from sgsbatch.config.schema import Config

log = logging.getLogger(__name__)


def decode_rate(short: float, long: float, max_model_len: int, context: float) -> float:
    """One GPU's decode tokens/s at `context` tokens: min(short, long x max_model_len / context)."""
    return min(short, long * max_model_len / max(1.0, context))


@dataclass(frozen=True)
class SimulatedTime:
    """The seconds a SIMULATED component sleeps (module docstring), already times `scale`."""

    scale: float
    decode_short: float
    decode_long: float
    max_model_len: int
    lean_proofs_per_s: float
    repl_start_s: float
    max_proofs_per_process: int
    model_load_s: float
    train_tokens_per_s: float
    checkpoint_write_s: float

    def decode_s(self, samples: Iterable[tuple[int, int]], gpus: int) -> float:
        """Decode seconds of (prompt tokens, generated tokens) samples on `gpus` GPUs (0: one)."""
        per_gpu = sum(n / decode_rate(self.decode_short, self.decode_long, self.max_model_len, p + n)
                      for p, n in samples)
        return self.scale * per_gpu / max(1, gpus)

    def load_s(self) -> float:
        return self.scale * self.model_load_s

    def proof_s(self, cpus: int) -> float:
        """One proof's share of the task's time: its cores check `cpus` proofs at once."""
        return self.scale / self.lean_proofs_per_s / max(1, cpus)

    def repl_s(self) -> float:
        return self.scale * self.repl_start_s

    def train_s(self, tokens: int, gpus: int) -> float:
        """Training seconds of `tokens` on `gpus` GPUs in all (0: one)."""
        return self.scale * tokens / self.train_tokens_per_s / max(1, gpus)

    def checkpoint_s(self) -> float:
        return self.scale * self.checkpoint_write_s


def simulated_time(cfg: Config) -> SimulatedTime | None:
    """The sleeps of `cfg`'s SIMULATED components, or None (`projection.simulated_time_scale` = 0)."""
    pj = cfg.projection
    if pj.simulated_time_scale <= 0:
        return None
    return SimulatedTime(pj.simulated_time_scale, pj.decode_short_tokens_per_s, pj.decode_long_tokens_per_s,
                         cfg.generation.max_model_len, pj.lean_proofs_per_s, pj.repl_start_s,
                         cfg.verification.max_proofs_per_process, pj.model_load_s, pj.train_tokens_per_s,
                         pj.checkpoint_write_s)


def sleep(seconds: float, what: str) -> None:
    """Sleep `seconds` of SIMULATED time (logged at debug level: a step sleeps often)."""
    if seconds > 0:
        log.debug("SIMULATED time: %.3f s of %s", seconds, what)
        time.sleep(seconds)
