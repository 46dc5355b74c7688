"""The run's held-out evaluation jobs as `status` lists them (scheduling/eval_jobs.evaluations, console's line),
and `sgsbatch cancel` stopping the ones that are not done (cancel_pending): a local one (a detached process in its own session, as submit_eval starts it) is killed
with its group; one whose sets are all done, and a recorded pid that is no longer this run's evaluation
(reused), are left alone. Not covered: scancel of a Slurm one (tests/slurm/test_eval_slurm.py runs the jobs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from sgsbatch.cli.console import evaluations_text, status_text
from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import create_run
from sgsbatch.scheduling.eval_jobs import cancel_pending, evaluations
from sgsbatch.views.status import run_status

REPO = Path(__file__).resolve().parents[2]


def _record(h, r: int, job_id: str) -> None:  # type: ignore[no-untyped-def]
    h.paths.eval_round_dir(r).mkdir(parents=True, exist_ok=True)
    h.paths.eval_job(r).write_text(json.dumps({"job_id": job_id, "executor": "local", "round": r, "set": None}))


def test_status_lists_evaluations_and_cancel_stops_pending_local_ones_only(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=ec", "run.executor=local",
                                                    "eval.sets={mini = 'x.jsonl'}"])
    h = create_run(cfg, [Target("t0", "import Mathlib\n", "theorem t0 : True := by")], "local")
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    pending = subprocess.Popen([*sleeper, "eval", str(h.paths.root)], start_new_session=True)
    done = subprocess.Popen([*sleeper, "eval", str(h.paths.root)], start_new_session=True)
    stranger = subprocess.Popen(sleeper, start_new_session=True)  # a reused pid: not this run's evaluation
    try:
        _record(h, 0, f"pid {pending.pid}")
        _record(h, 1, f"pid {done.pid}")
        h.paths.eval_done(1, "mini").parent.mkdir(parents=True)
        h.paths.eval_done(1, "mini").write_text("1\n")
        _record(h, 2, f"pid {stranger.pid}")
        listed = evaluations(h)
        assert [(e["round"], e["done"], e["sets_done"], e["sets"]) for e in listed] == \
            [(0, False, 0, 1), (1, True, 1, 1), (2, False, 0, 1)]
        assert listed[0]["job_id"] == f"pid {pending.pid}"
        line = evaluations_text(run_status(h).to_json()["evaluations"])
        assert line.startswith(f"round 0 waiting (job pid {pending.pid}, 0 of 1 sets done), round 1 done, "), line
        assert f"held-out evaluation: {line}" in status_text(run_status(h).to_json())
        assert cancel_pending(h) == [f"pid {pending.pid}"]
        deadline = time.monotonic() + 30
        while pending.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pending.returncode is not None and pending.returncode < 0, "killed by a signal"
        assert done.poll() is None and stranger.poll() is None
    finally:
        for p in (pending, done, stranger):
            p.kill()
            p.wait()
