"""jobs/tiny-vllm.toml (2 rounds, every generating phase on vLLM's real engine) on the local Slurm,
with Slurm's warning signal (SIGUSR2, as preemption and the time limit send it to every process of
the job step, vLLM's engine-core and worker processes included) delivered to the solve array while
its tasks stream: each task must stop after its current item and requeue (exit 75), never crash,
and the run must complete with every generating shard on vLLM and training on what vLLM sampled.
(Its twin on the local executor was dropped to keep CI under an hour: the executors share every phase, and this run adds SIGUSR2 mid-stream.)"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from runlib import outcome, sgsbatch, status

from sgsbatch.run.attempts import STOPPED, attempt_log, attempts
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.slurm import job_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vllm"))
import vllmlib  # noqa: E402

pytestmark = [pytest.mark.slurm, pytest.mark.vllm, pytest.mark.slow]
CONFIG = vllmlib.REPO / "jobs" / "tiny-vllm.toml"


def _solve_job(run: str) -> str | None:
    """The Slurm array job id of the run's round-0 solve phase while one of its tasks runs."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%j|%T"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        jid, name, state = line.split("|")
        if name == job_name(run, 0, "solve") and state == "RUNNING":
            return jid.split("_")[0]
    return None


class SignalMidStream(threading.Thread):
    """Sends SIGUSR2 to the solve array once a task has logged some items but not all."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.stop, self.sent = run_dir, threading.Event(), ""

    def run(self) -> None:
        solve = self.run_dir / "rounds" / "r0000" / "solve"
        while not self.stop.wait(0.2):
            jid = _solve_job(self.run_dir.name)
            if jid is None:
                continue
            shard = Shard(solve, 0)
            total = shard.total()
            if total and 0 < shard.items_logged() < total:
                subprocess.run(["scancel", "--signal=USR2", jid], capture_output=True)
                self.sent = jid
                return


def _stopped_attempt_log(shard: Shard) -> str:
    """The output of the shard's attempt that stopped on the signal, read from where the attempt log
    keeps it once the requeued attempt started (read after the run: no race with that rename)."""
    recorded = attempts(shard)
    stopped = [a for a in recorded if a.outcome == STOPPED]
    assert stopped, f"no attempt of {shard.dir} stopped on the signal: {recorded}"
    return attempt_log(shard, stopped[0].number, recorded[-1].number).read_text(errors="replace")


def test_tiny_sgs_run_on_vllm_completes_on_slurm_through_a_warning_signal(slurm_cluster: object,
                                                                          tmp_path: Path) -> None:
    vllmlib.require_vllm()
    args = ["launch", str(CONFIG)]
    for o in (f"run.runs_dir={tmp_path}", "run.executor=slurm", "records.keep_sample_tokens=true",
              "shards.solve=1", "generation.max_in_flight=4"):
        args += ["--set", o]
    proc = sgsbatch(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = tmp_path / "tiny-vllm"
    signaller = SignalMidStream(run)
    signaller.start()
    deadline = time.time() + 3600  # a safety limit, not a measurement
    try:
        while status(tmp_path, "tiny-vllm")["state"] not in ("completed", "failed", "cancelled", "stalled"):
            assert time.time() < deadline, "the run did not end"
            time.sleep(5)
    finally:
        signaller.stop.set()
        signaller.join()
    st = status(tmp_path, "tiny-vllm")
    assert st["state"] == "completed" and st["rounds_completed"] == 2 and st["executor"] == "slurm", st
    assert signaller.sent, "the solve array was never caught mid-stream"
    shard = Shard(run / "rounds" / "r0000" / "solve", 0)
    log = _stopped_attempt_log(shard)
    assert "exiting for requeue" in log and "Traceback" not in log, log[-4000:]
    assert shard.failure_count() == 0
    vllmlib.check_vllm_run(run, 2)
    assert vllmlib.check_trained_on_vllm_samples(run, 1) > 0
    assert {r for r, _, _, _ in outcome(run)["steps"]} == {0, 1}
