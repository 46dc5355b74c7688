"""Whole tiny runs on the real local Slurm: completion, preemption, stalls, crashes, repair.

Every run here is `jobs/tiny.toml` (tiny-random models, transformers backend, DeepSpeed on
CPU, the SIMULATED verifier). Waiting is by polling; nothing here measures time.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import sacct_records, wait_until
from runlib import TINY, launch_args, outcome, repair_steps, run_advice, sgsbatch, status

from sgsbatch.scheduling.slurm import is_run_job

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
# the whole-run comparisons (reference, chaos, local twin, lost database) run 2 rounds of tiny.toml:
# round 1 is the first to start from trained weights and the stored proofs; a third adds CI time, not cases
ROUNDS = "run.rounds=2"


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm-runs")


SHIM = """#!/bin/sh
# counts the calls made by `sgsbatch ... --wait` (the CLI), then runs the real {cmd}
case "$(tr '\\0' ' ' < /proc/$PPID/cmdline)" in *sgsbatch.cli*) echo {cmd} >> "{log}" ;; esac
exec {real} "$@"
"""


@pytest.fixture(scope="session")
def reference(slurm_cluster: object, runs_root: Path) -> dict[str, Any]:
    """An uninterrupted tiny run on Slurm (seed 0), its `--wait` scheduler calls counted (PATH shims)."""
    shims = runs_root / "shims"
    shims.mkdir()
    for cmd in ("squeue", "sacct"):
        real = shutil.which(cmd)
        assert real is not None
        (shims / cmd).write_text(SHIM.format(cmd=cmd, real=real, log=runs_root / "polls.log"))
        (shims / cmd).chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    t0 = time.time()
    proc = sgsbatch(*launch_args(runs_root, "ref", "run.executor=slurm", ROUNDS), "--wait", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (runs_root / "ref" / "wait_s").write_text(str(time.time() - t0))
    (runs_root / "ref" / "wait_out").write_text(proc.stdout)
    return outcome(runs_root / "ref")


def test_wait_is_light_on_the_scheduler(reference: dict[str, Any], runs_root: Path) -> None:
    """`--wait` polls squeue every run.poll_interval_s (2 s in tiny.toml) and asks sacct only when a
    job leaves the queue: at most once per job of the run (issue 18 part 6)."""
    calls = (runs_root / "polls.log").read_text().split()
    wait_s = float((runs_root / "ref" / "wait_s").read_text())
    with sqlite3.connect(runs_root / "ref" / "state.db") as con:
        jobs = con.execute("select count(*) from slurm_jobs").fetchone()[0]
    squeue, sacct = calls.count("squeue"), calls.count("sacct")
    assert 0 < squeue <= wait_s / 2 + 5, (squeue, wait_s)
    assert sacct <= jobs, (sacct, jobs)


def test_tiny_run_completes_on_slurm_with_every_phase_working(reference: dict[str, Any], runs_root: Path) -> None:
    # `--wait` prints a line per change of state: a round's hand-over never read as a stall
    lines = (runs_root / "ref" / "wait_out").read_text().splitlines()
    assert not [x for x in lines if ": stalled " in x], lines
    assert sum(": completed " in x for x in lines) == 1, lines  # the end, printed once
    st = status(runs_root, "ref")
    assert st["state"] == "completed" and st["rounds_completed"] == st["rounds"] == 2
    assert st["simulated"] is True and st["executor"] == "slurm"
    assert 0.0 < st["metrics"]["cumulative_solve_rate"] <= 1.0
    verdicts = {a[3] for a in reference["attempts"]}
    assert {"verified", "failed"} <= verdicts  # some verify and some fail
    assert any(c[3] == "ok" for c in reference["conjectures"])  # conjectures produced and parsed
    assert reference["reviews"], "the guide scored in-band conjectures"
    steps = {(r, role): s for r, role, s, _ in reference["steps"]}
    assert any(s > 0 for (_, role), s in steps.items() if role == "solver")
    assert any(s > 0 for (_, role), s in steps.items() if role == "conjecturer")
    assert (runs_root / "ref" / "tb").is_dir() and list((runs_root / "ref" / "tb").glob("events.out.tfevents.*"))


def _jobs(run: str) -> list[tuple[str, str, str, float]]:
    """(job id, phase, state, seconds running) of this run's jobs in the queue."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%j|%T|%M"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        jid, name, state, elapsed = line.split("|")
        if is_run_job(name, run):
            parts = [int(x) for x in elapsed.replace("-", ":").split(":")]
            secs = sum(v * 60**i for i, v in enumerate(reversed(parts)))
            rows.append((jid, name.rsplit(".", 1)[1], state, float(secs)))
    return rows


