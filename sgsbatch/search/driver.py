"""Many searches at once in one task, their expansions sent to the engine together in waves.

`run_searches` keeps up to `search.concurrent` searches live. Each wave: every live search names
the node it expands next (search/tree.py); one engine call samples `search.width` tactics for all
of them (every request added, the engine stepped until all are back: one call per wave across the
task's searches, never one per expansion); the distinct tactics of all expansions go to the
environment in one `apply_many` (parallel across its Lean processes); the trees grow. A search ends
when it finds a proof, has nothing left to expand, spends `search.max_expansions` (MCTS: also
`mcts_simulations`) or `search.time_limit_s` of wall clock since it started (0 = no limit; a time
limit makes a search depend on the machine's speed, so reproducible runs set it to 0 and bound
expansions). Finished searches are handed to `on_done` at once (the phase writes them atomically).

Each expansion's request is seeded by (search seed, expansion index), so a search's tree does not
depend on which other searches share its waves or on where a requeued task resumed. A stop request
(`check_stop` raises) drops only the live searches. Not covered: what is written (phases/search.py).
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sgsbatch.backends.generation import Generation, Generator, Request, derive_seed
from sgsbatch.config.schema import SearchConfig
from sgsbatch.search.environment import Apply, Start, TacticEnvironment
from sgsbatch.search.policy import prompt_messages, tactic_logprob, tactic_of
from sgsbatch.search.tree import Edge, Node, Search

Step = tuple[Any, Any, Any]  # (prompt ids, tactic token ids, tactic logprobs): int32/int32/float32 arrays


@dataclass(frozen=True)
class SearchJob:
    """One search: `key` = "<problem id>#<index>"; `theorem` ends in `:= by` (the dataset's statement)."""

    key: str
    problem_id: str
    index: int
    header: str
    theorem: str
    seed: int


@dataclass
class Outcome:
    """A finished search: the tactics of its proof (empty when none was found) and what it cost."""

    job: SearchJob
    found: bool
    tactics: list[str]
    stop: str  # found | exhausted | expansions | time | start_failed
    stats: dict[str, float]
    steps: list[Step] = field(default_factory=list)  # along the proof: what trains the Solver
    goals: list[str] = field(default_factory=list)  # the goals each tactic of the proof was applied to


@dataclass
class WaveStats:
    """What one task's searches cost: engine calls (waves) and Lean calls."""

    waves: int = 0
    requests: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    generate_s: float = 0.0
    lean_calls: int = 0
    lean_s: float = 0.0
    malformed: int = 0
    max_wave: int = 0

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {k: round(v, 3) if isinstance(v, float) else v for k, v in vars(self).items()}
        out["tokens_per_call"] = round(self.generated_tokens / self.waves, 1) if self.waves else 0.0
        out["calls_per_s"] = round(self.waves / self.generate_s, 3) if self.generate_s > 0 else 0.0
        return out


@dataclass
class _Live:
    job: SearchJob
    search: Search
    started: float
    generated_tokens: int = 0
    lean_s: float = 0.0
    malformed: int = 0


def generate_wave(gen: Generator, requests: Sequence[Request]) -> dict[str, Generation]:
    """Every request of a wave through the engine at once; their generations by request key."""
    for req in requests:
        gen.add(req)
    out: dict[str, Generation] = {}
    while len(out) < len(requests):
        for req, g in gen.step():
            out[req.key] = g
    return out


def run_searches(jobs: Sequence[SearchJob], env: TacticEnvironment, gen: Generator, cfg: SearchConfig, *,
                 on_done: Callable[[Outcome], None], check_stop: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> WaveStats:
    """Run `jobs` (see the module docstring); returns the task's wave statistics."""
    waves = _Waves(jobs, env, gen, cfg, on_done, clock)
    while waves.pending or waves.live:
        check_stop()
        waves.admit()
        wave = waves.next_wave()
        if wave:
            waves.expand(wave)
    return waves.stats


class _Waves:
    """The searches of one task: those waiting, those live, and the statistics of their waves."""

    def __init__(self, jobs: Sequence[SearchJob], env: TacticEnvironment, gen: Generator, cfg: SearchConfig,
                 on_done: Callable[[Outcome], None], clock: Callable[[], float]) -> None:
        self.env, self.gen, self.cfg, self.on_done, self.clock = env, gen, cfg, on_done, clock
        self.stats = WaveStats()
        self.pending = deque(jobs)
        self.live: dict[str, _Live] = {}

    def end(self, lv: _Live, stop: str) -> None:
        del self.live[lv.job.key]
        self.env.finish(lv.job.key)
        self.on_done(_outcome(lv, stop, self.clock()))

    def admit(self) -> None:
        """Start searches from the queue up to `concurrent` live ones (their root proof states in one call)."""
        admit = [self.pending.popleft() for _ in range(min(len(self.pending), self.cfg.concurrent - len(self.live)))]
        if not admit:
            return
        roots = self.env.start_many([Start(j.key, j.header, j.theorem.rstrip() + " sorry") for j in admit])
        for job, root in zip(admit, roots, strict=True):
            lv = _Live(job, Search(root.state, root.goals, self.cfg), self.clock())
            self.live[job.key] = lv
            if not root.ok:
                self.end(lv, f"start_failed: {root.error}")

    def next_wave(self) -> list[tuple[_Live, Node]]:
        """Each live search's next node to expand, in key order; a search over its budget, out of time or
        with nothing left to expand ends here."""
        wave: list[tuple[_Live, Node]] = []
        for key in sorted(self.live):
            lv = self.live[key]
            if lv.search.over():
                self.end(lv, "expansions")
                continue
            if self.cfg.time_limit_s and self.clock() - lv.started >= self.cfg.time_limit_s:
                self.end(lv, "time")
                continue
            node = lv.search.next_node()
            if node is None:
                self.end(lv, "exhausted")
                continue
            wave.append((lv, node))
        return wave

    def expand(self, wave: list[tuple[_Live, Node]]) -> None:
        """One engine call for the wave, every distinct tactic to Lean in one call, the nodes expanded."""
        cfg, stats = self.cfg, self.stats
        requests = [Request(f"{lv.job.key}/{lv.search.stats.expansions}",
                            prompt_messages(lv.job.theorem, _tactics(node), node.goals, cfg.max_goal_chars),
                            cfg.width, derive_seed(lv.job.seed, lv.search.stats.expansions), cfg.tactic_max_tokens,
                            cfg.temperature) for lv, node in wave]
        t0 = time.perf_counter()
        outs = generate_wave(self.gen, requests)
        stats.generate_s += time.perf_counter() - t0
        stats.waves += 1
        stats.requests += len(requests)
        stats.max_wave = max(stats.max_wave, len(requests))
        expansions: list[tuple[_Live, Node, list[Edge]]] = []
        calls: list[Apply] = []
        for (lv, node), req in zip(wave, requests, strict=True):
            expansions.append((lv, node, self._edges(lv, node, outs[req.key], calls)))
        results = iter(self.env.apply_many(calls))
        stats.lean_calls += len(calls)
        for lv, node, edges in expansions:
            for edge in edges:
                edge.result = next(results)
                lv.lean_s += edge.result.lean_s
                stats.lean_s += edge.result.lean_s
            lv.search.expand(node, edges)
            if lv.search.found is not None:
                self.end(lv, "found")

    def _edges(self, lv: _Live, node: Node, out: Generation, calls: list[Apply]) -> list[Edge]:
        """The node's distinct tactics from its samples (a malformed reply counted), each one Lean call added
        to `calls`."""
        self.stats.prompt_tokens += len(out.prompt_ids)
        edges: dict[str, Edge] = {}
        prompt = array("i", out.prompt_ids)
        so_far = _tactics(node)
        for smp in out.samples:
            lv.generated_tokens += len(smp.token_ids)
            self.stats.generated_tokens += len(smp.token_ids)
            tactic = tactic_of(smp.text, so_far)
            if tactic is None:
                lv.malformed += 1
                self.stats.malformed += 1
            elif tactic in edges:
                edges[tactic].count += 1
            else:
                edges[tactic] = Edge(tactic, tactic_logprob(smp),
                                     tokens=(prompt, array("i", smp.token_ids), array("f", smp.logprobs)))
                calls.append(Apply(lv.job.key, node.state if node.state is not None else -1, tactic))
        return list(edges.values())


def _tactics(node: Node) -> list[str]:
    return [n.tactic for n in node.path() if n.tactic is not None]


def _outcome(lv: _Live, stop: str, now: float) -> Outcome:
    s = lv.search
    path = s.found.path() if s.found is not None else []
    stats: dict[str, float] = {**s.stats.as_dict(), "depth": len(path), "generated_tokens": lv.generated_tokens,
                               "lean_s": round(lv.lean_s, 3), "wall_s": round(now - lv.started, 3),
                               "malformed": lv.malformed}
    return Outcome(lv.job, s.found is not None, [n.tactic for n in path if n.tactic is not None], stop, stats,
                   steps=[n.tokens for n in path],
                   goals=["\n\n".join(n.parent.goals) for n in path if n.parent is not None])
