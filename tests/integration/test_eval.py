"""Held-out evaluation (`sgsbatch eval RUN --round N`, ops/evaluate.py) of a completed 2-round tiny run on the
local executor: real tiny-random Solver weights on the transformers backend, the SIMULATED verifier.

Covered: the set read from a JSONL file like data.source (four rows of the package's tiny targets, given
as a held-out set), the files (results.jsonl per problem with every sample's verdict, summary.json, the
DONE marker) and pass@k recomputed from them, the metrics in the database, `status --json` and
`metrics`, TensorBoard's tb/eval, a second call reusing the stored result and --force sampling again;
refusals: a --set the run does not have, an unreadable set at launch (named eval.sets.<name>), a --round
the run does not have; eval.every_rounds = 2: round 1's evaluation ran as a detached job after the round ended (its
job.json, log and metrics), round 0's did not. Not covered: Lean, GPUs, a Slurm evaluation job.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, launch_args, run_env, sgsbatch, status  # noqa: E402

from sgsbatch.logic.evaluation import pass_at_k  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 2-round tiny run with the evaluation set `mini` (4 rows) and eval.every_rounds = 2 (an
    evaluation job after round 1)."""
    root = tmp_path_factory.mktemp("eval")
    held = root / "heldout.jsonl"
    rows = (REPO / "sgsbatch" / "embedded" / "tiny_targets.jsonl").read_text().splitlines()[:4]
    held.write_text("\n".join(rows) + "\n")
    proc = sgsbatch(*launch_args(root, "ev", "run.executor=local", "run.rounds=2", f"eval.sets.mini={held}",
                                 "eval.samples=4",
                                 "eval.pass_k=[1, 2, 4]", "eval.every_rounds=2"), "--wait", env=run_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "ev"


def _db_metrics(run: Path, r: int = 0) -> dict[str, float]:
    con = sqlite3.connect(run / "state.db")
    try:
        return dict(con.execute("SELECT name, value FROM metrics WHERE round = ? AND name LIKE 'eval/%'", (r,)).fetchall())
    finally:
        con.close()


def test_eval_of_a_stored_round_writes_files_and_metrics(run: Path) -> None:
    runs = str(run.parent)
    proc = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", "--json", env=run_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    where = run / "eval" / "r0000" / "mini"
    assert out["dir"] == str(where) and out["stored"] is False
    assert (where / "DONE").is_file() and (where / "summary.json").is_file()
    assert not list(where.glob(".*tmp*")), "no temp file left behind"
    lines = [json.loads(x) for x in (where / "results.jsonl").read_text().splitlines()]
    assert [x["problem_id"] for x in lines] == [f"tiny{i:04d}" for i in range(4)]
    for x in lines:
        assert len(x["samples"]) == 4 and x["simulated"] == "verifier"
        assert all(s["verdict"] in ("verified", "failed", "timeout", "error", "unextracted") for s in x["samples"])
        assert x["verified"] == sum(s["verdict"] == "verified" for s in x["samples"])
    for k in (1, 2, 4):  # pass@k recomputed from the per-problem files
        want = sum(pass_at_k(4, x["verified"], k) for x in lines) / 4
        assert out["pass_at_k"][str(k)] == pytest.approx(want)
        assert out["metrics"][f"eval/mini/pass@{k}"] == pytest.approx(want)
    summary = json.loads((where / "summary.json").read_text())
    assert summary["weights"] == str(run / "checkpoints" / "r0000" / "solver") and summary["problems"] == 4
    db = _db_metrics(run)
    assert db == pytest.approx({f"eval/mini/pass@{k}": out["pass_at_k"][str(k)] for k in (1, 2, 4)})
    listed = sgsbatch("metrics", "ev", "--runs-dir", runs, "--round", "0", "--metric", "eval/*", env=run_env())
    assert listed.returncode == 0 and listed.stdout.count("ev,0,eval/mini/pass@") == 3, listed.stdout
    events = list((run / "tb" / "eval").glob("events.out.tfevents.*"))
    assert events and any(b"eval/mini/pass@4" in e.read_bytes() for e in events)

    again = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", env=run_env())
    assert again.returncode == 0 and "stored; --force samples again" in again.stdout, again.stdout + again.stderr
    marker = (where / "DONE").stat().st_mtime_ns
    forced = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", "--force", "--json", env=run_env())
    assert forced.returncode == 0 and json.loads(forced.stdout)["stored"] is False, forced.stderr
    assert (where / "DONE").stat().st_mtime_ns > marker
    assert _db_metrics(run).keys() == db.keys(), "an evaluation again replaces the round's values"


def test_eval_refuses_what_the_run_does_not_have(run: Path) -> None:
    runs = str(run.parent)
    res = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "nope", env=run_env())
    assert res.returncode == 2 and "--set nope: run ev has no evaluation set 'nope'; its eval.sets: mini" \
        in res.stderr, res.stderr
    missing = run.parent / "missing.jsonl"
    res = sgsbatch(*launch_args(run.parent, "ev2", "run.executor=local", f"eval.sets.broken={missing}"), "--dry-run",
                   env=run_env())  # an unreadable set is refused before a run exists, naming the key and its --set
    assert res.returncode == 2 and f"--set eval.sets.broken={missing}: eval.sets.broken: could not load" in res.stderr, \
        res.stderr
    assert "Traceback" not in res.stderr and not (run.parent / "ev2").exists()
    res = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "2", env=run_env())
    assert res.returncode == 2 and "--round 2: no such round; run ev has rounds 0..1" in res.stderr, res.stderr


def test_every_rounds_submits_an_evaluation_job_beside_the_chain(run: Path) -> None:
    job = run / "eval" / "r0001" / "job.json"
    assert job.is_file() and not (run / "eval" / "r0000" / "job.json").exists()  # (0 + 1) % 2 != 0
    record = json.loads(job.read_text())
    assert record["executor"] == "local" and record["job_id"].startswith("pid ")
    assert record["command"][-3:] == [str(run), "--round", "1"]
    deadline = time.time() + 300
    while time.time() < deadline and not (run / "eval" / "r0001" / "mini" / "DONE").exists():
        time.sleep(2)
    assert (run / "eval" / "r0001" / "mini" / "DONE").exists(), (run / "eval" / "r0001" / "job.log").read_text()
    deadline = time.time() + 60
    while time.time() < deadline and len(_db_metrics(run, 1)) < 3:  # the metrics land just after the marker
        time.sleep(1)
    db = _db_metrics(run, 1)
    summary = json.loads((run / "eval" / "r0001" / "mini" / "summary.json").read_text())
    assert db == pytest.approx({f"eval/mini/pass@{k}": v for k, v in summary["pass_at_k"].items()})
    assert summary["weights"] == str(run / "checkpoints" / "r0001" / "solver")
    shown = status(run.parent, "ev")["metrics"]  # the last completed round's: round 1
    assert {k: v for k, v in shown.items() if k.startswith("eval/")} == pytest.approx(db)
