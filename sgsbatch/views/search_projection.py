"""A search round's solve phase projected (`solver.mode = "search"`): GPU-hours and Lean CPU-hours
from per-expansion figures. Pure arithmetic, called by views/projection.py's `project`.

The model (every figure a `[projection]` key; `lean_tactic_s` may come from a passed canary):

* Searches: S = the round's problems x `solver.samples` (one search per sample). Expansions per
  search: E = `search_expansion_share` x the budget (`search.max_expansions`; mcts: the smaller of
  it and `search.mcts_simulations`): searches that find a proof stop early, others run out.
* One expansion = one prompt of `search_prompt_tokens` (theorem, tactics so far, goals) sampling
  `search.width` tactics of `search_tactic_tokens` each (G = width x tactic tokens generated), then
  D = width x `search_distinct_share` distinct tactics applied in Lean at `lean_tactic_s` each.
* GPU side of a task: its share of S x E x G tokens at GPUs x the decode rate at the expansion's
  context (prompt + one tactic; config/simulated_time.decode_rate, as whole proofs). Lean side: its
  share of S x E x D x `lean_tactic_s` core-seconds over `search.lean_processes` processes.
* The critical path of a task: the driver (search/driver.py) sends a wave to the engine, waits for
  every tactic, then sends the wave's tactics to Lean and waits for every result: the two sides
  alternate, never overlap, so a task's time is model load + GPU side + Lean side, and the larger
  side is the one that bounds it (`bound`): more `search.lean_processes` shorten only the Lean
  side, more GPUs (or shards) only the GPU side. The GPUs are held (and idle) through the Lean side
  and the Lean cores through the decoding: GPU-hours = tasks x GPUs x task time; the phase's
  CPU-hours = tasks x `slurm.solve.cpus` x task time, of which Lean is busy S x E x D x
  `lean_tactic_s` (`lean_cpu_hours`).
* Verify checks only the found proofs: S x `search_solved_share`.

Not modelled: prefill (each expansion's prompt is read once for its `width` samples; counted in
`prompt_tokens`, not timed), a wave smaller than the engine's full batch (`search.concurrent` x
width sequences at once may not fill the KV cache: decoding is then slower than the rate),
`search.time_limit_s`, tactic timeouts beyond their share of `lean_tactic_s`, searches spread
unevenly over the Lean processes, and what search trains on (the train phase is projected as
for whole proofs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.config.simulated_time import decode_rate


def expansion_budget(cfg: Config) -> int:
    """The expansions one search may spend: `search.max_expansions` (mcts: also `mcts_simulations`)."""
    s = cfg.search
    return min(s.max_expansions, s.mcts_simulations) if s.algorithm == "mcts" else s.max_expansions


@dataclass(frozen=True)
class SearchPlan:
    """The search phase of a round (module docstring); per-task seconds are one task's share."""

    searches: float
    expansions_per_search: float
    prompt_tokens: float  # per expansion
    generated_tokens: float  # per expansion: width x tactic tokens
    tactics: float  # distinct tactics applied per expansion
    lean_tactic_s: float
    decode_tokens_per_s: float  # one GPU, at the expansion's context
    shards: int
    gpus: int  # per task
    lean_processes: int  # per task
    solved_share: float

    @property
    def expansions(self) -> float:
        return self.searches * self.expansions_per_search

    @property
    def tokens(self) -> float:
        """Generated tokens a round."""
        return self.expansions * self.generated_tokens

    @property
    def lean_calls(self) -> float:
        return self.expansions * self.tactics

    @property
    def lean_cpu_hours(self) -> float:
        """Lean's busy core-hours a round: every tactic's seconds."""
        return self.lean_calls * self.lean_tactic_s / 3600

    @property
    def rate(self) -> float:
        """A task's decode tokens/s (0: no GPU, not projected)."""
        return self.gpus * self.decode_tokens_per_s

    @property
    def gpu_s(self) -> float | None:
        """A task's decoding seconds (None without GPUs)."""
        return self.tokens / self.shards / self.rate if self.rate > 0 else None

    @property
    def lean_s(self) -> float:
        """A task's Lean seconds: its tactics over its Lean processes."""
        return self.lean_calls * self.lean_tactic_s / self.shards / self.lean_processes

    @property
    def busy_s(self) -> float | None:
        """A task's time after its start-up: the GPU and Lean sides one after the other."""
        return None if self.gpu_s is None else self.gpu_s + self.lean_s

    @property
    def bound(self) -> str | None:
        """The side that bounds a task: "GPU" or "Lean" (None without GPUs)."""
        return None if self.gpu_s is None else ("Lean" if self.lean_s > self.gpu_s else "GPU")

    @property
    def found(self) -> float:
        """Found proofs a round: what verify checks."""
        return self.searches * self.solved_share

    def to_json(self) -> dict[str, Any]:
        names = ("searches", "expansions_per_search", "prompt_tokens", "generated_tokens", "tactics", "lean_tactic_s",
                 "decode_tokens_per_s", "shards", "gpus", "lean_processes", "solved_share", "expansions", "tokens",
                 "lean_calls", "lean_cpu_hours", "gpu_s", "lean_s", "bound", "found")
        return {n: getattr(self, n) for n in names}