class Chaos(threading.Thread):
    """Preempts running phase jobs at random moments, cycling through three ways, until stopped."""

    ACTIONS = ("requeue", "usr2", "preempt")

    def __init__(self, run: str, out_dir: Path, seed: int = 1) -> None:
        super().__init__(daemon=True)
        self.run_name, self.rng, self.stop = run, random.Random(seed), threading.Event()
        self.out_dir = out_dir  # the preemptor jobs' output goes here, not into the working directory
        self.hits: list[tuple[str, str, str]] = []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            jobs = _jobs(self.run_name)
            hit_phases = {p for p, _, _ in self.hits}
            hit_jobs = {j for _, _, j in self.hits}
            # a phase kind not hit yet is queued: watch closely, some tasks run for under a second
            eager = any(j[1] not in hit_phases for j in jobs)
            self.stop.wait(self.rng.uniform(0.03, 0.15) if eager else self.rng.uniform(2.0, 6.0))
            # each job (array task) is hit at most once, so the run always makes progress
            now = _jobs(self.run_name)
            running = [j for j in now if j[2] == "RUNNING" and j[0] not in hit_jobs]
            fresh = [j for j in running if j[1] not in hit_phases] or running
            if not fresh:
                continue
            # the way used least so far (cycle order on ties), so that no way is starved. A requeue
            # is absorbed at any moment. SIGUSR2 goes to a task running for a second or more: its
            # Python then ignores or handles it (scheduling/slurm.python_command), while in its
            # first milliseconds, before its shell's `trap`, it would still die of it. A preemption
            # signals a victim Slurm picks, so it starts only while no task of the run is that young.
            used = [a for _, a, _ in self.hits]
            order = sorted(self.ACTIONS, key=lambda a: (used.count(a), (self.ACTIONS.index(a) - n) % 3))
            old = [j for j in fresh if j[3] >= 1] or [j for j in running if j[3] >= 1]
            settled = all(j[3] >= 1 for j in now if j[2] == "RUNNING")
            action = next(a for a in order if (a != "usr2" or old) and (a != "preempt" or settled))
            jid, phase, _, _ = self.rng.choice(old if action == "usr2" else fresh)
            n += 1
            if action == "requeue":
                subprocess.run(["scontrol", "requeue", jid], capture_output=True)
            elif action == "usr2":
                subprocess.run(["scancel", "--signal=USR2", jid], capture_output=True)
            else:
                subprocess.run(["sbatch", "-p", "urgent", "-n", "1", "-c", "2", "--mem=500M", "-J", "preemptor",
                                "--output", str(self.out_dir / "preemptor-%j.out"), "--wrap", "sleep 3"], capture_output=True)
            self.hits.append((phase, action, jid))


def test_preempted_run_ends_exactly_like_an_uninterrupted_one(reference: dict[str, Any], runs_root: Path) -> None:
    launch = sgsbatch(*launch_args(runs_root, "chaos", "run.executor=slurm", ROUNDS))
    assert launch.returncode == 0, launch.stderr
    chaos = Chaos("chaos", runs_root)
    chaos.start()
    try:
        st = _wait(runs_root, "chaos")
    finally:
        chaos.stop.set()
        chaos.join()
    assert st["state"] == "completed", st
    got = outcome(runs_root / "chaos")
    for key in ("attempts", "solved", "store", "conjectures", "reviews", "steps"):
        assert got[key] == reference[key], key
    kinds = {p for p, _, _ in chaos.hits}
    assert {"conjecture", "solve", "verify", "train"} <= kinds, chaos.hits
    assert {a for _, a, _ in chaos.hits} == set(Chaos.ACTIONS)
    restarts = sacct_restarts([jid for _, _, jid in chaos.hits])
    assert restarts > 0


