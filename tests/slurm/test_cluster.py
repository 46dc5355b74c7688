"""The local Slurm itself (slurm/cluster.sh): partitions, accounting, dependencies,
arrays, preemption with requeue, requeue by hand and signals.

These check the behaviour sgsbatch relies on, with real sbatch jobs whose scripts
write into pytest's tmp_path.  They only wait for Slurm (polling, generous
timeouts); nothing here is a timing assertion.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from helpers import (
    JobGroup,
    SlurmCluster,
    describe_job,
    run,
    sacct_records,
    sacct_state,
    scontrol_job,
    wait_for_job,
    wait_until,
    write_script,
)

pytestmark = pytest.mark.slurm

BATCH = "batch"
URGENT = "urgent"


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_partitions_exist(slurm_cluster: SlurmCluster) -> None:
    assert BATCH in slurm_cluster.partitions
    assert URGENT in slurm_cluster.partitions
    assert slurm_cluster.default_partition == BATCH
    parts = {}
    for name in (BATCH, URGENT):
        out = run(["scontrol", "-o", "show", "partition", name]).stdout
        parts[name] = dict(t.partition("=")[::2] for t in out.split() if "=" in t)
        assert parts[name]["State"] == "UP", out
    assert int(parts[URGENT]["PriorityTier"]) > int(parts[BATCH]["PriorityTier"])
    assert parts[BATCH]["PreemptMode"] == "REQUEUE"
    assert parts[URGENT]["PreemptMode"] == "OFF"
    config = run(["scontrol", "show", "config"]).stdout
    assert "preempt/partition_prio" in config
    assert "preempt_send_user_signal" in config
    assert "accounting_storage/slurmdbd" in config


def test_sacct_reports_finished_jobs(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    with JobGroup(tmp_path) as jobs:
        ok = jobs.submit("--wrap", "echo hello > ok.txt")
        bad = jobs.submit("--wrap", "exit 3")
        wait_for_job(ok, "COMPLETED")
        wait_for_job(bad, "FAILED")
    assert (tmp_path / "ok.txt").read_text().strip() == "hello"
    # Accounting may trail slurmctld by a moment.
    wait_until(lambda: sacct_state(ok) == "COMPLETED", 60, f"sacct to report {ok} COMPLETED")
    wait_until(lambda: sacct_state(bad) == "FAILED", 60, f"sacct to report {bad} FAILED")
    (bad_row,) = [r for r in sacct_records(bad) if r["JobID"] == bad]
    assert bad_row["ExitCode"] == "3:0"


def test_afterok_chain(
    slurm_cluster: SlurmCluster, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with JobGroup(tmp_path) as jobs:
        first = jobs.submit("--wrap", "sleep 2; echo first > first.txt")
        second = jobs.submit(f"--dependency=afterok:{first}", "--wrap", "cat first.txt > second.txt")
        third = jobs.submit(f"--dependency=afterok:{second}", "--wrap", "cat second.txt > third.txt")
        wait_for_job(third, "COMPLETED")
        # A failed predecessor never satisfies afterok: the dependent job stays
        # pending (DependencyNeverSatisfied) until someone repairs or cancels it.
        failed = jobs.submit("--wrap", "exit 1")
        orphan = jobs.submit(f"--dependency=afterok:{failed}", "--wrap", "touch orphan.txt")
        wait_for_job(failed, "FAILED")
        wait_until(
            lambda: scontrol_job(orphan).get("Reason") == "DependencyNeverSatisfied",
            60,
            f"{orphan} to show DependencyNeverSatisfied",
        )
        assert scontrol_job(orphan)["JobState"] == "PENDING"
    assert (tmp_path / "third.txt").read_text().strip() == "first"
    assert not (tmp_path / "orphan.txt").exists()

    wait_until(lambda: sacct_state(third) == "COMPLETED", 60, "sacct to see the chain")
    rows = {r["JobID"]: r for r in sacct_records(",".join([first, second, third]))}
    delays = []
    for before, after in ((first, second), (second, third)):
        end, start = _time(rows[before]["End"]), _time(rows[after]["Start"])
        assert start >= end, (rows[before], rows[after])
        delays.append((start - end).total_seconds())
    # Informational (seconds, 1 s resolution): how soon a dependent job starts.
    record_property("dependency_start_delays_s", delays)
    print(f"afterok start delays after predecessor end: {delays} s")


def test_array_aftercorr(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    n = 4
    with JobGroup(tmp_path) as jobs:
        produce = jobs.submit(
            f"--array=0-{n - 1}",
            "--output=produce-%A_%a.out",
            "--wrap",
            "sleep $((SLURM_ARRAY_TASK_ID % 2 * 2)); echo $SLURM_ARRAY_TASK_ID > a_$SLURM_ARRAY_TASK_ID.txt",
        )
        consume = jobs.submit(
            f"--array=0-{n - 1}",
            f"--dependency=aftercorr:{produce}",
            "--output=consume-%A_%a.out",
            "--wrap",
            "cat a_$SLURM_ARRAY_TASK_ID.txt > b_$SLURM_ARRAY_TASK_ID.txt",
        )
        wait_for_job(produce, "COMPLETED")
        states = wait_for_job(consume, "COMPLETED")
    assert sorted(states) == [f"{consume}_{i}" for i in range(n)]
    for i in range(n):
        assert (tmp_path / f"b_{i}.txt").read_text().strip() == str(i)

    def all_recorded() -> bool:
        return all([r["State"] for r in sacct_records(a)] == ["COMPLETED"] * n for a in (produce, consume))

    wait_until(all_recorded, 60, "sacct to record every task of both arrays COMPLETED")
    produced = {r["JobID"]: r for r in sacct_records(produce)}
    for row in sacct_records(consume):
        task = row["JobID"].split("_")[1]
        assert _time(row["Start"]) >= _time(produced[f"{produce}_{task}"]["End"])


def test_after_on_an_array_task_starts_with_it(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """`after:JOB_TASK` (how a streaming verify task waits for its solve task): the dependent job starts
    once that task has started, while it still runs, not after it ended."""
    with JobGroup(tmp_path) as jobs:
        produce = jobs.submit("--array=0", "--output=produce-%A_%a.out", "--wrap",
                              "touch started; for i in $(seq 1 1200); do [ -e follower_ran ] && break; sleep 0.1; done; "
                              "touch ended")
        # the follower may start the moment Slurm starts the task, before the task's script has run its first
        # line: it waits for `started`, then must find the task still running
        follow = jobs.submit(f"--dependency=after:{produce}_0", "--output=follow.out", "--wrap",
                             "for i in $(seq 1 600); do [ -e started ] && break; sleep 0.1; done; "
                             "[ -e started ] && [ ! -e ended ] && touch follower_ran")
        wait_for_job(produce, "COMPLETED")
        wait_for_job(follow, "COMPLETED")
    assert (tmp_path / "follower_ran").exists(), "the follower ran while the task it waited for was running"


# A job that notes each start and each SIGUSR2 it receives.  The first run loops
# until it is signalled/killed; a run after a requeue (SLURM_RESTART_COUNT >= 1)
# finishes at once, as a job that resumed from its checkpoint would.
_TRAP_BODY = """
log={log}
echo "start ${{SLURM_RESTART_COUNT:-0}}" >> "$log"
if [ "${{SLURM_RESTART_COUNT:-0}}" -ge 1 ]; then echo done >> "$log"; exit 0; fi
trap 'echo usr2 >> "$log"{on_usr2}' USR2
for i in $(seq 1 3000); do sleep 0.2; done
echo "not signalled" >> "$log"
exit 1
"""


def _trap_script(path: Path, log: Path, where: str, on_usr2: str = "") -> Path:
    """``where``: "batch" traps in the batch shell; "step" in an srun step (as submitit runs)."""
    body = _TRAP_BODY.format(log=log, on_usr2=on_usr2)
    if where == "batch":
        return write_script(path, body)
    step = write_script(path.with_suffix(".step.sh"), body)
    return write_script(path, f"srun --ntasks=1 {step}\n")


@pytest.mark.parametrize("where", ["batch", "step"])
def test_preemption_signals_requeues_and_completes(
    slurm_cluster: SlurmCluster, tmp_path: Path, where: str
) -> None:
    log = tmp_path / "victim.log"
    script = _trap_script(tmp_path / "victim.sh", log, where)
    # B:USR2 signals the batch shell; plain USR2 signals the job steps (submitit's form).
    signal = "--signal=B:USR2@60" if where == "batch" else "--signal=USR2@60"
    with JobGroup(tmp_path) as jobs:
        victim = jobs.submit(f"--partition={BATCH}", "--cpus-per-task=1", "--requeue", signal, str(script))
        wait_for_job(victim, "RUNNING")
        wait_until(lambda: _lines(log) == ["start 0"], 60, "the victim to start")
        urgent = jobs.submit(
            f"--partition={URGENT}",
            f"--cpus-per-task={slurm_cluster.cpus}",
            "--wrap",
            "sleep 3; echo urgent > urgent.txt",
        )
        wait_until(lambda: "usr2" in _lines(log), 120, f"SIGUSR2 in {log} ({describe_job(victim)})")
        wait_for_job(urgent, "COMPLETED", timeout=300)
        wait_for_job(victim, "COMPLETED", timeout=300)
        restarts = scontrol_job(victim).get("Restarts")
    assert (tmp_path / "urgent.txt").exists()
    assert _lines(log) == ["start 0", "usr2", "start 1", "done"], _lines(log)
    if restarts is not None:  # slurmctld still holds the finished job (MinJobAge)
        assert int(restarts) >= 1
    wait_until(
        lambda: [r["State"] for r in sacct_records(victim, duplicates=True)][-1:] == ["COMPLETED"],
        60,
        "sacct to record the victim's second run",
    )
    runs = [r["State"] for r in sacct_records(victim, duplicates=True)]
    assert runs[0] in ("PREEMPTED", "REQUEUED"), runs
    assert len(runs) >= 2, runs


def test_scontrol_requeue_running_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    script = _trap_script(tmp_path / "job.sh", log, "batch")
    with JobGroup(tmp_path) as jobs:
        job = jobs.submit("--requeue", str(script))
        wait_for_job(job, "RUNNING")
        wait_until(lambda: _lines(log) == ["start 0"], 60, "the job to start")
        run(["scontrol", "requeue", job])
        wait_for_job(job, "COMPLETED", timeout=300)
        restarts = scontrol_job(job).get("Restarts")
    assert _lines(log) == ["start 0", "start 1", "done"], _lines(log)
    if restarts is not None:
        assert int(restarts) >= 1


@pytest.mark.parametrize("where", ["batch", "step"])
def test_scancel_signal_usr2(slurm_cluster: SlurmCluster, tmp_path: Path, where: str) -> None:
    log = tmp_path / "job.log"
    script = _trap_script(tmp_path / "job.sh", log, where, on_usr2="; exit 0")
    with JobGroup(tmp_path) as jobs:
        job = jobs.submit(str(script))
        wait_for_job(job, "RUNNING")
        wait_until(lambda: _lines(log) == ["start 0"], 60, "the job to start")
        if where == "step":
            wait_until(lambda: bool(run(["squeue", "-h", "-s", "-j", job]).stdout.strip()), 60, "the step")
        # --batch: the batch shell only; without it, the job steps (not the shell).
        extra = ["--batch"] if where == "batch" else []
        run(["scancel", "--signal=USR2", *extra, job])
        wait_for_job(job, "COMPLETED")
    assert _lines(log) == ["start 0", "usr2"], _lines(log)
