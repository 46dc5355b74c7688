"""The colocated rollout job (`solver.colocated_steps` = K > 0): one job on the train job's resources runs K
rollout steps (rounds) in a row, keeping one engine whose weights are updated in place after each step.

    rollout job (slurm.train's GPUs), from round r:
      round k = r .. r+K-1:  record itself as round k's job -> start round k's verify array (CPU, streams
                             behind the solve shards as in the chain) -> solve shards in this process on the
                             resident engine (k > r: given round k's weights in place) -> wait for verify ->
                             ingest + prepare + train in this process -> end round k
      then: the next job (round r+K) is submitted, the rollout shard's marker written

What it shares with the chain (scheduling/chain.py): every file a round writes (solve, verify and train
shards, the round's end, its metrics) and so `status`, `resume` and the results; a colocated run samples
and trains exactly as the chain does on the same config (each item's seed is its own; an engine given new
weights in place samples as a fresh one: tests/vllm/test_vllm_engine.py). What it saves: each step's
engine start, the Python/torch imports and the Slurm hand-overs (`plan` shows both; docs/objectives.md).

Not covered: a trainer kept across steps (each step's training loads the round's weights again, in this
process with one rank, in ranks it starts again each step with several), several nodes, a Conjecturer or a
search Solver (all three refused by the config), verification inside the job (it stays the CPU array; the local executor runs it as
local supervisors). The rollout shard's items are the rounds it finished: a job requeued at its time limit
resumes at its unfinished round, and one that finished no round between two time limits fails (as a shard
that finished no item). A stop request (SIGUSR2, preemption) stops at the next solve item or optimizer step.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from sgsbatch.config.schema import ROLLOUT_JOB
from sgsbatch.phases import solve
from sgsbatch.phases.sampling import ResidentEngine
from sgsbatch.phases.task import Task, UpstreamFailed
from sgsbatch.round.lifecycle import prepare_round, round_completed
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.run.shards import Shard, unfinished
from sgsbatch.scheduling.chain import train_round
from sgsbatch.scheduling.eval_jobs import after_round
from sgsbatch.scheduling.executor import executor_for

VERIFY_POLL_S = 1.0


def rollout_job(task: Task) -> None:
    """Rounds task.round .. task.round + solver.colocated_steps - 1 (fewer at run.rounds, or where an amendment
    turned the colocated job off from a round on: that round is handed to the chain), then hand on."""
    if task.shard.is_done():
        return
    h = open_run_dir(task.paths, task.cfg)
    first, engine = task.round, ResidentEngine()
    end = min(first + h.at(first).solver.colocated_steps, h.cfg.run.rounds)
    task.shard.set_total(end - first)
    done = task.shard.done_items()
    k = first
    try:
        while k < end and (h := h.refreshed()).at(k).colocated():  # run.rounds only grows: end is within it
            if not round_completed(h, k):
                _step(h, k, task, engine)
            if f"r{k}" not in done:
                done[f"r{k}"] = task.shard.append_item({"key": f"r{k}", "round": k, "weight_updates_s": list(engine.updates)})
            k += 1
    finally:
        engine.close()
    executor_for(h).continue_chain(h, k - 1)  # idempotent: a job already submitted for round k covers it
    task.shard.set_total(k - first)
    task.shard.finish([done[f"r{j}"] for j in range(first, k)], {"rounds": k - first})


def _step(h: RunHandle, k: int, job: Task, engine: ResidentEngine) -> None:
    """Rollout step k: verify started, solve here on the resident engine, verify awaited, train, end the round."""
    cfg, paths = h.at(k), h.paths
    prepare_round(h, k)
    _record(h, k)
    waiting = _start_verify(h, k, job.should_stop)
    for i in unfinished(paths.phase_dir(k, "solve"), cfg.shard_count("solve")):
        shard = Shard(paths.phase_dir(k, "solve"), i)
        shard.mark_started()  # as a supervisor marks a task's shard: the phase's span and wall_s/solve
        solve.run(Task(cfg, paths, k, "solve", shard, job.should_stop, engine=engine))
    _await_verify(h, k, job, waiting)
    engine.release()  # on GPUs the engine's memory goes to the trainer until the next step
    train = Shard(paths.phase_dir(k, "train"), 0)
    train.mark_started()
    train_round(Task(cfg, paths, k, "train", train, job.should_stop), continue_chain=False)
    after_round(h.refreshed(), k)  # eval.every_rounds: its job beside the run, as the chain's train job submits it


def _record(h: RunHandle, k: int) -> None:
    """On Slurm: this job is round k's job too (liveness reads round k's active jobs; the cost of each
    round is the job's time since its previous round: scheduling/slurm.record_slurm_jobs)."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID")
    if h.cfg.run.executor != "slurm" or not job:
        return
    from sgsbatch.scheduling.slurm import active_arrays, record_job

    if all(a.job_id != job for a in active_arrays(h, k, ROLLOUT_JOB)):
        record_job(h, k, ROLLOUT_JOB, job, [0])


def _start_verify(h: RunHandle, k: int, should_stop: Callable[[], bool]) -> list[threading.Thread]:
    """Round k's unfinished verify shards, started to stream behind the solve shards: on Slurm an array
    on slurm.verify's CPUs (shards an active array covers are left to it), locally a supervisor thread a shard
    (up to run.local_workers at once). Returns the local threads (none on Slurm)."""
    cfg = h.at(k)
    todo = unfinished(h.paths.phase_dir(k, "verify"), cfg.shard_count("verify"))
    if not todo:
        return []
    if cfg.run.executor == "slurm":
        from sgsbatch.scheduling.slurm import active_arrays, submit_phase

        covered = {i for a in active_arrays(h, k, "verify") for i in a.shards}
        rest = [j for j in todo if j not in covered]
        if rest:
            submit_phase(h, k, "verify", rest, None)
        return []
    from sgsbatch.scheduling.supervisor import run_supervised

    gate = threading.Semaphore(max(1, cfg.run.local_workers))

    def supervise(j: int) -> None:
        with gate:
            run_supervised(h.paths.root, k, "verify", j, max_retries=cfg.run.max_task_retries, stopping=should_stop)

    threads = [threading.Thread(target=supervise, args=(j,), daemon=True) for j in todo]
    for t in threads:
        t.start()
    return threads


def _await_verify(h: RunHandle, k: int, job: Task, threads: list[threading.Thread]) -> None:
    """Until every verify shard of round k is done; a shard out of retries stops the job (`UpstreamFailed`:
    not its own failure; `resume` runs the shard again)."""
    cfg = h.at(k)
    shards = [Shard(h.paths.phase_dir(k, "verify"), j) for j in range(cfg.shard_count("verify"))]
    while not all(s.is_done() for s in shards):
        failed = next((s for s in shards if s.failed_reason() is not None), None)
        if failed is not None:
            raise UpstreamFailed(f"round {k} verify shard {failed.index} ran out of retries ({failed.failed_reason()}); "
                                 f"the rollout job stops until `sgsbatch resume` runs it again")
        if threads and not any(t.is_alive() for t in threads) and not all(s.is_done() for s in shards):
            job.check_stop()  # the local supervisors stopped on the job's stop request
            raise RuntimeError(f"round {k}: the local verify supervisors ended with shards unfinished")
        job.check_stop()
        time.sleep(VERIFY_POLL_S)
    for t in threads:
        t.join()
