"""A search round projected (views/search_projection.py through views/projection.py and views/plan.py):
the solve phase's GPU side and Lean side from per-expansion figures, verify on found proofs only,
a canary's tactic time as a floor, and what `plan` prints. Expected values are derived here from
the keys set below, never copied from an output."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sgsbatch.canary.record import save
from sgsbatch.cli import main
from sgsbatch.config.schema import Config
from sgsbatch.config.simulated_time import decode_rate
from sgsbatch.config.validation import semantic_errors
from sgsbatch.views.plan import canary_figures, make_plan, plan_text
from sgsbatch.views.projection import project, published
from sgsbatch.views.search_projection import expansion_budget
from tests.unit.test_projection import KNOWN, known

SEARCH = ["solver.mode=search", "search.environment=simulated", "search.width=4", "search.max_expansions=100",
          "search.lean_processes=3", "projection.search_expansion_share=0.25", "projection.search_prompt_tokens=300",
          "projection.search_tactic_tokens=20", "projection.search_distinct_share=0.5",
          "projection.search_solved_share=0.4", "projection.lean_tactic_s=2"]


def searching(tmp_path: Path, *more: str) -> Config:
    cfg = known(tmp_path, *SEARCH, *more)
    assert semantic_errors(cfg) == []
    return cfg


def by_hand(cfg: Config, targets: int) -> dict[str, float]:
    """The search phase's figures worked from the keys (the model of views/search_projection.py)."""
    pj, s, res = cfg.projection, cfg.search, cfg.slurm.solve
    searches = (targets + targets * pj.unsolved_share * cfg.conjecturer.samples_per_target) * cfg.solver.samples
    expansions = searches * pj.search_expansion_share * s.max_expansions
    tokens = expansions * s.width * pj.search_tactic_tokens
    rate = res.gpus * decode_rate(pj.decode_short_tokens_per_s, pj.decode_long_tokens_per_s,
                                  cfg.generation.max_model_len, pj.search_prompt_tokens + pj.search_tactic_tokens)
    lean_cpu_s = expansions * s.width * pj.search_distinct_share * pj.lean_tactic_s
    shards = cfg.shards.solve
    gpu_s, lean_s = tokens / shards / rate, lean_cpu_s / shards / s.lean_processes
    task_s = pj.model_load_s + gpu_s + lean_s
    return {"searches": searches, "expansions": expansions, "tokens": tokens, "rate": rate, "gpu_s": gpu_s,
            "lean_s": lean_s, "task_s": task_s, "lean_cpu_hours": lean_cpu_s / 3600,
            "gpu_hours": shards * res.gpus * task_s / 3600, "cpu_hours": shards * res.cpus * task_s / 3600,
            "found": searches * pj.search_solved_share}


def test_a_search_round_projects_gpu_and_lean_sides_worked_by_hand(tmp_path: Path) -> None:
    cfg = searching(tmp_path)
    p = project(cfg, 100, published(cfg))
    want = by_hand(cfg, 100)
    sp, solve, verify = p.search, p.phase("solve"), p.phase("verify")
    assert sp is not None and solve is not None and verify is not None
    assert sp.searches == pytest.approx(want["searches"]) and sp.expansions == pytest.approx(want["expansions"])
    assert sp.tokens == pytest.approx(want["tokens"]) and solve.tokens == pytest.approx(want["tokens"])
    assert sp.rate == pytest.approx(want["rate"]) and solve.rate == pytest.approx(want["rate"])
    assert sp.gpu_s == pytest.approx(want["gpu_s"]) and sp.lean_s == pytest.approx(want["lean_s"])
    assert sp.lean_cpu_hours == pytest.approx(want["lean_cpu_hours"])
    # the two sides alternate each wave: a task is load + GPU side + Lean side
    assert solve.task_s == pytest.approx(want["task_s"])
    assert solve.wall_s == pytest.approx(cfg.projection.queue_wait_s + want["task_s"])  # 2 tasks, one wave
    assert solve.gpu_hours == pytest.approx(want["gpu_hours"]) and solve.cpu_hours == pytest.approx(want["cpu_hours"])
    assert solve.unit == "searches" and solve.items == pytest.approx(want["searches"])
    assert sp.bound == ("Lean" if want["lean_s"] > want["gpu_s"] else "GPU")
    # verify checks only the found proofs
    assert verify.items == pytest.approx(want["found"]) and sp.found == pytest.approx(want["found"])
    res = cfg.slurm.verify
    assert verify.task_s == pytest.approx(cfg.projection.repl_start_s + want["found"] / cfg.shard_count("verify")
                                          / (res.cpus * cfg.projection.lean_proofs_per_s))
    assert json.loads(json.dumps(p.to_json()))["search"]["lean_cpu_hours"] == pytest.approx(want["lean_cpu_hours"])


