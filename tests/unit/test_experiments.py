"""The experiment configs: each inherits sgs.toml, changes only its experiment's keys, and dry-runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.config.loading import load_config, to_dict

JOBS = Path(__file__).resolve().parents[2] / "jobs"
EXPECTED = {
    "sgs_cispo": {"solver.objective": "cispo", "solver.lr": 1e-6, "solver.batch_size": 64},
    "cispo_solver_only": {"solver.objective": "cispo", "solver.lr": 1e-6, "solver.batch_size": 64,
                          "conjecturer.enabled": False, "guide.enabled": False},
    "ei_solver_only": {"solver.objective": "ei", "solver.batch_size": 64, "conjecturer.enabled": False,
                       "guide.enabled": False},
    "reinforce_solver_only": {"conjecturer.enabled": False, "guide.enabled": False},
    "sgs_frozen_conjecturer": {"conjecturer.train": False, "guide.enabled": False},
    "sgs_no_guide": {"guide.enabled": False},
    "sgs_no_problem_conditioning": {"conjecturer.conditioned": False},
}


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_experiment_differs_from_sgs_only_in_its_keys(name: str) -> None:
    base = _flat(to_dict(load_config(JOBS / "sgs.toml")))
    exp = _flat(to_dict(load_config(JOBS / f"{name}.toml")))
    diff = {k: exp[k] for k in exp if exp[k] != base.get(k)}
    assert diff == {"run.name": name, **EXPECTED[name]}
    assert 'inherit = "sgs.toml"' in (JOBS / f"{name}.toml").read_text()


@pytest.mark.parametrize("path", sorted(JOBS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_jobs_file_passes_dry_run(path: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sgsbatch.cli", "launch", str(path), "--dry-run", "--set",
                           f"run.runs_dir={tmp_path}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "nothing created, nothing submitted" in proc.stdout
    assert not any(tmp_path.iterdir())
