"""A 2-rank train job on the real local Slurm: stopped in the middle of a role's epoch three ways;
losing a rank (hung, then dead) in two attempts.

The train job of a 1-round tiny run starts 2 CPU ranks (gloo; `train.cpu_ranks = 2`), one
sequence per optimizer step, a 2 s pause after each (`SGSBATCH_TRAIN_STEP_SLEEP_S`, a test aid)
so that a signal lands mid-epoch. Once training has passed an optimizer step, it is hit by
`scancel --signal=USR2` (the time-limit warning), then by a partition preemption (Slurm sends
SIGUSR2, grace time, requeue), then by `scontrol requeue` (SIGTERM only, KillWait to save). Each
time every rank must save at the same step and the job must come back and resume from that
step (the log says "resuming ... at optimizer step k", k > 0). Finally the trained weights
of both roles equal, bit for bit, those of the same run trained uninterrupted (local executor).
Lost ranks (`SGSBATCH_FAULT_INJECT_RANK`, a test aid): rank 1 hangs after optimizer step 1 in the
first attempt (rank 0's collective times out after `train.collective_timeout_s`), dies after step 2
in the second; each is a crash of the train job, counted and retried, and the third attempt ends
the run.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from pathlib import Path

import pytest
from runlib import launch_args, sgsbatch, status

from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.scheduling.slurm import job_name

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SETTINGS = ("run.rounds=1", "train.cpu_ranks=2", "slurm.train.cpus=2", "solver.batch_size=1",
            "conjecturer.batch_size=1")
STEP = re.compile(r"train (\w+): optimizer step (\d+)/(\d+)")
RESUMED = re.compile(r"resuming (\w+) at optimizer step (\d+)/")


def digests(run_dir: Path) -> dict[str, str]:
    return {role: hashlib.sha256((run_dir / "checkpoints" / "r0000" / role / "model.safetensors").read_bytes())
            .hexdigest() for role in ("solver", "conjecturer")}


def resumed_lines(log: Path | str) -> list[str]:
    """The "resuming" lines of an attempt's log (timestamped: a new attempt's differ)."""
    text = log if isinstance(log, str) else log.read_text(errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if RESUMED.search(line)]


def train_job(run: str) -> tuple[str, str] | None:
    out = subprocess.run(["squeue", "-h", "-n", job_name(run, 0, "train"), "-o", "%i|%T"], capture_output=True,
                         text=True).stdout.split()
    return tuple(out[0].split("|")) if out else None  # type: ignore[return-value]


def wait_for(predicate, what: str, limit_s: float = 900) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + limit_s  # a safety limit, not a measurement
    while not predicate():
        assert time.time() < deadline, f"gave up waiting for {what}"
        time.sleep(0.3)


def test_a_signalled_two_rank_train_job_resumes_at_its_step_and_ends_bit_for_bit(
        slurm_cluster: object, tmp_path: Path, cli_env: dict[str, str]) -> None:
    ref = sgsbatch(*launch_args(tmp_path, "calm", "run.executor=local", *SETTINGS), "--wait", env=cli_env)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    env = {**cli_env, "SGSBATCH_TRAIN_STEP_SLEEP_S": "2"}
    launch = sgsbatch(*launch_args(tmp_path, "hit", "run.executor=slurm", *SETTINGS), env=env)
    assert launch.returncode == 0, launch.stderr
    log = tmp_path / "hit" / "rounds" / "r0000" / "train" / "shard_00000.attempt.log"
    seen: list[str] = []  # every attempt's log, read before the next attempt overwrites it

    def fresh_step() -> bool:
        job = train_job("hit")
        text = log.read_text(errors="replace") if log.exists() else ""
        steps = STEP.findall(text)
        return job is not None and job[1] == "RUNNING" and bool(steps) and int(steps[-1][1]) < int(steps[-1][2])

    for action in ("usr2", "preempt", "requeue"):
        wait_for(fresh_step, f"an optimizer step before the {action}")
        job = train_job("hit")
        assert job is not None
        before = log.read_text(errors="replace")
        if action == "usr2":
            subprocess.run(["scancel", "--signal=USR2", job[0]], check=True)
        elif action == "preempt":
            subprocess.run(["sbatch", "-p", "urgent", "-n", "1", "-c", "2", "--mem=500M", "-J", "preemptor",
                            "--output", str(tmp_path / "preemptor-%j.out"), "--wrap", "sleep 3"], check=True,
                           capture_output=True)
        else:
            subprocess.run(["scontrol", "requeue", job[0]], check=True)
        wait_for(lambda before=before: resumed_lines(log) not in ([], resumed_lines(before)),
                 f"a resume after the {action}")
        seen.append(log.read_text(errors="replace"))
    st = status(tmp_path, "hit")
    deadline = time.time() + 900
    while st["state"] not in ("completed", "failed", "stalled") and time.time() < deadline:
        time.sleep(3)
        st = status(tmp_path, "hit")
    assert st["state"] == "completed", st
    resumed_at = [int(m[1]) for text in seen for m in RESUMED.findall(text)[:1]]
    assert len(resumed_at) == 3 and all(k > 0 for k in resumed_at), resumed_at
    assert digests(tmp_path / "hit") == digests(tmp_path / "calm")
    sacct = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "--name", job_name("hit", 0, "train"), "-o", "JobID,State"],
                           capture_output=True, text=True).stdout
    assert sum(1 for line in sacct.splitlines() if line.split("|")[1].startswith(("REQUEUED", "PREEMPTED"))) >= 3, sacct


def test_a_hung_then_a_dead_rank_fail_the_train_job_which_is_counted_and_retried(
        slurm_cluster: object, tmp_path: Path, cli_env: dict[str, str]) -> None:
    env = {**cli_env, "SGSBATCH_FAULT_INJECT_RANK": "1:1:hang:1,1:2:kill9:2"}
    proc = sgsbatch(*launch_args(tmp_path, "lost", "run.executor=slurm", *SETTINGS, "train.collective_timeout_s=5",
                                 "conjecturer.enabled=false"), "--wait", env=env)  # the Solver alone: 4 steps
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, "lost")
    assert st["state"] == "completed", st
    train = tmp_path / "lost" / "rounds" / "r0000" / "train"
    failures = read_jsonl(train / "shard_00000.failures")
    assert len(failures) == 2 and all("ranks exited with" in f["reason"] for f in failures), failures
    # the job's log holds every attempt's: rank 0 timed out on the hung rank, then lost the dead one
    err = "".join(p.read_text(errors="replace") for p in (tmp_path / "lost" / "slurm" / "r0000" / "train").rglob("*_log.*"))
    assert "rank 1 after optimizer step 1: injected hang" in err and "Timed out waiting 5000ms" in err
    assert "rank 1 after optimizer step 2: injected kill9" in err
    steps = read_jsonl(train / "steps.jsonl")  # rank 0's records: every attempt's steps, the last to the end
    assert steps and steps[-1]["step"] == steps[-1]["steps"] and {s["role"] for s in steps} == {"solver"}
