"""`search/*`: what a round's tactic-level searches did and cost (solver.mode = "search").

From the solve samples joined with their verdicts (each sample one search, its `search` statistics
written by phases/search.py) and the solve tasks' completion markers (`search`: the task's waves,
WaveStats in search/driver.py). `lean_cpu_s` is the Lean seconds the environment measured per tactic
(wall clock of each call, the CPU a Lean process spends on it); `tokens_per_call` and `calls_per_s`
are over the round's engine calls. A requeued task's marker counts its last attempt only. Not
covered: the cost of verifying the found proofs (verify/*).
"""

from __future__ import annotations

from sgsbatch.config.schema import Config
from sgsbatch.round import metrics as M
from sgsbatch.round.results import ProblemResult
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import shards
from sgsbatch.verification.verdict import VERIFIED


def search_metrics(cfg: Config, paths: RunPaths, r: int, results: dict[str, ProblemResult]) -> dict[str, float]:
    """The round's `search/*` metrics; {} when the Solver does not search."""
    if cfg.solver.mode != "search":
        return {}
    samples = [s for res in results.values() for s in res.samples if "search" in s]
    found = [s for s in samples if s["ok"]]
    out: dict[str, float] = {
        M.search("searches"): len(samples),
        M.search("found"): len(found),
        M.search("verified"): sum(1 for s in found if s["verdict"] == VERIFIED),
        M.search("tactic_mode_rejected"): sum(1 for s in found if s["verdict"] != VERIFIED),
        M.search("depth_mean"): sum(s["search"]["depth"] for s in found) / len(found) if found else 0.0,
    }
    for key, stat in (("expansions", "expansions"), ("edges", "edges"), ("failed_edges", "failed_edges"),
                      ("malformed", "malformed"), ("lean_cpu_s", "lean_s"), ("generated_tokens", "generated_tokens")):
        out[M.search(key)] = sum(float(s["search"].get(stat, 0)) for s in samples)
    for stop in ("exhausted", "expansions", "time", "start_failed"):
        out[M.search(f"stop_{stop}")] = sum(1 for s in samples if str(s["search"].get("stop", "")).startswith(stop))
    waves = [m["search"] for m in (sh.meta() for sh in shards(paths.phase_dir(r, "solve"),
                                                              shards_at(cfg, paths, r, "solve")) if sh.is_done())
             if "search" in m]
    calls = sum(int(w["waves"]) for w in waves)
    secs = sum(float(w["generate_s"]) for w in waves)
    out[M.search("waves")] = calls
    out[M.search("tokens_per_call")] = sum(int(w["generated_tokens"]) for w in waves) / calls if calls else 0.0
    out[M.search("calls_per_s")] = calls / secs if secs > 0 else 0.0
    return out