def search_plan(cfg: Config, searches: float, decode_short: float, decode_long: float,
                lean_tactic_s: float) -> SearchPlan:
    """The search phase of a round of `searches` searches (module docstring)."""
    pj, s = cfg.projection, cfg.search
    res = cfg.phase_resources("solve")
    context = max(1.0, pj.search_prompt_tokens + pj.search_tactic_tokens)
    return SearchPlan(
        searches=searches, expansions_per_search=pj.search_expansion_share * expansion_budget(cfg),
        prompt_tokens=pj.search_prompt_tokens, generated_tokens=s.width * pj.search_tactic_tokens,
        tactics=s.width * pj.search_distinct_share, lean_tactic_s=lean_tactic_s,
        decode_tokens_per_s=decode_rate(decode_short, decode_long, cfg.generation.max_model_len, context),
        shards=cfg.shard_count("solve"), gpus=res.gpus, lean_processes=max(1, s.lean_processes),
        solved_share=pj.search_solved_share)


def _n(x: float) -> str:
    return f"{x / 1e6:.1f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:,.0f}"


def _h(seconds: float) -> str:
    return f"{seconds / 3600:,.2f} h"


def search_text(sp: SearchPlan, gpu_hours: float | None, cpus: int) -> list[str]:
    """The lines `plan` prints under the phases table for a search round."""
    lines = [f"  search: {_n(sp.searches)} searches x {sp.expansions_per_search:,.0f} expansions "
             f"(projection.search_expansion_share of the budget) = {_n(sp.expansions)} expansions; each "
             f"{sp.prompt_tokens:,.0f} prompt + {sp.generated_tokens:,.0f} generated tokens, "
             f"{sp.tactics:.3g} tactics x {sp.lean_tactic_s:.3g} s in Lean"]
    if sp.gpu_s is None:
        lines.append(f"  search: no GPU: not projected; Lean {sp.lean_cpu_hours:,.1f} CPU-hours a round")
        return lines
    lines.append(f"  search: a task = GPU side {_h(sp.gpu_s)} ({_n(sp.rate)} tokens/s on {sp.gpus} GPU) + Lean side "
                 f"{_h(sp.lean_s)} ({sp.lean_processes} processes), one after the other each wave: bound by "
                 f"{sp.bound}; a round: {gpu_hours or 0.0:,.1f} GPU-hours, {sp.lean_cpu_hours:,.1f} Lean CPU-hours "
                 f"(of {cpus} CPUs a task held); verify checks {_n(sp.found)} found proofs "
                 f"(projection.search_solved_share)")
    if sp.bound == "Lean":
        even = math.ceil(sp.lean_processes * sp.lean_s / sp.gpu_s)
        lines.append(f"  search: `--set search.lean_processes={even}` (with slurm.solve.cpus >= it) would bring the Lean "
                     "side down to the GPU side")
    return lines