def sacct_restarts(job_ids: list[str]) -> int:
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", ",".join(job_ids), "-o", "JobID,State"],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.split("|")[1].startswith(("REQUEUED", "PREEMPTED")))


def _wait(runs_root: Path, name: str, until: tuple[str, ...] = ("completed", "failed", "cancelled"),
          limit_s: float = 1800) -> dict[str, Any]:
    """Poll status until it reaches one of `until` (a generous safety limit, not a measurement)."""
    deadline = time.time() + limit_s
    while True:
        st = status(runs_root, name)
        if st["state"] in until or time.time() > deadline:
            return st
        time.sleep(3)


def test_cancelled_pending_job_stalls_the_run_and_resume_completes_it(slurm_cluster: object, runs_root: Path) -> None:
    name = "stall"
    launch = sgsbatch(*launch_args(runs_root, name, "run.executor=slurm", "run.rounds=1"))
    assert launch.returncode == 0, launch.stderr
    victim = None
    deadline = time.time() + 600
    while victim is None and time.time() < deadline:
        victim = next((j for j in _jobs(name) if j[1] == "train" and j[2] == "PENDING"), None)
        time.sleep(0.5)
    assert victim is not None
    subprocess.run(["scancel", victim[0]], check=True)
    st = _wait(runs_root, name, until=("stalled", "completed"))
    assert st["state"] == "stalled", st
    for step in repair_steps(st["message"]):  # what the message advises, run as printed (issue 28)
        res = run_advice(step, dict(os.environ))
        assert res.returncode == 0, res.stdout + res.stderr
    assert _wait(runs_root, name, until=("completed", "stalled"))["state"] == "completed"


