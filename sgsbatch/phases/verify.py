"""Verify phase (CPU array): shard j checks proofs of solve shard j mod solve (see ShardsConfig).

With as many verify as solve tasks, verify task i checks all of solve shard i; with k times as many,
each checks every verify-th problem of its solve shard. Either way it starts when that solve
shard is done (scheduling/slurm.verify_arrays; the local driver likewise), whatever the others do.

All remaining proofs of the shard go to the verifier at once (a pool of one REPL per allotted
core stays busy); a problem's record is appended to the item log as soon as its last sample has
a verdict, so a requeued task resumes with the problems it has not finished. An unextracted
sample gets the verdict `unextracted` without reaching the verifier. The completion marker records
this attempt's throughput and its timeout and error counts (the round's rates are metrics).
"""

from __future__ import annotations

import time
from typing import Any

from sgsbatch.phases.task import Task
from sgsbatch.round.results import solve_problems
from sgsbatch.run.progress import ProgressLine
from sgsbatch.run.shards import Shard
from sgsbatch.verification.verdict import ProofJob
from sgsbatch.verification.verifier import make_verifier


def _unextracted(reason: str) -> dict[str, Any]:
    return {"verdict": "unextracted", "verify_reason": reason, "messages": [], "time_s": 0.0}


def run(task: Task) -> None:
    if task.shard.is_done():
        return
    problems = task.mine(solve_problems(task.cfg, task.paths, task.round))
    solve_shard = task.cfg.solve_shard_of(task.shard.index)
    solved = Shard(task.paths.phase_dir(task.round, "solve"), solve_shard).read_keys({p.problem_id for p in problems})
    assert all(p.problem_id in solved for p in problems), "verify shard j checks problems of solve shard j mod solve"
    task.shard.set_total(len(problems))
    done = task.shard.done_items()
    progress = ProgressLine(f"r{task.round} verify shard {task.shard.index}", len(problems), len(done),
                            task.cfg.alerts.progress_every_s)
    pending: dict[str, list[dict[str, Any] | None]] = {}
    jobs = []
    for p in problems:
        if p.problem_id in done:
            continue
        samples = solved[p.problem_id]["samples"]
        pending[p.problem_id] = [None if s["ok"] else _unextracted(s["reason"]) for s in samples]
        jobs += [ProofJob(f"{p.problem_id}\t{k}", p.header, p.theorem, s["proof"])
                 for k, s in enumerate(samples) if s["ok"]]
    for pid, verdicts in list(pending.items()):
        if all(v is not None for v in verdicts):  # nothing to check: record at once
            _record(task, done, pid, verdicts)
            del pending[pid]
            progress.step()
    started, counts = time.time(), {"proofs": len(jobs), "timeout": 0, "error": 0}
    if jobs:
        verifier = make_verifier(task.cfg, processes=task.cfg.phase_resources("verify").cpus)
        task.shard.mark_ready()
        try:
            for job, v, secs in verifier.verify_stream(jobs):
                pid, k = job.key.split("\t")
                counts[v.verdict] = counts.get(v.verdict, 0) + 1
                pending[pid][int(k)] = {"verdict": v.verdict, "verify_reason": v.reason, "messages": v.messages,
                                        "time_s": round(secs, 4)}
                if all(x is not None for x in pending[pid]):
                    _record(task, done, pid, pending.pop(pid))
                    progress.step()
                task.check_stop()
        finally:
            verifier.close()
    assert not pending, "every proof gets a verdict"
    secs = time.time() - started
    task.shard.finish([done[p.problem_id] for p in problems],
                      {"items": len(problems), **counts, "seconds": round(secs, 3),
                       "proofs_per_s": round(counts["proofs"] / secs, 3) if secs > 0 else 0.0})


def _record(task: Task, done: dict[str, dict[str, Any]], pid: str, verdicts: list[Any]) -> None:
    rec = {"key": pid, "problem_id": pid, "verdicts": verdicts}
    task.shard.append_item(rec)
    done[pid] = rec