def test_the_lean_side_shrinks_with_processes_and_the_bound_moves(tmp_path: Path) -> None:
    slow = searching(tmp_path, "projection.lean_tactic_s=0.02", "search.lean_processes=1")
    fast = searching(tmp_path, "projection.lean_tactic_s=0.02", "search.lean_processes=64", "slurm.solve.cpus=64")
    a, b = project(slow, 100, published(slow)).search, project(fast, 100, published(fast)).search
    assert a is not None and b is not None
    assert a.lean_s == pytest.approx(64 * b.lean_s) and a.gpu_s == pytest.approx(b.gpu_s)
    assert a.lean_cpu_hours == pytest.approx(b.lean_cpu_hours)  # the same Lean work, spread wider
    assert a.bound == "Lean" and b.bound == "GPU"
    assert a.gpu_s is not None
    even = math.ceil(1 * a.lean_s / a.gpu_s)
    assert f"`--set search.lean_processes={even}`" in plan_text(make_plan(slow, 100))


def test_mcts_spends_at_most_its_simulations(tmp_path: Path) -> None:
    cfg = searching(tmp_path, "search.algorithm=mcts", "search.mcts_simulations=40")
    assert expansion_budget(cfg) == 40
    sp = project(cfg, 100, published(cfg)).search
    assert sp is not None and sp.expansions_per_search == pytest.approx(cfg.projection.search_expansion_share * 40)


def test_whole_proof_rounds_are_unchanged_and_do_not_list_the_tactic_figure(tmp_path: Path) -> None:
    cfg = known(tmp_path)
    p = project(cfg, 100, published(cfg))
    assert p.search is None and p.phase("verify").items == p.phase("solve").items  # type: ignore[union-attr]
    assert "lean_tactic_s" not in plan_text(make_plan(cfg, 100)) and "search:" not in plan_text(make_plan(cfg, 100))


def _canary(runs: Path, cfg: Config, measures: dict[str, float]) -> None:
    save(runs, cfg, [{"component": "search", "check": "known proof tactic by tactic", "ok": True, "figure": "",
                      "fix": "", "shape": "", "measures": measures}], {"python": "3", "packages": {}}, ["1"])


def test_a_passed_canarys_tactic_time_is_a_floor(tmp_path: Path) -> None:
    cfg = searching(tmp_path)
    published_s = cfg.projection.lean_tactic_s
    _canary(tmp_path, cfg, {"lean_tactic_s": published_s / 4})  # faster than published: its easy tactics
    figures, note = canary_figures(cfg, published(cfg))
    assert figures["lean_tactic_s"] == published_s and "lean_tactic_s" not in note.split("used:")[1]
    _canary(tmp_path, cfg, {"lean_tactic_s": published_s * 3})  # the site is slower than published
    figures, note = canary_figures(cfg, published(cfg))
    assert figures["lean_tactic_s"] == published_s * 3 and "lean_tactic_s" in note
    assert "a floor" in figures.sources["lean_tactic_s"]
    sp = make_plan(cfg, 100).projection.search
    assert sp is not None and sp.lean_tactic_s == published_s * 3
    assert sp.lean_cpu_hours == pytest.approx(3 * by_hand(cfg, 100)["lean_cpu_hours"])


def test_plan_prints_the_search_figures(tmp_path: Path) -> None:
    args = ["plan", str(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml"), "--runs-dir", str(tmp_path),
            *(a for s in [*KNOWN, *SEARCH] for a in ("--set", s))]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    cfg = searching(tmp_path)
    want = by_hand(cfg, 12)  # tiny.toml's 12 targets
    out = res.stdout
    assert "searches" in out and "tokens/s + Lean" in out
    assert f"{want['gpu_hours']:,.1f} GPU-hours, {want['lean_cpu_hours']:,.1f} Lean CPU-hours" in out
    assert f"= {want['expansions']:,.0f} expansions" in out and "bound by " in out
    assert "lean_tactic_s=2" in out  # the figure and where it came from
    js = CliRunner().invoke(main, [*args, "--json"])
    assert js.exit_code == 0, js.output
    d: dict[str, Any] = json.loads(js.stdout)
    assert d["search"]["lean_cpu_hours"] == pytest.approx(want["lean_cpu_hours"])
    assert d["search"]["gpu_s"] == pytest.approx(want["gpu_s"]) and d["figures"]["lean_tactic_s"]["value"] == 2.0
