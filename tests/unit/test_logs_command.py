"""`sgsbatch logs`: the right file for a round/phase/shard/attempt on both executors' layouts,
errors that list the valid choices, and `--follow` that ends when the shard ends."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from click.testing import CliRunner

from sgsbatch.cli import main
from sgsbatch.run.journal import journal_job
from sgsbatch.run.shards import Shard
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
    code, out = _logs(tmp_path, "--round", "5", "--phase", "solve")
    assert code != 0 and "rounds that exist: 0" in out
    code, out = _logs(tmp_path, "--phase", "nope")
    assert code != 0 and "solve" in out and "verify" in out
    code, out = _logs(tmp_path, "--phase", "solve", "--shard", "999")
    assert code != 0 and f"0..{n - 1}" in out
    code, out = _logs(tmp_path, "--phase", "solve", "--shard", "0", "--attempt", "2")
    assert code != 0 and "attempts with logs: 1" in out


def test_slurm_layout_attempts_from_the_job_journal(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t", executor="slurm")
    r, phase = 0, "verify"
    n = h.cfg.shard_count(phase)
    journal_job(h.paths.jobs_journal(r), {"phase": phase, "job_id": "101", "shards": list(range(n))})
    journal_job(h.paths.jobs_journal(r), {"phase": phase, "job_id": "202", "shards": [n - 1]})
    for job, task, text in (("101", n - 1, "first attempt"), ("202", 0, "second attempt")):
        d = h.paths.slurm / "r0000" / phase / f"{job}_{task}"
        d.mkdir(parents=True)
        (d / f"{job}_{task}_0_log.out").write_text(text + "\n")
        (d / f"{job}_{task}_0_log.err").write_text("")
    h.paths.phase_dir(r, phase).mkdir(parents=True, exist_ok=True)
    (h.paths.phase_dir(r, phase) / f"shard_{n - 1:05d}.attempt.log").write_text("worker now\n")
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1), "--attempt", "1")
    assert code == 0, out
    assert "first attempt" in out and "second attempt" not in out and "worker now" not in out
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1))
    assert code == 0 and "second attempt" in out and "worker now" in out
    code, out = _logs(tmp_path, "--phase", phase, "--shard", str(n - 1), "--attempt", "3")
    assert code != 0 and "attempts with logs: 1..2" in out


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
