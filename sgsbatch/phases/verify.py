"""Verify phase (CPU array): shard i checks the proofs of solve shard i (aftercorr dependency).

An unextracted sample gets the verdict `unextracted` without reaching the verifier. A requeued
task resumes at the first problem it has not finished. Per-shard throughput and the timeout and
error counts are derived from the verdicts at ingestion.
"""

from __future__ import annotations

import time
from typing import Any

from sgsbatch.phases.task import Task, run_items
from sgsbatch.round_data import solve_problems
from sgsbatch.shards import Shard
from sgsbatch.verification.backends import Verifier, make_verifier


def run(task: Task) -> None:
    problems = {p.problem_id: p for p in solve_problems(task.cfg, task.paths, task.round)}
    solved = Shard(task.paths.phase_dir(task.round, "solve"), task.shard.index).read()
    by_key = {it["key"]: it for it in solved}
    verifier: list[Verifier] = []

    def process(p: Any) -> dict[str, Any]:
        verdicts = []
        for s in by_key[p.problem_id]["samples"]:
            if not s["ok"]:
                verdicts.append({"verdict": "unextracted", "verify_reason": s["reason"], "messages": [], "time_s": 0.0})
                continue
            t0 = time.time()
            v = verifier[0].verify(p.header, p.theorem, s["proof"])
            verdicts.append({"verdict": v.verdict, "verify_reason": v.reason, "messages": v.messages,
                             "time_s": round(time.time() - t0, 4)})
        return {"problem_id": p.problem_id, "verdicts": verdicts}

    # The full problem list, sliced by the same modulo as solve: shard i gets solve shard i's problems.
    run_items(task, list(problems.values()), lambda p: p.problem_id, process,
              lambda: verifier.append(make_verifier(task.cfg)))
