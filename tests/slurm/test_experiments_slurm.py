"""STP, a GRPO-family objective and the search Solver on the real local Slurm, 2 rounds each (issues 31, 39).

`launch jobs/stp.toml --smoke` and `launch jobs/dapo.toml --smoke` (a rollout step a round: 3 prompts of 6
drawn) with `run.executor=slurm`: each
experiment's algorithm (STP: seeded conjectures, Expert Iteration with STP's selection and proof
cap, STP's Conjecturer reward; DAPO: its loss, dynamic sampling with re-sampling and overlong shaping) at tiny
scale, every phase a Slurm job chained by dependencies; `launch jobs/sgs.toml --smoke --set
solver.mode=search` with SIMULATED tactic states (SGS with a search Solver: its solve tasks search,
verify judges the found proofs, train learns their tactic steps). The three runs are launched together and
share the node (they wait on the scheduler much of the time). The SIMULATED verifier: no Lean
here. stp.toml samples 8 proofs a problem instead of 32 (the same code, a quarter of the time).
Covered: all complete 2 rounds on Slurm; the search run records its searches each round; STP's round 1 has conjectures seeded by round 0's proofs
and no Guide reviews; DAPO's rounds record its dropped-group metrics. Not covered: any curve.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from runlib import REPO, sgsbatch, status

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
# name -> (jobs file, its --set options); the search run is SGS (Conjecturer, Guide) with a search Solver
# dapo: a rollout batch of 3 prompts over-sampled 2x (6 of the 12 targets a round: rounds 0 and 1 are one pass)
RUNS = {"stp": ("stp", ["--set", "solver.samples=8"]),
        "dapo": ("dapo", ["--set", "solver.rollout_prompts=3", "--set", "solver.rollout_oversample=2", "--set",
                          "solver.rollout_max_gen_batches=2"]),
        "search": ("sgs", ["--set", "solver.mode=search", "--set", "search.environment=simulated", "--set",
                           "run.name=search-smoke"])}


def test_stp_and_dapo_complete_two_rounds_on_slurm(slurm_cluster: object, tmp_path: Path) -> None:
    for jobs_file, extra in RUNS.values():
        proc = sgsbatch("launch", str(REPO / "jobs" / f"{jobs_file}.toml"), "--smoke", "--set", f"run.runs_dir={tmp_path}",
                        "--set", "run.executor=slurm", "--set", "verification.backend=simulated", "--set",
                        "run.rounds=2", "--set", "run.poll_interval_s=2", *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    deadline = time.monotonic() + 1800  # a safety limit, not a measurement
    ended: dict[str, dict[str, object]] = {}
    while len(ended) < len(RUNS):
        for name in RUNS:
            st = status(tmp_path, f"{name}-smoke")
            if st["state"] in ("completed", "failed", "stalled", "cancelled"):
                ended[name] = st
        assert time.monotonic() < deadline, f"still running after 30 min: {set(RUNS) - set(ended)}"
        time.sleep(3)
    for name, st in ended.items():
        assert st["state"] == "completed" and st["rounds_completed"] == 2 and st["executor"] == "slurm", (name, st)
    con = sqlite3.connect(tmp_path / "stp-smoke" / "state.db")
    conjectures = {r: n for r, n in con.execute("SELECT round, count(*) FROM conjectures GROUP BY round")}
    reviews = con.execute("SELECT count(*) FROM reviews").fetchone()[0]
    con.close()
    assert conjectures.get(0, 0) == 0 and conjectures.get(1, 0) > 0, conjectures  # seeds exist from round 1 on
    assert reviews == 0  # STP: no Guide
    con = sqlite3.connect(tmp_path / "dapo-smoke" / "state.db")
    dropped = {r for (r,) in con.execute("SELECT DISTINCT round FROM metrics WHERE name LIKE 'solver/dropped_groups/%'")}
    drawn = {r: {p for (p,) in con.execute("SELECT DISTINCT problem_id FROM attempts WHERE round = ?", (r,))}
             for r in (0, 1)}
    kept = dict(con.execute("SELECT round, value FROM metrics WHERE name = 'solver/groups'").fetchall())
    short = dict(con.execute("SELECT round, value FROM metrics WHERE name = 'solver/rollout_short'").fetchall())
    resampled = dict(con.execute("SELECT round, value FROM metrics WHERE name = 'solver/rollout_resampled'").fetchall())
    con.close()
    assert dropped == {0, 1}, dropped
    assert len(drawn[0]) == len(drawn[1]) == 6 and not drawn[0] & drawn[1], drawn  # the generation batches' draws
    # round 0 trains its batch of 3 (or re-samples: trains nothing, its kept groups carried to round 1); round 1,
    # the cap of 2 generation batches, trains the batch of 3 or what it has, the shortfall counted
    assert resampled[1] == 0 and kept[1] + short[1] == 3, (kept, short, resampled)
    assert (kept[0], resampled[0]) == (0, 1) or kept[0] + short[0] == 3, (kept, short, resampled)
    con = sqlite3.connect(tmp_path / "search-smoke" / "state.db")
    searched = dict(con.execute("SELECT round, value FROM metrics WHERE name = 'search/searches'").fetchall())
    con.close()
    assert set(searched) == {0, 1} and all(v > 0 for v in searched.values()), searched