def test_crashing_task_is_retried_then_stalls_and_resume_repairs(slurm_cluster: object, runs_root: Path,
                                                                 cli_env: dict[str, str]) -> None:
    """Solve shard 1 raises every time (verify = 2 x solve): retried, then out of retries. The verify
    shards of solve shard 0 still finish; the stall reads as one line naming the exception and the
    `logs` command, `logs RUN` shows that shard's last attempt, `watch` exits 1 and notifies; after
    `resume` the shard completes and every attempt's log and failure is still there."""
    name = "crash"
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "conjecture:0:kill9:1,solve:1:raise:99"}
    launch = sgsbatch(*launch_args(runs_root, name, "run.executor=slurm", "run.rounds=1",
                                   "run.max_task_retries=1", "shards.verify=4"), env=env)
    assert launch.returncode == 0, launch.stderr
    st = _wait(runs_root, name, until=("stalled", "completed"))
    assert st["state"] == "stalled" and st["stall"] == "shard_out_of_retries", st
    assert "solve shard 1 failed 2 times" in st["message"] and "RuntimeError: injected fault" in st["message"]
    assert "\n" not in st["message"] and f"`sgsbatch logs {name} --runs-dir" in st["message"]
    phase_dir = runs_root / name / "rounds" / "r0000"
    assert (phase_dir / "conjecture" / "shard_00000.failures").read_text().count("signal 9") == 1
    assert (phase_dir / "conjecture" / "shard_00000.done").exists()  # the kill -9 was retried and finished
    assert len((phase_dir / "solve" / "shard_00001.failures").read_text().splitlines()) == 2
    # verify shards 0 and 2 check solve shard 0: they run although solve shard 1 is lost
    verify = phase_dir / "verify"
    deadline = time.time() + 600
    while not all((verify / f"shard_{i:05d}.done").exists() for i in (0, 2)):
        assert time.time() < deadline, "the verify shards of the finished solve shard never ran"
        time.sleep(2)
    assert not any((verify / f"shard_{i:05d}.done").exists() for i in (1, 3))
    logs = sgsbatch("logs", name, "--runs-dir", str(runs_root), env=cli_env)
    assert logs.returncode == 0, logs.stderr
    assert "round 0 solve shard 1 attempt 2/2" in logs.stderr and "crashed" in logs.stderr
    assert "Traceback" in logs.stdout and "injected fault" in logs.stdout
    told = runs_root / f"{name}-told.txt"
    watch = sgsbatch("watch", name, "--runs-dir", str(runs_root), "--interval", "1", "--notify",
                     f'echo "$SGSBATCH_EVENT $SGSBATCH_STATE" >> {told}', env=cli_env)
    assert watch.returncode == 1, watch.stdout + watch.stderr  # a person must fix the cause
    assert told.read_text().split() == ["needs-person", "stalled"]
    res = sgsbatch("resume", name, "--runs-dir", str(runs_root), "--wait", env=cli_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert status(runs_root, name)["state"] == "completed"
    logs = sgsbatch("logs", name, "--runs-dir", str(runs_root), "--phase", "solve", "--shard", "1", env=cli_env)
    assert "attempt 3/3" in logs.stderr and "done" in logs.stderr
    first = sgsbatch("logs", name, "--runs-dir", str(runs_root), "--phase", "solve", "--shard", "1",
                     "--attempt", "1", env=cli_env)
    assert "attempt 1/3" in first.stderr and "injected fault" in first.stdout


def test_local_executor_gives_the_same_run(reference: dict[str, Any], runs_root: Path) -> None:
    """The local executor runs the same DAG: same seed, same attempts, verdicts and steps as Slurm."""
    proc = sgsbatch(*launch_args(runs_root, "local-twin", "run.executor=local", ROUNDS), "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = outcome(runs_root / "local-twin")
    for key in ("attempts", "solved", "conjectures", "reviews", "steps"):
        assert got[key] == reference[key], key


def test_database_lost_mid_run_is_rebuilt_and_the_chain_goes_on(reference: dict[str, Any], runs_root: Path) -> None:
    """At round 1 the database is deleted; `rebuild` restores it and the running chain completes."""
    name = "lostdb"
    launch = sgsbatch(*launch_args(runs_root, name, "run.executor=slurm", ROUNDS))
    assert launch.returncode == 0, launch.stderr
    deadline = time.time() + 1200
    while not any(p == "solve" and s == "RUNNING" for _, p, s, _ in _jobs(name)) or \
            not (runs_root / name / "rounds" / "r0001").is_dir():
        assert time.time() < deadline, "round 1 never started"
        time.sleep(0.5)
    db = runs_root / name / "state.db"
    before = sqlite_rows(db, "SELECT round, phase, job_id, shards FROM slurm_jobs ORDER BY round, phase")
    db.unlink()
    res = sgsbatch("rebuild", name, "--runs-dir", str(runs_root))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 of 2 rounds completed" in res.stdout
    assert sqlite_rows(db, "SELECT round, phase, job_id, shards FROM slurm_jobs ORDER BY round, phase") == before
    st = _wait(runs_root, name)
    assert st["state"] == "completed", st
    got = outcome(runs_root / name)
    for key in ("attempts", "solved", "store", "conjectures", "reviews", "steps"):
        assert got[key] == reference[key], key
    phases = {(r, p) for r, p in sqlite_rows(db, "SELECT round, phase FROM slurm_jobs")}
    assert {p for r, p in phases if r == 1} >= {"conjecture", "solve", "verify", "train"}


def sqlite_rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_a_signal_in_a_tasks_first_moments_does_not_fail_it(slurm_cluster: object, runs_root: Path) -> None:
    """SIGUSR2 (a preemption's first signal, the time-limit warning) the moment a task starts: the task
    starts with it ignored until its handlers are installed, so the run still completes."""
    name = "early"
    launch = sgsbatch(*launch_args(runs_root, name, "run.executor=slurm", "run.rounds=1"))
    assert launch.returncode == 0, launch.stderr
    signalled: set[tuple[str, str]] = set()
    trained = runs_root / name / "rounds" / "r0000" / "train" / "shard_00000.done"
    deadline = time.time() + 900
    while time.time() < deadline and not trained.exists() and "train" not in {p for p, _ in signalled}:
        for jid, phase, state, secs in _jobs(name):
            if state == "RUNNING" and secs < 1 and (phase, jid) not in signalled:
                # 0.2 s in: the task's Python is starting or importing submitit, no handler yet (the
                # window that used to be fatal); the first milliseconds, before the step's shell ran
                # its `trap`, stay open (a preemption landing there is vanishingly rare)
                time.sleep(0.2)
                subprocess.run(["scancel", "--signal=USR2", jid], capture_output=True)
                signalled.add((phase, jid))
        time.sleep(0.02)
    st = _wait(runs_root, name, until=("completed", "stalled", "failed"))
    assert st["state"] == "completed", (st, sorted(signalled))
    # tasks of at least three phases were signalled in their first moments (which ones the poll catches
    # depends on the machine's load: a busy squeue can miss the one-task init)
    assert len({p for p, _ in signalled}) >= 3, signalled


FIRST_RUN_DIES = """#!/bin/sh
# stands in for the task's Python: the first run dies of SIGUSR2 at once (a signal that reached the
# step before its shell's `trap`), a requeued run is the real interpreter
if [ "${{SLURM_RESTART_COUNT:-0}}" = 0 ]; then
    exec {python} -c 'import os, signal; signal.signal(signal.SIGUSR2, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGUSR2)'
fi
exec {python} "$@"
"""


def test_a_task_killed_by_sigusr2_as_it_starts_is_requeued_not_failed(slurm_cluster: object, tmp_path: Path) -> None:
    """The job script sgsbatch submits (submitit with `_parameters_for`), its task step killed by
    SIGUSR2 in its first moment: the script requeues the task and the second run completes, instead
    of a FAILED job that would leave its dependent jobs waiting for a person."""
    import submitit

    from sgsbatch.config.loading import load_config
    from sgsbatch.scheduling.slurm import _parameters_for, python_command

    fake = tmp_path / "python"
    fake.write_text(FIRST_RUN_DIES.format(python=sys.executable))
    fake.chmod(0o755)
    ex = submitit.SlurmExecutor(folder=tmp_path / "%j", max_num_timeout=0, python=python_command(str(fake)))
    ex.update_parameters(**_parameters_for(load_config(TINY), 0, "init", 1, None))
    job = ex.submit(sum, [20, 22])
    assert job.result() == 42  # waits for the job: it ran again after the requeue

    def runs() -> list[str]:
        return [r["State"] for r in sacct_records(job.job_id, duplicates=True)]

    # accounting records the last run's end a moment after the job's result is written
    wait_until(lambda: runs()[-1:] == ["COMPLETED"], 60, "sacct to record the second run COMPLETED")
    assert "REQUEUED" in runs()[:-1], runs()


def test_a_shard_that_cannot_finish_within_its_time_limit_stalls_instead_of_looping(
        slurm_cluster: object, runs_root: Path, cli_env: dict[str, str]) -> None:
    """A verify shard that hangs (a proof longer than the time limit) reaches `slurm.verify.time_min`
    (1 min) and is killed; resumed, it reaches it again without a new item: the shard is failed
    with the reason and the keys to raise, and the run stalls for a person (issue 18 part 5)."""
    name = "timelimit"
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "verify:0:hang:99"}
    args = launch_args(runs_root, name, "run.executor=slurm", "run.rounds=1", "slurm.verify.time_min=1",
                       "slurm.verify.signal_delay_s=30")
    assert (launch := sgsbatch(*args, env=env)).returncode == 0, launch.stderr
    st = _wait(runs_root, name, until=("stalled", "completed", "failed"))
    assert st["state"] == "stalled" and st["stall"] != "shard_out_of_retries", st  # once: the chain broke
    limits = runs_root / name / "rounds" / "r0000" / "verify" / "shard_00000.timelimits"
    assert len(limits.read_text().splitlines()) == 1
    assert (res := sgsbatch("resume", name, "--runs-dir", str(runs_root), env=env)).returncode == 0, res.stderr
    deadline = time.time() + 900
    while time.time() < deadline:
        st = status(runs_root, name)
        if st["stall"] == "shard_out_of_retries":
            break
        time.sleep(3)
    assert st["state"] == "stalled" and st["stall"] == "shard_out_of_retries", st
    assert "round 0 verify shard 0 reached its time limit twice without finishing a new item" in st["message"]
    # the advised repair, run as printed (issue 28), once the hang is gone: a longer limit, and the run completes
    steps = repair_steps(st["message"])
    assert "slurm.verify.time_min=2" in steps[-1], steps
    for step in steps:
        assert (res := run_advice(step, cli_env)).returncode == 0, res.stdout + res.stderr
    st = _wait(runs_root, name, until=("completed", "stalled", "failed"))
    assert st["state"] == "completed", st
