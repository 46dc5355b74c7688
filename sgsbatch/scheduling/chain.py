"""The chain: the train job, and ending a round and handing on to the next, in one place.

A round, and how it hands on (Slurm: one array a phase, each after the one before it; the local driver
runs the same order as processes):

    round r:   [init]  ->  conjecture  ->  solve  ->  verify  ->  guide  ->  train
               round 0     targets ->      Solver      Lean       scores     ingest + prepare (first task),
               only        conjectures     samples     verdicts   the        the ranks train, end_round:
                                           │  ^ verify shard j    conjec-    metrics, TensorBoard, retention,
                                           └──┘ streams behind    tures      inputs of r + 1, continue_chain
                                                solve shard j                      │
    round r+1: submitted by round r's train job (or by `sgsbatch watch` from outside) <┘

A round's last job is its train job (`train_job`, one per node). Its first task ingests the
round (the run's single database writer) and writes the training examples (phases/train.py
`prepare`); then each node starts its ranks (scheduling/ranks.py; a world of one trains in this
process) and waits for them; then the first task's `end_round` ends the round and hands on.
`end_round` is the only code that ends a round: ingestion (a no-op when done before), the
executor's records of the round's jobs, `round/lifecycle.finish_round` (checkpoints, metrics,
TensorBoard, retention, the next round's inputs) and, from a train job, the executor's
`continue_chain` (Slurm submits round r + 1; the local driver goes on by itself). The train
shard's completion marker is written after all of that; then the train job compacts the rounds no
training reads any more (round/compaction.py). A stop request reaches every
rank; they save at the same optimizer step and the job exits for requeue (`Interrupted`).

Its users: the train job (Slurm and local alike), `resume` and `rebuild` (both through
`end_round_from_marker`, for a round whose training finished but whose ending was lost).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from sgsbatch.config.schema import WINDOW_SELECTIONS
from sgsbatch.phases import train as train_phase
from sgsbatch.phases.task import REQUEUE_EXIT, Interrupted, Task
from sgsbatch.round.compaction import compact_after
from sgsbatch.round.examples import ei_stored_proofs
from sgsbatch.round.lifecycle import finish_round, ingest_round, steps_before_round
from sgsbatch.round.results import round_results
from sgsbatch.run.handle import RunHandle, open_run_dir
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.eval_jobs import after_round
from sgsbatch.scheduling.executor import executor_for
from sgsbatch.scheduling.ranks import launch, layout_from_env

PREPARE_WAIT_S = 3600.0  # a second node waits this long for the first to write the examples


def train_job(task: Task) -> None:
    """Round r's train job on one node: prepare (first task), train (ranks), end the round and hand on, marker last."""
    train_round(task, continue_chain=True)


def train_round(task: Task, *, continue_chain: bool) -> None:
    """Round r's training and its end, as `train_job` (the colocated rollout job hands on itself: scheduling/
    colocated.py)."""
    if task.shard.is_done():
        return
    cfg, r = task.cfg, task.round
    layout = layout_from_env(os.environ, cfg.slurm.train.nodes, cfg.train_ranks_per_node())
    h = open_run_dir(task.paths, cfg) if layout.first else None
    if h is not None and train_phase.prepared(task) is None:
        _ingest_and_prepare(h, task)
    _wait_prepared(task)
    if layout.world > 1:
        argv = [sys.executable, "-m", "sgsbatch.scheduling.worker", str(task.paths.root), str(r), "train", "0",
                "--rank"]
        codes = launch(argv, layout, cfg.train_threads_per_rank(), task.should_stop)
        if REQUEUE_EXIT in codes:
            raise Interrupted(f"round {r} train: the ranks saved a checkpoint and stopped on request")
        failed = {layout.global_rank(i): c for i, c in enumerate(codes) if c != 0}
        if failed:
            raise RuntimeError(f"round {r} train: ranks exited with {failed} (negative: killed by that signal); "
                               f"their output is in this attempt's log")
    trained = train_phase.run(task)  # one rank: trains here; more: every role is done, results are read
    if h is None:
        return
    h = h.refreshed()  # `resume --set` may have changed resources or later rounds' method while it trained
    end_round(h, r, trained, continue_chain=continue_chain)
    task.shard.finish([{"key": role, "role": role, **res} for role, res in trained.items()])
    # the round's training can never run again now: compact what no later training reads (the next
    # round is already submitted, so this is off the chain's critical path)
    for k in compact_after(h.cfg, h.paths, r):
        print(f"round {r}: compacted round {k}'s generation records (records.keep_sample_tokens = false)", flush=True)


def _ingest_and_prepare(h: RunHandle, task: Task) -> None:
    """Ingest round r and write its examples; the round's results (every sample, and the memory maps of
    its arrays files) are gone when this returns, so the training that follows does not hold them."""
    cfg, r = task.cfg, task.round
    results = round_results(cfg, task.paths, r)
    ingest_round(h, r, results)
    windowed = cfg.solver.train and cfg.solver.selection_mode() in WINDOW_SELECTIONS  # Expert Iteration
    ei_stored = ei_stored_proofs(h, r) if windowed else []
    train_phase.prepare(task, results, ei_stored, steps_before_round(h, r))


def train_rank(task: Task) -> None:
    """One rank of a multi-process train job (started by `train_job`'s launcher)."""
    train_phase.run(task)


def _wait_prepared(task: Task) -> None:
    deadline = time.monotonic() + PREPARE_WAIT_S
    while train_phase.prepared(task) is None:
        task.check_stop()
        if time.monotonic() > deadline:
            raise RuntimeError(f"round {task.round} train: the first node did not write the examples within "
                               f"{PREPARE_WAIT_S:.0f} s")
        time.sleep(2)


def end_round(h: RunHandle, r: int, trained: dict[str, dict[str, Any]], *, continue_chain: bool = False) -> None:
    """End round r with the train results per role; `continue_chain` only from the train job itself."""
    ingest_round(h, r)
    executor = executor_for(h)
    executor.record_round(h, r)
    finish_round(h, r, trained)
    if continue_chain:
        executor.continue_chain(h, r)
        after_round(h, r)  # eval.every_rounds: a job beside the chain, after the next round is handed on


def trained_roles(h: RunHandle, r: int) -> dict[str, dict[str, Any]] | None:
    """The train results per role recorded by round r's finished train job, or None if it has not finished."""
    marker = Shard(h.paths.phase_dir(r, "train"), 0)
    if not marker.is_done():
        return None
    return {x["role"]: x for x in marker.read()}


def end_round_from_marker(h: RunHandle, r: int) -> bool:
    """End round r again from its finished train job's records (resume, rebuild); False if it has none."""
    trained = trained_roles(h, r)
    if trained is None:
        return False
    end_round(h, r, trained)
    return True
