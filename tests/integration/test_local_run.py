"""A whole tiny run on the local executor (no Slurm needed), and local stall/resume."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow


def test_tiny_run_completes_locally(tmp_path: Path, cli_env: dict[str, str]) -> None:
    proc = sgsbatch(*launch_args(tmp_path, "loc", "run.executor=local"), "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    st = status(tmp_path, "loc")
    assert st["state"] == "completed" and st["rounds_completed"] == 3 and st["executor"] == "local"
    assert st["simulated"] is True
    out = outcome(tmp_path / "loc")
    assert {"verified", "failed"} <= {a[3] for a in out["attempts"]}
    assert len({a[0] for a in out["attempts"]}) == 3
    assert set(st["metrics"]) >= {"cumulative_solve_rate", "pass@8", "pass@1", "generations/total"}
    # every optimizer step of the real trainer on TensorBoard, once, at its global step (round/step_metrics.py)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for role in ("solver", "conjecturer"):
        total = sum(steps for _, who, steps, _ in out["steps"] if who == role)
        assert total > 0 or role == "conjecturer", out["steps"]
        acc = EventAccumulator(str(tmp_path / "loc" / "tb" / "train_steps" / role), size_guidance={"scalars": 0})
        acc.Reload()
        points = [e.step for e in acc.Scalars(f"train_step/{role}/loss")] if total else []
        assert points == list(range(1, total + 1)), (role, points, out["steps"])

    # the finished run drawn and shared (issue 14, parts 5 and 6; tests/integration/test_report.py has more)
    png, page = tmp_path / "fit.png", tmp_path / "loc.html"
    drawn = sgsbatch("fit", "loc", "--runs-dir", str(tmp_path), "--plot", str(png), env=cli_env)
    assert drawn.returncode == 1 and "Error: only" in drawn.stderr  # 3 rounds: drawn, too few to fit
    assert png.read_bytes()[:4] == b"\x89PNG"
    rep = sgsbatch("report", "loc", "--runs-dir", str(tmp_path), "--out", str(page), env=cli_env)
    assert rep.returncode == 0, rep.stderr
    html = page.read_text()
    assert "<title>SIMULATED - sgsbatch report: loc</title>" in html and "not recorded" in html
    assert 'alt="Solver: loss per optimizer step"' in html
    assert html.count("data:image/png;base64,") >= 4 and "<script" not in html


def test_local_crash_stalls_then_resume_completes(tmp_path: Path, cli_env: dict[str, str]) -> None:
    env = {**cli_env, "SGSBATCH_FAULT_INJECT": "solve:0:raise:99"}
    proc = sgsbatch(*launch_args(tmp_path, "lc", "run.executor=local", "run.rounds=1", "run.max_task_retries=1"),
                    "--wait", env=env)
    assert proc.returncode == 1
    assert proc.stdout.count("lc: stalled") == 1, proc.stdout  # `--wait` prints the stall once
    st = status(tmp_path, "lc")
    assert st["state"] == "stalled" and "failed 2 times" in st["message"], st
    assert "RuntimeError: injected fault" in st["message"] and "\n" not in st["message"]
    verify = tmp_path / "lc" / "rounds" / "r0000" / "verify"
    for _ in range(600):  # polls, not a time limit: `--wait` returned at the stall, the driver goes on
        if (verify / "shard_00001.done").exists():
            break
        time.sleep(1)
    assert (verify / "shard_00001.done").exists() and not (verify / "shard_00000.done").exists()  # as on Slurm
    res = sgsbatch("resume", "lc", "--runs-dir", str(tmp_path), "--wait", env=cli_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert status(tmp_path, "lc")["state"] == "completed"
    logs = sgsbatch("logs", "lc", "--runs-dir", str(tmp_path), "--phase", "solve", "--shard", "0", env=cli_env)
    assert "attempt 3/3" in logs.stderr  # two crashes and the resumed attempt, each with its log


def test_more_verify_than_solve_tasks_gives_the_same_round(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """shards.verify = 2 x shards.solve: every proof checked once, the round identical to verify = solve."""
    for name, extra in (("same", []), ("wide", ["shards.verify=4"])):
        proc = sgsbatch(*launch_args(tmp_path, name, "run.executor=local", "run.rounds=1", *extra), "--wait",
                        env=cli_env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    wide = tmp_path / "wide" / "rounds" / "r0000" / "verify"
    assert sorted(p.name for p in wide.glob("shard_*.done")) == [f"shard_{i:05d}.done" for i in range(4)]
    assert outcome(tmp_path / "wide") == outcome(tmp_path / "same")
