"""The `lean` tactic environment: the REPL's tactic mode in verify's sandbox, `search.lean_processes` processes.

Covered: `search.lean_processes` REPL processes started exactly as the verify pool starts them
(`pool_settings` of verification/lean.py and a `ReplPool`'s slots: the same sandbox, process
filter, rlimits, cgroups, scratch, header elaborated once per process); each search (`key`) is
pinned to one process (one without searches of another header first, then the least loaded;
searches of several headers on one process restart it at each switch) and
`start_many`/`apply_many` run each process's calls in order in that process's own long-lived
thread, the processes in parallel. Every tactic first passes the verifier's static checks (checks.py
`check_proof`): a refused one is `refused: <reason>` and never reaches Lean; a statement or
header the checks refuse cannot start. A tactic gets `search.tactic_timeout_s` (a slower one is
the failed edge `timeout` and its process is killed); starting a search (its statement, `:= by
sorry`) gets `verification.timeout_s`. After a process dies (timeout, crash, a limit, another
header taking its slot) the proof states it held are rebuilt lazily: each state keeps its parent
and tactic (the path from the root), and a call naming a state of a dead process replays the
path, from the statement, on the new one (a replay that no longer works is the failed edge
`replay_failed: ...`). `lean_s` is the wall clock of the call, restarts and replays included.

Not covered: the verdict (leanprover-community/repl issue #44: tactic mode accepts what the kernel may not, so a found
proof goes through the verify phase), restarting a process whose memory grows with the states it
keeps (the REPL never forgets one; `verification.memory_limit_mb` kills it, and its searches are
replayed), and the search itself (search/tree.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sgsbatch.config.schema import SearchConfig, VerificationConfig
from sgsbatch.search.environment import Apply, Start, TacticResult
from sgsbatch.verification import tactic_mode as T
from sgsbatch.verification.checks import check_header, check_proof, check_statement
from sgsbatch.verification.lean import describe, option_bounds, pool_settings
from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.repl import ReplProcess, ReplSystemError, ReplTimeout

log = logging.getLogger(__name__)

TIMEOUT = "timeout"
UNKNOWN_STATE = T.UNKNOWN_PROOF_STATE
_Call = TypeVar("_Call", Start, Apply)


@dataclass
class _Node:
    """A proof state of a search: its path (parent, tactic) and where it lives now (`repl`, `ps`)."""

    parent: int | None
    tactic: str | None
    repl: ReplProcess | None = None
    ps: int | None = None


@dataclass
class _Search:
    key: str
    header: str
    theorem: str
    process: int
    nodes: dict[int, _Node] = field(default_factory=dict)
    next_id: int = 0


class _Replay(Exception):
    """A state could not be rebuilt on a fresh process: the call's failed edge says why."""


