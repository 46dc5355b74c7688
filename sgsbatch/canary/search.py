"""The canary's search check (`solver.mode = "search"`): a known proof replayed tactic by tactic.

Runs in the solve job (the search task's node: its Lean processes run there, next to the GPUs)
through the configured tactic environment (`search.environment`, phases/search.environment_for):
the statement of cases.SEARCH_PROOF is started (ending in `sorry`), each of its tactics applied to
the proof state the one before left, and the last must leave no goal. Figure: the start's seconds
(the header elaborated) and the median and largest seconds per tactic (the wall clock of each
`apply_many` call: the environment's own overhead included, as a search pays it); with the real
Lean environment the median is the `lean_tactic_s` measure `plan` reads (views/plan.py: a floor,
these tactics being easy ones). A SIMULATED environment has no Lean to check; a replay environment
answers only recorded transcripts (tests pass their own case) and measures nothing.

Not covered: the static checks' refusals and the per-tactic timeout in tactic mode (the
verification check covers them for whole proofs), Lean's speed on a search's hard or failing
tactics, several processes at once.
"""

from __future__ import annotations

import statistics
import time

from sgsbatch.canary.cases import SEARCH_PROOF, SearchCase
from sgsbatch.canary.rows import Row, failed
from sgsbatch.config.schema import Config
from sgsbatch.search.environment import Apply, Start

C = "search"
CHECK = "known proof tactic by tactic"
FIX = ("search.environment / search.tactic_timeout_s, and verification.* on the solve nodes (./setup.sh --lean "
       "builds the Lean project; the search task runs Lean where it runs the Solver)")


def check_search(cfg: Config, case: SearchCase = SEARCH_PROOF) -> list[Row]:
    if cfg.search.environment == "simulated":
        return [Row(C, "tactic environment", True, "search.environment = \"simulated\": SIMULATED, no Lean to check")]
    from sgsbatch.phases.search import environment_for

    try:
        env = environment_for(cfg)
    except (ValueError, OSError, ImportError) as e:  # the environment cannot be built here
        return [failed(C, "tactic environment starts", e, FIX)]
    key = f"canary:{case.key}"
    try:
        t0 = time.perf_counter()
        root = env.start_many([Start(key, case.header, case.theorem.rstrip() + " sorry")])[0]
        start_s = time.perf_counter() - t0
        if not root.ok or root.state is None:
            return [Row(C, CHECK, False, f"{case.key}: the statement did not start in {env.name}: {root.error}", FIX)]
        state, times, goals = root.state, [], root.goals
        for i, tactic in enumerate(case.tactics, 1):
            t0 = time.perf_counter()
            got = env.apply_many([Apply(key, state, tactic)])[0]
            times.append(time.perf_counter() - t0)
            if not got.ok or got.state is None:
                return [Row(C, CHECK, False, f"{case.key}: tactic {i} of {len(case.tactics)} `{tactic}` failed in "
                                             f"{env.name}: {got.error}", FIX)]
            state, goals = got.state, got.goals
        env.finish(key)
    finally:
        env.close()
    median = statistics.median(times)
    figure = (f"{case.key}: {len(case.tactics)} tactics through {env.name}, start {start_s:.2f} s, tactic median "
              f"{median:.3f} s (max {max(times):.3f} s)")
    if goals:
        return [Row(C, CHECK, False, f"{figure}; goals left: {' | '.join(goals)[:200]}", FIX)]
    return [Row(C, CHECK, True, figure + "; proof complete",
                measures={"lean_tactic_s": median} if env.name == "lean" else {})]
