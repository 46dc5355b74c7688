"""Search phase: the solve phase when `solver.mode = "search"`: `solver.samples` independent tactic-level
searches per target and per conjecture (search/driver.py), written as solve's records.

A problem's item is written (to the solve shard's item log, where verify streams it from) once its
`solver.samples` searches are over; each search is one sample: `ok` when it found a proof, whose
`proof` is the linearized tactics (search/policy.linearize: what follows the dataset's `:= by`) and
goes through the verify phase like any whole proof (tactic mode is not the verdict); `reason`
`search_<stop>` otherwise. So a problem's solve rate is the share of its searches whose proof the
verify phase verified: the bands and rewards keep their meaning. A sample's `search` holds its
statistics (expansions, depth, Lean seconds, generated tokens, ...), `steps` the (prompt tokens,
tactic tokens) counts of the proof's steps; its arrays (run/token_arrays.py) are those steps' prompt
ids and tactic ids concatenated (prompt positions get logprob 0): the (goal state, tactic) pairs the
Solver trains on (round/examples.py).

Resume per search: every finished search is appended (one fsynced line, a torn last line ignored)
to the shard's search journal `shard_N.searches.jsonl`; a requeued task reads it and redoes only
the searches that had not finished. Not covered: the search itself, the environments.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.phases.sampling import generator_for
from sgsbatch.phases.task import Task
from sgsbatch.round.results import Problem, solve_problems
from sgsbatch.run.attempts import attempts
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.progress import ProgressLine
from sgsbatch.run.shards import append_json_line
from sgsbatch.run.token_arrays import TokenArrays
from sgsbatch.search.driver import Outcome, SearchJob, run_searches
from sgsbatch.search.environment import TacticEnvironment
from sgsbatch.search.policy import linearize

log = logging.getLogger(__name__)
# test aid: "SHARD:N" kills (SIGKILL) that solve shard's task right after its N-th search is journalled, on its
# first attempt only (tests/integration/test_search_run.py: a kill mid-search, then identical results)
KILL_ENV = "SGSBATCH_SEARCH_KILL_AFTER"


def environment_for(cfg: Config) -> TacticEnvironment:
    """The configured tactic environment (`search.environment`; heavy parts imported here)."""
    s = cfg.search
    if s.environment == "simulated":
        from sgsbatch.search.simulated import SimulatedTacticEnvironment

        return SimulatedTacticEnvironment(s.simulated_branching, s.simulated_depth)
    if s.environment == "replay":
        from sgsbatch.search.replay import ReplayTacticEnvironment

        if not s.replay_dir:
            raise ValueError('search.environment = "replay" needs search.replay_dir: a directory of recorded '
                             "REPL transcripts (X.in, X.expected.out)")
        return ReplayTacticEnvironment(Path(s.replay_dir).expanduser())
    from sgsbatch.search.lean_env import LeanTacticEnvironment

    return LeanTacticEnvironment(cfg.verification, s)


def journal_path(task: Task) -> Path:
    return task.shard.dir / f"shard_{task.shard.index:05d}.searches.jsonl"


def read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """The finished searches of earlier attempts by key (a torn last line is ignored)."""
    return {row["key"]: row for row in read_jsonl(path, past_bad_lines=True)}  # a killed writer's torn tail skipped


def search_row(o: Outcome) -> dict[str, Any]:
    """A finished search as its journal line: the sample record and its steps' arrays."""
    ids: list[int] = []
    lps: list[float] = []
    steps = []
    for prompt, tactic, logprobs in o.steps:
        ids += list(prompt) + list(tactic)
        lps += [0.0] * len(prompt) + list(logprobs)
        steps.append([len(prompt), len(tactic)])
    proof = linearize(o.tactics) if o.found else None
    sample = {"text": proof or "", "n_tokens": len(ids), "finish_reason": "stop", "ok": o.found, "proof": proof,
              "reason": None if o.found else f"search_{o.stop.split(':')[0]}", "search": {**o.stats, "stop": o.stop},
              "steps": steps, "goals": o.goals}
    return {"key": o.job.key, "sample": sample, "token_ids": ids, "logprobs": lps}


def run(task: Task) -> None:
    cfg = task.cfg
    shard = task.shard
    if shard.is_done():
        return
    mine = task.mine(solve_problems(cfg, task.paths, task.round))
    done = shard.done_items()
    journal = journal_path(task)
    finished = read_journal(journal)
    n = cfg.solver.samples
    todo = [p for p in mine if p.problem_id not in done]
    jobs = [SearchJob(f"{p.problem_id}#{j}", p.problem_id, j, p.header, p.theorem, task.seed(f"{p.problem_id}#{j}"))
            for p in sorted(todo, key=lambda p: p.problem_id) for j in range(n) if f"{p.problem_id}#{j}" not in finished]
    by_id = {p.problem_id: p for p in mine}
    shard.set_total(len(mine))
    progress = ProgressLine(f"r{task.round} search shard {shard.index}", len(mine), len(mine) - len(todo),
                            cfg.alerts.progress_every_s)
    meta: dict[str, Any] = {"items": len(mine), "mode": "search", "environment": cfg.search.environment,
                            "algorithm": cfg.search.algorithm}

    def write_item(p: Problem) -> None:
        rows = [finished[f"{p.problem_id}#{j}"] for j in range(n)]
        rec = {"problem_id": p.problem_id, "is_target": p.is_target, "samples": [r["sample"] for r in rows],
               "key": p.problem_id, "n_prompt_tokens": 0}
        done[p.problem_id] = shard.append_item(rec, TokenArrays([], [r["token_ids"] for r in rows],
                                                                [r["logprobs"] for r in rows]))
        progress.step()

    if finished:
        log.info("search: %d finished searches read from %s; %d searches to run", len(finished), journal, len(jobs))
    kill_after = _kill_after(task)
    for p in todo:  # every search of these finished in earlier attempts
        if all(f"{p.problem_id}#{j}" in finished for j in range(n)):
            write_item(p)
    if jobs:
        def on_done(o: Outcome) -> None:
            row = search_row(o)
            append_json_line(journal, row)
            finished[o.job.key] = row
            if kill_after is not None and len(finished) >= kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            p = by_id[o.job.problem_id]
            if p.problem_id not in done and all(f"{p.problem_id}#{j}" in finished for j in range(n)):
                write_item(p)

        t0 = time.perf_counter()
        gen = generator_for(task, "solver")
        env = environment_for(cfg)
        gen.stats.startup_s = time.perf_counter() - t0
        try:
            waves = run_searches(jobs, env, gen, cfg.search, on_done=on_done, check_stop=task.check_stop)
        finally:
            env.close()
            gen.close()
        meta.update(gen.stats.as_dict(), search=waves.as_dict())
    shard.finish([done[p.problem_id] for p in mine], meta)


def _kill_after(task: Task) -> int | None:
    spec = os.environ.get(KILL_ENV, "")
    if not spec or len(attempts(task.shard)) > 1:
        return None
    shard, n = spec.split(":")
    return int(n) if int(shard) == task.shard.index else None