class LeanTacticEnvironment:
    """`TacticEnvironment` over real Lean REPLs (see the module docstring)."""

    name = "lean"

    def __init__(self, vcfg: VerificationConfig, scfg: SearchConfig) -> None:
        if scfg.lean_processes < 1:
            raise ValueError(f"search.lean_processes must be >= 1, got {scfg.lean_processes}")
        if scfg.tactic_timeout_s <= 0:
            raise ValueError(f"search.tactic_timeout_s must be > 0, got {scfg.tactic_timeout_s}")
        self.bounds = option_bounds(vcfg)
        self.settings = pool_settings(vcfg, scfg.lean_processes, kernel_recheck=False)
        self.tactic_timeout_s = scfg.tactic_timeout_s
        self.start_timeout_s = vcfg.timeout_s
        self.pool = ReplPool(self.settings)
        self._searches: dict[str, _Search] = {}
        self._load = [0] * scfg.lean_processes
        # one long-lived thread per process: bwrap's --die-with-parent (PR_SET_PDEATHSIG) ends a
        # process when the thread that started it exits, so a process's thread must outlive it
        self._workers = [ThreadPoolExecutor(1, thread_name_prefix=f"lean-env-{i}") for i in range(scfg.lean_processes)]
        self._closed = False
        self.restarts = 0  # processes killed after a timeout or a system error
        self.replayed = 0  # tactics re-run to rebuild states of a dead process
        log.info("tactic environment lean: %d processes, tactic timeout %g s; limits per process: %s",
                 scfg.lean_processes, self.tactic_timeout_s, describe(self.settings))

    # ------------------------------------------------------------------ the interface
    def start_many(self, starts: Sequence[Start]) -> list[TacticResult]:
        for s in starts:
            if s.key in self._searches:
                raise ValueError(f"search {s.key!r} is already started: finish() it first")
            self._searches[s.key] = _Search(s.key, s.header, s.theorem, self._pin(s.header))
            self._load[self._searches[s.key].process] += 1
        return self._parallel(starts, self._start_one)

    def apply_many(self, calls: Sequence[Apply]) -> list[TacticResult]:
        return self._parallel(calls, self._apply_one)

    def finish(self, key: str) -> None:
        search = self._searches.pop(key, None)
        if search is not None:
            self._load[search.process] -= 1

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._searches.clear()
        self.pool.close()
        for worker in self._workers:
            worker.shutdown(wait=True)
        log.info("tactic environment lean closed: %d restarts, %d tactics replayed", self.restarts, self.replayed)

    # ------------------------------------------------------------------ scheduling
    def _pin(self, header: str) -> int:
        """A process none of whose searches has another header (a header change restarts it), then the
        least loaded."""
        others = [any(s.header != header for s in self._searches.values() if s.process == i)
                  for i in range(len(self._load))]
        return min(range(len(self._load)), key=lambda i: (others[i], self._load[i], i))

    def _process_of(self, call: Start | Apply) -> int:
        search = self._searches.get(call.key)
        return search.process if search is not None else 0

    def _parallel(self, calls: Sequence[_Call], one: Callable[[_Call], TacticResult]) -> list[TacticResult]:
        """`one(call)` for every call, in order per process, one thread per process."""
        if self._closed:
            raise RuntimeError("the lean tactic environment is closed")
        results: list[TacticResult | None] = [None] * len(calls)
        groups: dict[int, list[int]] = {}
        for i, call in enumerate(calls):
            groups.setdefault(self._process_of(call), []).append(i)

        def run(indices: list[int]) -> None:
            for i in indices:
                t0 = time.perf_counter()
                try:
                    result = one(calls[i])
                except Exception as e:  # a bug here must not lose the wave
                    log.exception("internal error in the lean tactic environment on %s", calls[i].key)
                    result = TacticResult(False, error=f"internal_error: {type(e).__name__}: {e}")
                refused = result.error is not None and result.error.startswith("refused:")
                results[i] = replace(result, lean_s=0.0 if refused else time.perf_counter() - t0)

        for future in [self._workers[p].submit(run, ix) for p, ix in groups.items()]:
            future.result()
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------ one call
    def _start_one(self, start: Start) -> TacticResult:
        search = self._searches[start.key]
        body = start.theorem.rstrip()
        if not body.endswith("sorry"):
            return TacticResult(False, error="refused: bad_statement (the theorem must end in `:= by sorry`)")
        rejection = check_header(start.header) or check_statement(body[: -len("sorry")].rstrip(), self.bounds)
        if rejection is not None:
            return TacticResult(False, error=f"refused: {rejection.reason}")
        search.nodes[0] = _Node(None, None)
        search.next_id = 1
        try:
            goals = self._live(search, 0)
        except _Replay as e:
            del search.nodes[0]
            return TacticResult(False, error=str(e))
        return TacticResult(True, 0, goals)

    def _apply_one(self, call: Apply) -> TacticResult:
        search = self._searches.get(call.key)
        node = search.nodes.get(call.state) if search is not None else None
        if search is None or node is None:
            return TacticResult(False, error=UNKNOWN_STATE)
        rejection = check_proof(call.tactic, self.bounds)
        if rejection is not None:
            return TacticResult(False, error=f"refused: {rejection.reason}")
        try:
            self._live(search, call.state)
            reply = self._tactic(search, node, call.tactic)
        except _Replay as e:
            return TacticResult(False, error=str(e))
        if not reply.ok:
            return TacticResult(False, error=reply.error)
        new = search.next_id
        search.next_id += 1
        search.nodes[new] = _Node(call.state, call.tactic, node.repl, reply.state)
        return TacticResult(True, new, reply.goals)

    def _tactic(self, search: _Search, node: _Node, tactic: str) -> T.TacticReply:
        """`tactic` on `node` (live); a timeout or a system error kills the process (a failed edge)."""
        assert node.repl is not None and node.ps is not None
        try:
            return T.apply_tactic(node.repl, tactic, node.ps, self.tactic_timeout_s)
        except ReplTimeout:
            self._restart(search.process, f"{search.key}: tactic timed out after {self.tactic_timeout_s:g} s")
            return T.TacticReply(None, error=TIMEOUT)
        except ReplSystemError as e:
            self._restart(search.process, f"{search.key}: {e}")
            return T.TacticReply(None, error=f"repl_{e.kind}")

    def _restart(self, process: int, why: str) -> None:
        log.warning("restarting lean tactic process %d (its searches' states are replayed on use): %s", process, why)
        self.restarts += 1
        self.pool.reset_slot(process)

    def _live(self, search: _Search, state: int) -> tuple[str, ...]:
        """Make `state` live on the search's process, replaying its path from the root where its
        process died; returns the root's goals when `state` is the root (else ())."""
        chain: list[int] = []
        current: int | None = state
        while current is not None:
            node = search.nodes[current]
            if node.repl is not None and node.repl.alive() and node.repl is self.pool.current_repl(search.process):
                break
            chain.append(current)
            current = node.parent
        goals: tuple[str, ...] = ()
        for nid in reversed(chain):
            node = search.nodes[nid]
            if node.parent is None:
                goals = self._root(search, node)
                continue
            parent = search.nodes[node.parent]
            assert node.tactic is not None
            node.repl, node.ps = parent.repl, parent.ps
            self.replayed += 1
            reply = self._tactic(search, node, node.tactic)
            if not reply.ok:
                node.repl, node.ps = None, None
                raise _Replay(f"replay_failed: `{node.tactic[:80]}` on a fresh process: {reply.error}")
            node.ps = reply.state
        return goals

    def _root(self, search: _Search, node: _Node) -> tuple[str, ...]:
        """Elaborate the search's statement on its process (started with its header if needed)."""
        try:
            got = self.pool.slot_repl(search.process, search.header)
        except ReplSystemError as e:  # the program cannot start, or the header timed out
            self.pool.reset_slot(search.process)
            raise _Replay(f"repl_{e.kind}: {e.detail}"[: T.ERROR_CHARS]) from e
        if not isinstance(got, tuple):
            raise _Replay(f"{got.reason}: " + "; ".join(got.messages)[: T.ERROR_CHARS])
        repl, env = got
        try:
            reply = T.start(repl, search.theorem, env, self.start_timeout_s)
        except ReplTimeout as e:
            self._restart(search.process, f"{search.key}: the statement timed out")
            raise _Replay(TIMEOUT) from e
        except ReplSystemError as e:
            self._restart(search.process, f"{search.key}: {e}")
            raise _Replay(f"repl_{e.kind}") from e
        if not reply.ok:
            raise _Replay(reply.error or "start failed")
        node.repl, node.ps = repl, reply.state
        return reply.goals
