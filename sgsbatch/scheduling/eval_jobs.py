"""Held-out evaluation as a job of its own, beside the chain: `sgsbatch eval RUN --round N --submit` and
`eval.every_rounds` (after a round's end, from its train job).

The job runs `sgsbatch eval <run dir> --round N [--set NAME]` (ops/evaluate.py), so it does exactly what
the command does in a terminal, and a job started again (a requeue after preemption) skips the sets
already complete (their DONE marker). On Slurm: one job of the solve phase's resources (`slurm.solve`:
its GPUs sample, its CPUs verify with the SIMULATED verifier or Lean), named like the run's other jobs
with the letter `e` (scheduling/slurm.job_name), its submitit folder under `slurm/eval/`; nothing
depends on it and it depends on nothing (the round it evaluates has ended). Locally: a detached process
of its own session (it outlives the driver and `cancel`), its output in `eval/r000N/job.log`. Either
way the job's id is kept in `eval/r000N/job.json`; retention keeps round N's weights until the job's
sets have their markers (round/checkpoints.awaiting_evaluation). `after_round` is what the chain calls once round r
has ended and the next round is handed on: it submits only for rounds with (r + 1) % every_rounds == 0
and never raises (a failed submission is printed; the chain goes on). `cancel_pending` is what
`sgsbatch cancel` calls: every evaluation job of the run whose sets are not all done is cancelled
(scancel; a local one's process group is killed, if its command line is still this run's evaluation).
Not covered: its cost in `plan` (views/eval_projection.py has it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import atomic_write_text


def eval_argv(h: RunHandle, r: int, only: str | None = None) -> list[str]:
    """The command an evaluation job runs."""
    return [sys.executable, "-m", "sgsbatch.cli", "eval", str(h.paths.root), "--round", str(r),
            *(["--set", only] if only else [])]


def due(h: RunHandle, r: int) -> bool:
    """Whether `eval.every_rounds` asks for an evaluation after round r."""
    e = h.cfg.eval
    return e.every_rounds > 0 and bool(e.sets) and (r + 1) % e.every_rounds == 0


def submit_eval(h: RunHandle, r: int, only: str | None = None) -> str:
    """Submit the evaluation of round r on the run's executor; returns the job's id (Slurm) or `pid N` (local)."""
    from sgsbatch.scheduling.executor import executor_for

    out = h.paths.eval_round_dir(r)
    out.mkdir(parents=True, exist_ok=True)
    argv = eval_argv(h, r, only)
    executor = executor_for(h).name
    if executor == "slurm":
        job_id = _submit_slurm(h, r, argv)
    else:
        with (out / "job.log").open("ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=h.paths.root)
        job_id = f"pid {proc.pid}"
    atomic_write_text(h.paths.eval_job(r), json.dumps({"job_id": job_id, "executor": executor, "round": r, "set": only,
                                                    "submitted_at": time.time(), "command": argv}) + "\n")
    return job_id


def _submit_slurm(h: RunHandle, r: int, argv: list[str]) -> str:
    import submitit
    from submitit.helpers import CommandFunction

    from sgsbatch.errors import SchedulerError
    from sgsbatch.scheduling.slurm import clean_env, job_name, python_command, resource_parameters

    cfg = h.refreshed().cfg
    res = cfg.slurm.solve
    ex = submitit.SlurmExecutor(folder=h.paths.slurm / "eval" / "%j", max_num_timeout=0, python=python_command())
    ex.update_parameters(**resource_parameters(res, job_name(cfg.run.name, r, "eval")))
    try:
        with clean_env():
            job = ex.submit(CommandFunction(argv, cwd=str(h.paths.root)))
    except Exception as e:  # submitit raises FailedJobError / CalledProcessError with sbatch's message
        raise SchedulerError(f"sbatch refused the evaluation job of run {cfg.run.name} round {r}: {e} (it has the "
                             f"solve phase's resources, slurm.solve.*)") from e
    return str(job.job_id)


def after_round(h: RunHandle, r: int) -> str | None:
    """Submit round r's evaluation when `eval.every_rounds` asks for it (see the module docstring); the job's
    id, or None. Never raises: an evaluation is never on the chain's critical path."""
    if not due(h, r) or h.paths.eval_job(r).exists():  # a train job retried after this
        return None
    try:
        job_id = submit_eval(h, r)
    except Exception as e:  # the chain goes on; `sgsbatch eval RUN --round r` evaluates it later
        print(f"round {r}: submitting its held-out evaluation failed ({type(e).__name__}: {e}); the run goes on; "
              f"evaluate it with `sgsbatch eval {h.cfg.run.name} --round {r}`", flush=True)
        return None
    print(f"round {r}: held-out evaluation submitted ({job_id}; eval.every_rounds = {h.cfg.eval.every_rounds})",
          flush=True)
    return job_id


