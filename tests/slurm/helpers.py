"""Helpers for tests against a real Slurm (the local one from ``slurm/cluster.sh up``).

Everything here shells out to the ordinary Slurm commands (sinfo, sbatch, squeue,
sacct, scontrol, scancel), exactly as the package does.  Waiting is by polling with
generous timeouts: these helpers wait for Slurm, they never measure it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

REQUIRE_ENV = "SGSBATCH_REQUIRE_SLURM"

# Job states after which a job does not run again by itself (a requeued job goes
# through PREEMPTED/REQUEUED to PENDING, so those are not final).
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)


def slurm_required() -> bool:
    """True when a missing cluster must fail the tests instead of skipping them (CI)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false", "no")


def run(cmd: Sequence[str], timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command; on failure raise with its output in the message."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
    return proc


@dataclass(frozen=True)
class SlurmCluster:
    """What the tests need to know about the cluster that answered."""

    node: str
    cpus: int
    partitions: tuple[str, ...]
    default_partition: str


def probe_cluster(timeout: float = 15) -> SlurmCluster | str:
    """The cluster if ``sinfo`` answers with a usable node, else a reason why not."""
    try:
        proc = run(["sinfo", "-h", "-N", "-o", "%N|%c|%P|%T"], timeout=timeout, check=False)
    except FileNotFoundError:
        return "`sinfo` is not installed (run slurm/cluster.sh up)"
    except subprocess.TimeoutExpired:
        return f"`sinfo` did not answer within {timeout:.0f}s (run slurm/cluster.sh up)"
    if proc.returncode != 0:
        return f"`sinfo` failed: {(proc.stderr or proc.stdout).strip()} (run slurm/cluster.sh up)"
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    if not rows:
        return "`sinfo` lists no nodes (run slurm/cluster.sh up)"
    partitions: list[str] = []
    default = ""
    for _node, _cpus, part, _state in rows:
        name = part.rstrip("*")
        if part.endswith("*"):
            default = name
        if name not in partitions:
            partitions.append(name)
    usable = [r for r in rows if r[3].rstrip("*~#$@+") in ("idle", "mixed", "allocated", "completing")]
    if not usable or usable[0][3].endswith("*"):
        states = ", ".join(f"{r[0]}={r[3]}" for r in rows)
        return f"no usable Slurm node ({states}); see slurm/cluster.sh status"
    node, cpus = usable[0][0], int(usable[0][1])
    return SlurmCluster(node=node, cpus=cpus, partitions=tuple(partitions), default_partition=default)


def sbatch(*args: str) -> str:
    """Submit with ``sbatch --parsable ARGS`` and return the job id."""
    proc = run(["sbatch", "--parsable", *args])
    return proc.stdout.strip().split(";")[0]


def write_script(path: Path, body: str) -> Path:
    """Write an executable bash job script."""
    path.write_text("#!/bin/bash\nset -u\n" + body.lstrip("\n"))
    path.chmod(0o755)
    return path


def _clean_state(state: str) -> str:
    # sacct writes e.g. "CANCELLED by 0"; squeue may add nothing; keep the word.
    return state.split()[0] if state.strip() else ""


def sacct_records(job_id: str, duplicates: bool = False) -> list[dict[str, str]]:
    """Allocation records (``sacct -X``) of a job or of every task of an array job.

    With ``duplicates`` (sacct -D) a requeued job shows one record per run.
    """
    fields = ["JobID", "State", "ExitCode", "Start", "End", "Partition"]
    cmd = ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(fields)]
    if duplicates:
        cmd.append("-D")
    proc = run(cmd, check=False)
    if proc.returncode != 0:
        return []
    rows = []
    for line in proc.stdout.splitlines():
        values = line.split("|")
        if len(values) == len(fields):
            row = dict(zip(fields, values, strict=True))
            row["State"] = _clean_state(row["State"])
            rows.append(row)
    return rows


def sacct_state(job_id: str) -> str | None:
    """The accounting state of one job (or array task, ``123_4``), None if sacct has no record yet."""
    for row in sacct_records(job_id):
        if row["JobID"] == job_id:
            return row["State"]
    return None


def live_states(job_id: str) -> dict[str, str]:
    """States slurmctld holds (squeue, including recently finished jobs); array tasks expanded."""
    proc = run(["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%i|%T"], check=False)
    if proc.returncode != 0:
        return {}
    states = {}
    for line in proc.stdout.splitlines():
        if "|" in line:
            jid, state = line.split("|", 1)
            states[jid.strip()] = _clean_state(state)
    return states


def job_states(job_id: str) -> dict[str, str]:
    """State of a job, or of each task of an array job: slurmctld first, then accounting."""
    states = live_states(job_id)
    if states:
        return states
    return {row["JobID"]: row["State"] for row in sacct_records(job_id)}


def wait_for_job(job_id: str, states: str | Iterable[str], timeout: float = 180) -> dict[str, str]:
    """Poll until the job (every task, for an array) is in one of ``states``.

    Fails at once if it reaches a final state that is not wanted, and after
    ``timeout`` seconds with what squeue/scontrol say about it.
    """
    wanted = {states} if isinstance(states, str) else set(states)
    deadline = time.monotonic() + timeout
    current: dict[str, str] = {}
    while True:
        current = job_states(job_id)
        if current and all(s in wanted for s in current.values()):
            return current
        bad = {j: s for j, s in current.items() if s in FINAL_STATES and s not in wanted}
        if bad:
            raise AssertionError(f"job {job_id} ended {bad}, wanted {sorted(wanted)}\n{describe_job(job_id)}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"job {job_id} not in {sorted(wanted)} after {timeout:.0f}s: {current or 'unknown'}\n"
                f"{describe_job(job_id)}"
            )
        time.sleep(0.5)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def scontrol_job(job_id: str) -> dict[str, str]:
    """``scontrol -o show job`` as key/value pairs ({} once slurmctld forgot the job)."""
    proc = run(["scontrol", "-o", "show", "job", job_id], check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {}
    info: dict[str, str] = {}
    for token in proc.stdout.splitlines()[0].split():
        key, sep, value = token.partition("=")
        if sep and key not in info:
            info[key] = value
    return info


def describe_job(job_id: str) -> str:
    """Everything Slurm says about a job, for failure messages."""
    parts = []
    for cmd in (
        ["scontrol", "show", "job", job_id],
        ["sacct", "-D", "-j", job_id, "-o", "JobID,State,ExitCode,Start,End,Partition,Reason%30"],
        ["squeue", "-a"],
    ):
        try:
            proc = run(cmd, check=False)
            parts.append(f"$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            parts.append(f"$ {shlex.join(cmd)}\n{exc}")
    return "\n".join(parts)


@dataclass
class JobGroup:
    """Submit jobs for one test; on exit, cancel those still queued or running.

    >>> with JobGroup(tmp_path) as jobs:
    ...     job = jobs.submit("--wrap", "true")
    """

    workdir: Path
    name: str = "sgsbatch-test"
    job_ids: list[str] = field(default_factory=list)

    def submit(self, *args: str) -> str:
        """``sbatch`` with the working directory, a job name, an output file and a time limit."""
        defaults = [
            f"--chdir={self.workdir}",
            f"--job-name={self.name}",
            f"--output={self.workdir}/slurm-%j.out",
            "--time=10",
        ]
        job_id = sbatch(*defaults, *args)
        self.job_ids.append(job_id)
        return job_id

    def cancel_all(self) -> None:
        for job_id in self.job_ids:
            if any(s not in FINAL_STATES for s in live_states(job_id).values()):
                run(["scancel", job_id], check=False)

    def __enter__(self) -> JobGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel_all()
