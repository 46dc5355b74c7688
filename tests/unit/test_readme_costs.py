"""README's "What a run costs" quotes `sgsbatch plan jobs/sgs.toml` (views/projection.py, round/
reference_projection.py): each figure it prints is recomputed here, so the README cannot drift from plan."""

from __future__ import annotations

import re
from pathlib import Path

from sgsbatch.config.loading import load_config
from sgsbatch.run.progress import duration
from sgsbatch.views.plan import _hours, make_plan

REPO = Path(__file__).resolve().parents[2]
LONGER = ["projection.mean_tokens=1650", "projection.decode_short_tokens_per_s=3000"]


def _costs() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### What a run costs"):text.index("## Experiments")]
    return re.sub(r"\s+", " ", section)


def test_the_readmes_run_costs_are_plans(tmp_path: Path) -> None:
    readme = _costs()
    cfg = load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}"])
    proj = make_plan(cfg).projection
    ref, verify = proj.reference, proj.phase("verify")
    assert ref is not None and verify is not None and verify.cpu_hours is not None
    gpu_h = proj.rounds * proj.hours("gpu")
    for phrase in (f"{duration(proj.round_s)} a round", f"{proj.run_days:.1f} days and {_hours(gpu_h)} GPU-hours over "
                   f"{proj.rounds} rounds", f"{duration(ref.round_s)} a round, {ref.run_days:.1f} days, "
                   f"{_hours(ref.gpu_hours)} GPU-hours", f"takes {gpu_h / ref.gpu_hours:.2f}x its GPU-hours",
                   f"Lean on its {ref.cpus} CPUs", f"{verify.shards} tasks of {verify.cpus} CPUs",
                   f"{_hours(verify.cpu_hours)} CPU-hours a round"):
        assert phrase in readme, phrase
    longer = make_plan(load_config(REPO / "jobs" / "sgs.toml", [f"run.runs_dir={tmp_path}", *LONGER])).projection
    assert longer.reference is not None
    assert all(f"--set {s}" in readme for s in LONGER)
    assert (f"{longer.run_days:.1f} days and {_hours(longer.rounds * longer.hours('gpu'))} GPU-hours (the reference's "
            f"layout: {longer.reference.run_days:.1f} days, {_hours(longer.reference.gpu_hours)})") in readme