def evaluations(h: RunHandle) -> list[dict[str, object]]:
    """Each round evaluated or being evaluated, oldest first, as recorded in the run directory (no scheduler is
    asked): round, the job's id ("" for an evaluation run in a terminal), sets done of the sets it evaluates,
    and `done` (every such set has its marker)."""
    root = h.paths.root / "eval"
    out: list[dict[str, object]] = []
    for d in sorted(root.glob("r[0-9]*")) if root.is_dir() else []:
        r = int(d.name[1:])
        try:
            record = json.loads(h.paths.eval_job(r).read_text()) if h.paths.eval_job(r).is_file() else {}
        except (OSError, ValueError):
            record = {}
        only = record.get("set") if isinstance(record, dict) else None
        names = [only] if isinstance(only, str) else sorted(h.cfg.eval.sets) or sorted(p.name for p in d.iterdir()
                                                                                       if p.is_dir())
        done = sum(h.paths.eval_done(r, name).is_file() for name in names)
        out.append({"round": r, "job_id": str(record.get("job_id", "")) if isinstance(record, dict) else "",
                    "sets": len(names), "sets_done": done, "done": done == len(names)})
    return out


def _local_is_ours(pid: int, h: RunHandle) -> bool:
    """Whether process `pid` is still an evaluation of this run (a pid may have been reused)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"eval" in argv and str(h.paths.root).encode() in argv


def live_job(h: RunHandle, r: int) -> str | None:
    """The id of round r's evaluation job while it is queued or running with a set not done, else None: a local
    one whose process is still this run's evaluation; a Slurm one that squeue lists (or when squeue does not
    answer: counted live)."""
    from sgsbatch.round.checkpoints import awaiting_evaluation

    if not awaiting_evaluation(h.cfg, h.paths, r):
        return None
    try:
        record = json.loads(h.paths.eval_job(r).read_text())
        job_id, executor = str(record["job_id"]), record["executor"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if executor == "slurm":
        from sgsbatch.scheduling.slurm import squeue

        tasks = squeue([job_id])
        return job_id if tasks is None or tasks else None
    pid = job_id.removeprefix("pid ")
    return job_id if pid.isdigit() and _local_is_ours(int(pid), h) else None


def cancel_pending(h: RunHandle) -> list[str]:
    """Cancel the run's evaluation jobs that have a set without its marker; returns their ids."""
    from sgsbatch.round.checkpoints import awaiting_evaluation
    from sgsbatch.scheduling.slurm import cancel

    root = h.paths.root / "eval"
    cancelled: list[str] = []
    for d in sorted(root.glob("r[0-9]*")) if root.is_dir() else []:
        r = int(d.name[1:])
        if not awaiting_evaluation(h.cfg, h.paths, r):
            continue
        try:
            record = json.loads(h.paths.eval_job(r).read_text())
            job_id, executor = str(record["job_id"]), record["executor"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if executor == "slurm":
            cancel([job_id])
            cancelled.append(job_id)
        elif job_id.startswith("pid ") and _local_is_ours(int(job_id[4:]), h):
            try:
                os.killpg(int(job_id[4:]), signal.SIGTERM)  # its own session: the group is the evaluation's
            except ProcessLookupError:
                continue
            cancelled.append(job_id)
    return cancelled
