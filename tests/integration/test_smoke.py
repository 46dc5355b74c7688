"""`launch --smoke` of every experiment config: its algorithm at tiny scale on the local executor."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow
# the experiment configs (tiny*.toml are the CPU test configs themselves: tiny.toml runs whole in
# test_local_run.py, tiny-vllm.toml on the local Slurm in tests/slurm/test_vllm_run_slurm.py)
# stp.toml and dapo.toml run in smoke form on the local Slurm instead (tests/slurm/
# test_experiments_slurm.py: 2 rounds each, the same phases on the other executor; CI time); search.toml
# here on SIMULATED proof states (no Lean), SGS with a search Solver there
ON_SLURM = ("stp", "dapo")
SEARCH = ("--set", "search.environment=simulated")
EXPERIMENTS = sorted(p for p in (REPO / "jobs").glob("*.toml")
                     if not p.stem.startswith("tiny") and p.name != "site.example.toml"  # a site file
                     and p.stem not in ON_SLURM)


@pytest.mark.parametrize("config", EXPERIMENTS, ids=lambda p: p.stem)
def test_smoke_run_of_experiment_finishes_with_metrics_for_every_round(config: Path, tmp_path: Path,
                                                                       cli_env: dict[str, str]) -> None:
    # no Lean here: the SIMULATED verifier, asked for (a Lean config's smoke run is refused without `lake`).
    # sgs.toml runs the smoke's 2 rounds (round 1 starts from trained weights and stored proofs); an
    # ablation or baseline differs from it in what one round does, so one round of it (CI time)
    rounds = 2 if config.stem == "sgs" else 1
    proc = sgsbatch("launch", str(config), "--smoke", "--set", f"run.runs_dir={tmp_path}", "--set",
                    "verification.backend=simulated", "--set", f"run.rounds={rounds}",
                    *(SEARCH if config.stem == "search" else ()), "--wait", env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name = f"{config.stem}-smoke"
    st = status(tmp_path, name)
    assert st["state"] == "completed" and st["smoke"] is True and st["executor"] == "local"
    assert st["rounds"] == st["rounds_completed"] == rounds
    con = sqlite3.connect(tmp_path / name / "state.db")
    metric_rounds = {r for (r,) in con.execute("SELECT DISTINCT round FROM metrics WHERE name = 'cumulative_solve_rate'")}
    reviews = con.execute("SELECT count(*) FROM reviews").fetchone()[0]
    conjectures = con.execute("SELECT count(*) FROM conjectures").fetchone()[0]
    con.close()
    assert metric_rounds == set(range(rounds))
    cfg = load_config(config)
    if not cfg.conjecturer.enabled:  # the solver-only baselines
        assert conjectures == 0
    else:
        assert conjectures > 0
    if "guide" not in cfg.phases_of_round(1):  # no Guide, or a frozen Conjecturer (no reviews needed)
        assert reviews == 0
