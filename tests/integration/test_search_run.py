"""A tiny SGS run with a search Solver (solver.mode = "search", SIMULATED tactic states) on the local
executor: it completes, verify judges the found proofs, the Solver trains on their tactic steps, and a
solve task killed mid-search (SIGKILL after its third finished search) resumes from its search journal
with results identical to an unkilled run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, sgsbatch, status  # noqa: E402

from sgsbatch.run.jsonl import read_jsonl  # noqa: E402

pytestmark = pytest.mark.slow
SEARCH = ("run.executor=local", "run.rounds=2", "solver.mode=search")


def test_search_solver_run_survives_a_kill_mid_search(tmp_path: Path, cli_env: dict[str, str]) -> None:
    plain = sgsbatch(*launch_args(tmp_path, "srch", *SEARCH), "--wait", env=cli_env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    st = status(tmp_path, "srch")
    assert st["state"] == "completed" and st["simulated"] is True
    m = st["metrics"]
    assert m["search/searches"] > 0 and m["search/waves"] > 0 and m["search/expansions"] >= m["search/waves"]
    assert m["search/verified"] + m["search/tactic_mode_rejected"] == m["search/found"] > 0
    assert m["search/tokens_per_call"] > 0 and m["search/generated_tokens"] > 0
    out = outcome(tmp_path / "srch")
    verified = [a for a in out["attempts"] if a[3] == "verified"]
    assert verified and all(p.startswith("\n  ") for *_, p in verified)  # linearized tactics, judged by verify
    assert any(role == "solver" and seqs > 0 for _, role, _, seqs in out["steps"])  # tactic pairs trained
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "srch" / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.value for e in acc.Scalars("search/found")] == [
        v for _, v in sorted(_round_values(tmp_path / "srch", "search/found"))]
    page = tmp_path / "srch.html"
    rep = sgsbatch("report", "srch", "--runs-dir", str(tmp_path), "--out", str(page), env=cli_env)
    assert rep.returncode == 0, rep.stderr
    assert "Tactic-level search per round" in page.read_text()

    killed = sgsbatch(*launch_args(tmp_path, "srchk", *SEARCH), "--wait",
                      env={**cli_env, "SGSBATCH_SEARCH_KILL_AFTER": "0:3"})
    assert killed.returncode == 0, killed.stdout + killed.stderr
    solve = tmp_path / "srchk" / "rounds" / "r0000" / "solve"
    starts = [r for r in read_jsonl(solve / "shard_00000.attempts.jsonl") if "start" in r]
    assert len(starts) == 2  # killed once, resumed once
    assert "finished searches read from" in (solve / "shard_00000.attempt.log").read_text()
    assert outcome(tmp_path / "srchk") == out


def _round_values(run_dir: Path, name: str) -> list[tuple[int, float]]:
    import sqlite3

    con = sqlite3.connect(run_dir / "state.db")
    try:
        return list(con.execute("SELECT round, value FROM metrics WHERE name = ?", (name,)))
    finally:
        con.close()
