"""`sgsbatch logs`: the right file for a round/phase/shard/attempt on both executors' layouts,
errors that list the valid choices, `--follow` that ends when the shard ends, and every attempt's
log kept across retries and `resume`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgsbatch.cli import main
from sgsbatch.run.attempts import archived_log, attempts, end_attempt, start_attempt
from sgsbatch.run.shards import Shard
from sgsbatch.scheduling.supervisor import FAILED, run_supervised
from sgsbatch.scheduling.worker import FAULT_ENV
from tests.runlib import recorded_run


def _logs(runs: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["logs", "t", "--runs-dir", str(runs), *args])
    return res.exit_code, res.output


def test_local_layout_finds_shard_log_and_lists_choices(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    solve = h.paths.phase_dir(0, "solve")
    solve.mkdir(parents=True, exist_ok=True)
    n = h.cfg.shard_count("solve")
    (solve / "shard_00000.attempt.log").write_text("shard zero says hi\n")
    (solve / f"shard_{n - 1:05d}.attempt.log").write_text("last shard here\n")
    code, out = _logs(tmp_path, "--round", "0", "--phase", "solve", "--shard", str(n - 1))
    assert code == 0, out
    assert "last shard here" in out and "shard zero" not in out
    code, out = _logs(tmp_path, "--round", "1", "--phase", "solve")  # a round of the run's, with no files yet
    assert code == 2 and "rounds that exist: 0" in out
    code, out = _logs(tmp_path, "--round", "5", "--phase", "solve")  # beyond the run's 2 rounds
    assert code == 2 and "--round 5: no such round; run t has rounds 0..1" in out
    code, out = _logs(tmp_path, "--phase", "nope")
    assert code != 0 and "solve" in out and "verify" in out
    code, out = _logs(tmp_path, "--phase", "solve", "--shard", "999")
    assert code != 0 and f"0..{n - 1}" in out
    code, out = _logs(tmp_path, "--phase", "solve", "--shard", "0", "--attempt", "2")
    assert code != 0 and "attempts: 1" in out


def test_slurm_layout_attempts_from_the_attempt_journal(tmp_path: Path) -> None:
    """Each attempt shows its own worker log and submitit's log of the job that ran it."""
    h = recorded_run(tmp_path, "t", executor="slurm")
    r, phase = 0, "verify"
    n = h.cfg.shard_count(phase)
    shard = Shard(h.paths.phase_dir(r, phase), n - 1)
    for job, task, text in (("101", n - 1, "first job"), ("202", 0, "second job")):
        d = h.paths.slurm / "r0000" / phase / f"{job}_{task}"
        d.mkdir(parents=True)
        (d / f"{job}_{task}_0_log.out").write_text(text + "\n")
        (d / f"{job}_{task}_0_log.err").write_text("")
    k = start_attempt(shard, f"101_{n - 1}")
    shard.attempt_log.write_text("worker then\n")
    end_attempt(shard, k, "crashed", 1, "worker exited with code 1: OSError: disk full")
    start_attempt(shard, "202_0")
    shard.attempt_log.write_text("worker now\n")
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1), "--attempt", "1")
    assert code == 0, out
    assert "first job" in out and "worker then" in out and "second job" not in out and "worker now" not in out
    assert f"attempt 1/2 (job 101_{n - 1}, crashed: worker exited with code 1: OSError: disk full)" in out
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1))
    assert code == 0 and "second job" in out and "worker now" in out and "attempt 2/2" in out
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1), "--attempt", "3")
    assert code != 0 and "attempts: 1..2" in out


def test_every_attempt_survives_resume_and_logs_shows_the_failed_shard(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A solve shard whose worker raises every time (SGSBATCH_FAULT_INJECT), run by the real supervisor:
    3 attempts, then the shard fails with one line of reason; `resume` clears the count (not the
    history) and a 4th attempt fails too. `logs RUN` then shows that shard, "attempt 4/4", and every
    earlier attempt's own log."""
    h = recorded_run(tmp_path, "t")
    monkeypatch.setenv(FAULT_ENV, "solve:1:raise:99")
    assert run_supervised(h.paths.root, 0, "solve", 1, max_retries=2) == FAILED
    shard = Shard(h.paths.phase_dir(0, "solve"), 1)
    reason = shard.failed_reason()
    assert reason is not None and "\n" not in reason
    assert reason.startswith("round 0 solve shard 1 failed 3 times; last: worker exited with code 1: RuntimeError: "
                             "injected fault")
    shard.clear_failures()  # what `resume` does
    assert run_supervised(h.paths.root, 0, "solve", 1, max_retries=0) == FAILED
    assert [a.outcome for a in attempts(shard)] == ["crashed"] * 4
    assert len(shard.failure_history()) == 5 and shard.failure_count() == 1  # 3 + the resume + 1
    code, out = _logs(tmp_path)
    assert code == 0, out
    assert "round 0 solve shard 1 attempt 4/4" in out and "RuntimeError: injected fault" in out
    code, out = _logs(tmp_path, "--attempt", "1")
    assert code == 0 and "attempt 1/4" in out and "Traceback" in out and str(archived_log(shard, 1)) in out


def test_follow_ends_when_the_shard_ends(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    phase = "train"
    d = h.paths.phase_dir(0, phase)
    d.mkdir(parents=True, exist_ok=True)
    log = d / "shard_00000.attempt.log"
    log.write_text("step 1\n")

    def work() -> None:
        time.sleep(0.5)
        with log.open("a") as f:
            f.write("step 2\n")
        time.sleep(0.3)
        with log.open("a") as f:
            f.write("step 3\n")
        Shard(d, 0).finish([], {"x": 1})

    t = threading.Thread(target=work)
    t.start()
    code, out = _logs(tmp_path, "--phase", phase, "--follow", "--poll", "0.05")
    t.join()
    assert code == 0, out
    assert out.index("step 1") < out.index("step 2") < out.index("step 3")
    assert json.loads((d / "shard_00000.done").read_text())["x"] == 1
