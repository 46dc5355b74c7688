"""`python -m sgsbatch.scheduling.worker RUN_DIR ROUND PHASE SHARD [--rank]`: one attempt at one shard task.

Run by the task supervisor (scheduling/supervisor.py) as a child process, so that a crash, a
`kill -9` or an exception ends only this attempt and the supervisor can count it and retry.
SIGUSR2 (preemption or time limit) asks the task to stop after the current item (or optimizer
step); it then exits with REQUEUE_EXIT and its files are consistent for the next attempt. A task
whose input shard, read while it is written, ran out of retries exits with UPSTREAM_EXIT. In the
train phase SIGTERM asks the same (a SIGTERM-only preemption, `scontrol requeue`): the ranks
save at the next step boundary within the grace time. A worker owns its shard (`shard_N.lock`,
run/lock.py) while it runs: one from an older submission still stopping is waited for. `--rank`: one rank of a multi-process
train job, started by the train job's launcher (scheduling/chain.py) with its rank variables.

Test aids: `SGSBATCH_FAULT_INJECT="phase:shard:mode:times[,...]"` (mode raise | kill9 | hang) makes the
first `times` attempts of that shard fail that way, counted by the shard's failure log;
`SGSBATCH_FAULT_INJECT_RANK="rank:step:mode:times[,...]"` (mode hang | kill9) makes that rank of a
multi-rank train job hang or die right after its optimizer step `step` (of the role it trains) while
the train shard has failed fewer than `times` times (its peers then wait in a collective);
`SGSBATCH_TRAIN_STEP_SLEEP_S` makes the trainer wait after each optimizer step (backends/trainer.py).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from sgsbatch.config.loading import from_toml_text
from sgsbatch.config.schema import PHASES, ROLLOUT_JOB
from sgsbatch.errors import disk_full_message, is_disk_full
from sgsbatch.phases.task import REQUEUE_EXIT, UPSTREAM_EXIT, Interrupted, Task, UpstreamFailed
from sgsbatch.run.amendments import config_at
from sgsbatch.run.lock import LockHeld, OwnerLock, describe
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.ranks import is_first_task

FAULT_ENV = "SGSBATCH_FAULT_INJECT"
RANK_FAULT_ENV = "SGSBATCH_FAULT_INJECT_RANK"
_stop = {"requested": False}


def _on_usr2(_sig: int, _frame: FrameType | None) -> None:
    _stop["requested"] = True


def _inject_fault(phase: str, shard: Shard) -> None:
    for spec in filter(None, os.environ.get(FAULT_ENV, "").split(",")):
        f_phase, f_shard, mode, times = spec.split(":")
        if f_phase == phase and int(f_shard) == shard.index and shard.failure_count() < int(times):
            _fault(mode, spec)


def _rank_fault(shard: Shard) -> Callable[[int], None] | None:
    """The hook that makes this train rank hang or die after a step (RANK_FAULT_ENV), if armed now."""
    rank = int(os.environ.get("RANK", "0"))
    armed: dict[int, tuple[str, str]] = {}
    for spec in filter(None, os.environ.get(RANK_FAULT_ENV, "").split(",")):
        f_rank, step, mode, times = spec.split(":")
        if int(f_rank) == rank and shard.failure_count() < int(times):
            armed.setdefault(int(step), (mode, spec))
    if not armed:
        return None

    def after_step(step: int) -> None:
        if step in armed:
            mode, spec = armed[step]
            print(f"sgsbatch worker: rank {rank} after optimizer step {step}: injected {mode} ({RANK_FAULT_ENV}={spec})",
                  file=sys.stderr, flush=True)
            _fault(mode, spec)

    return after_step


def _fault(mode: str, spec: str) -> None:
    if mode == "raise":
        raise RuntimeError(f"injected fault ({FAULT_ENV}={spec})")
    if mode == "kill9":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(10**6)


def phase_runner(phase: str) -> Callable[[Task], None]:
    """What a task of `phase` runs (imported here, so a worker loads only its own phase's code)."""
    if phase == "init":
        from sgsbatch.phases import init

        return init.run
    if phase == "conjecture":
        from sgsbatch.phases import conjecture

        return conjecture.run
    if phase == "solve":
        from sgsbatch.phases import solve

        return solve.run
    if phase == "verify":
        from sgsbatch.phases import verify

        return verify.run
    if phase == "guide":
        from sgsbatch.phases import guide

        return guide.run
    if phase == "train":
        from sgsbatch.scheduling.chain import train_job

        return train_job
    if phase == ROLLOUT_JOB:
        from sgsbatch.scheduling.colocated import rollout_job

        return rollout_job
    raise ValueError(f"unknown phase {phase!r}; valid: {', '.join((*PHASES, ROLLOUT_JOB))}")


def run_shard(run_dir: Path, r: int, phase: str, index: int, rank: bool = False) -> None:
    paths = RunPaths(run_dir)
    # the config of round r: its resources the newest, a change of method only from its own round on
    cfg = config_at(from_toml_text(paths.config.read_text(encoding="utf-8"), str(paths.config)), paths, r)
    shard = Shard(paths.phase_dir(r, phase), index)
    task = Task(cfg, paths, r, phase, shard, lambda: _stop["requested"])
    if rank:
        from sgsbatch.scheduling.chain import train_rank

        task.after_step = _rank_fault(shard)
        train_rank(task)
        return
    if not is_first_task(os.environ):  # the other nodes of a multi-node train job: task 0 owns the shard
        phase_runner(phase)(task)
        return
    # one owner per shard: a task of an older submission still stopping (`resume --force`) finishes
    # its item (or checkpoint) first; nobody else ever appends to this shard's item log meanwhile
    wait_s = cfg.phase_resources(phase).signal_delay_s + 120.0
    try:
        owner = OwnerLock(shard.lock_file).acquire(
            wait_s, on_wait=lambda h: print(f"sgsbatch worker: waiting for {describe(h)} to release round {r} "
                                            f"{phase} shard {index}", file=sys.stderr, flush=True))
    except LockHeld as e:
        raise RuntimeError(f"round {r} {phase} shard {index} is still owned by {describe(e.holder)} after "
                           f"{wait_s:.0f} s; two tasks must never share a shard") from None
    with owner:
        if shard.is_done():
            return  # the owner it waited for finished the shard
        _inject_fault(phase, shard)
        phase_runner(phase)(task)


def main(argv: list[str]) -> int:
    rank = "--rank" in argv
    argv = [a for a in argv if a != "--rank"]
    run_dir, r, phase, index = Path(argv[0]), int(argv[1]), argv[2], int(argv[3])
    prefix = f"rank {os.environ.get('RANK', '?')} " if rank else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGUSR2, _on_usr2)
    if phase in ("train", ROLLOUT_JOB):  # both train: save at the next step on a SIGTERM-only preemption
        signal.signal(signal.SIGTERM, _on_usr2)
    try:
        run_shard(run_dir, r, phase, index, rank)
    except Interrupted as e:
        print(f"sgsbatch worker: {e}; exiting for requeue", file=sys.stderr)
        return REQUEUE_EXIT
    except UpstreamFailed as e:
        print(f"sgsbatch worker: {e}", file=sys.stderr)
        return UPSTREAM_EXIT
    except OSError as e:
        if not is_disk_full(e):
            raise
        print(f"sgsbatch worker: {disk_full_message(e)}", file=sys.stderr)  # its last line: the crash's reason
        return 1
    return 0


def _fast_exit(code: int) -> None:
    """Leave without Python's slow teardown of torch/transformers (about 1 s per task): every
    file this task wrote is already closed and fsynced, so only the standard streams need a flush."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    if "torch.distributed" in sys.modules:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    os._exit(code)


if __name__ == "__main__":
    _fast_exit(main(sys.argv[1:]))
