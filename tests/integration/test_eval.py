"""Held-out evaluation (`sgsbatch eval RUN --round N`, ops/evaluate.py) of a completed 1-round tiny run on the
local executor: real tiny-random Solver weights on the transformers backend, the SIMULATED verifier.

Covered: the set read from a JSONL file like data.source (four rows of the package's tiny targets, given
as a held-out set), the files (results.jsonl per problem with every sample's verdict, summary.json, the
DONE marker) and pass@k recomputed from them, the metrics in the database, `status --json` and
`metrics`, TensorBoard's tb/eval, a second call reusing the stored result and --force sampling again;
refusals: a --set the run does not have, an unreadable set (named eval.sets.<name>), a --round the run
does not have. Not covered: Lean, GPUs, evaluation as a job (not built), eval.every_rounds (not built).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, launch_args, sgsbatch, status  # noqa: E402

from sgsbatch.evaluation import pass_at_k  # noqa: E402

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    env.pop("SGSBATCH_FAULT_INJECT", None)
    return env


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 1-round tiny run with two evaluation sets: `mini` (4 rows) and `broken` (no such file)."""
    root = tmp_path_factory.mktemp("eval")
    held = root / "heldout.jsonl"
    rows = (REPO / "sgsbatch" / "embedded" / "tiny_targets.jsonl").read_text().splitlines()[:4]
    held.write_text("\n".join(rows) + "\n")
    proc = sgsbatch(*launch_args(root, "ev", "run.executor=local", "run.rounds=1", f"eval.sets.mini={held}",
                                 f"eval.sets.broken={root / 'missing.jsonl'}", "eval.samples=4",
                                 "eval.pass_k=[1, 2, 4]"), "--wait", env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "ev"


def _db_metrics(run: Path) -> dict[str, float]:
    con = sqlite3.connect(run / "state.db")
    try:
        return dict(con.execute("SELECT name, value FROM metrics WHERE round = 0 AND name LIKE 'eval/%'").fetchall())
    finally:
        con.close()


def test_eval_of_a_stored_round_writes_files_and_metrics(run: Path) -> None:
    runs = str(run.parent)
    proc = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", "--json", env=_env())
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
    shown = status(run.parent, "ev")["metrics"]
    assert {k: v for k, v in shown.items() if k.startswith("eval/")} == pytest.approx(db)
    listed = sgsbatch("metrics", "ev", "--runs-dir", runs, "--metric", "eval/*", env=_env())
    assert listed.returncode == 0 and listed.stdout.count("eval/mini/pass@") == 3, listed.stdout
    events = list((run / "tb" / "eval").glob("events.out.tfevents.*"))
    assert events and any(b"eval/mini/pass@4" in e.read_bytes() for e in events)

    again = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", env=_env())
    assert again.returncode == 0 and "stored; --force samples again" in again.stdout, again.stdout + again.stderr
    marker = (where / "DONE").stat().st_mtime_ns
    forced = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "mini", "--force", "--json", env=_env())
    assert forced.returncode == 0 and json.loads(forced.stdout)["stored"] is False, forced.stderr
    assert (where / "DONE").stat().st_mtime_ns > marker
    assert _db_metrics(run).keys() == db.keys(), "an evaluation again replaces the round's values"


def test_eval_refuses_what_the_run_does_not_have(run: Path) -> None:
    runs = str(run.parent)
    res = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "nope", env=_env())
    assert res.returncode == 2 and "--set nope: run ev has no evaluation set 'nope'; its eval.sets: broken, mini" \
        in res.stderr, res.stderr
    res = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "0", "--set", "broken", env=_env())
    assert res.returncode == 2 and "eval.sets.broken" in res.stderr and "missing.jsonl" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (run / "eval" / "r0000" / "broken").exists()
    res = sgsbatch("eval", "ev", "--runs-dir", runs, "--round", "1", env=_env())
    assert res.returncode == 2 and "--round 1: no such round; run ev has rounds 0..0" in res.stderr, res.stderr
