"""The canary's search row (canary/search.py, `solver.mode = "search"`): in the solve job's checks,
a known proof replayed tactic by tactic through the tactic environment, the median tactic time
measured only from Lean. The replay runs over the recorded REPL transcript proof_step (Lean
v4.15.0's real replies, read from ../shared, never copied: the test links it into a directory of
its own); no Lean here, so the real environment's row is for the site."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sgsbatch.canary.cases import SEARCH_PROOF, SearchCase
from sgsbatch.canary.search import check_search
from sgsbatch.canary.shapes import shape_jobs
from sgsbatch.config.loading import load_config
from sgsbatch.search.policy import linearize
from sgsbatch.verification.checks import check_proof, check_statement

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPTS = REPO.parent / "shared" / "lean-repl-v4.15.0"
# proof_step.in: `def f : Nat := by sorry`, then `have t : Nat := 42` on state 0 and `exact t` on state 2
PROOF_STEP = SearchCase("proof_step", "", "def f : Nat := by", ("have t : Nat := 42", "exact t"),
                        "the REPL's recorded proof_step test")
needs_replay = pytest.mark.skipif(importlib.util.find_spec("sgsbatch.search.replay") is None,
                                  reason="sgsbatch.search.replay (the replay tactic environment) is not in this tree")
needs_transcripts = pytest.mark.skipif(not (TRANSCRIPTS / "proof_step.in").is_file(),
                                       reason=f"no recorded transcripts at {TRANSCRIPTS}")


def test_a_search_config_checks_search_in_the_solve_job() -> None:
    cfg = load_config(REPO / "jobs" / "sgs.toml", ["solver.mode=search"])
    jobs = {j.name: j for j in shape_jobs(cfg)}
    assert jobs["conjecture+solve+guide"].components == (
        "environment", "generation:conjecturer", "generation:solver", "search", "guide")
    whole = {j.name: j for j in shape_jobs(load_config(REPO / "jobs" / "sgs.toml"))}
    assert "search" not in whole["conjecture+solve+guide"].components


def test_the_known_proof_passes_the_static_checks_a_search_applies() -> None:
    assert check_statement(SEARCH_PROOF.theorem) is None
    assert all(check_proof(t) is None for t in SEARCH_PROOF.tactics)
    assert check_proof(linearize(list(SEARCH_PROOF.tactics))) is None  # and as the whole proof verify gets


def test_a_simulated_environment_has_no_lean_to_check(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", ["solver.mode=search", "search.environment=simulated"])
    rows = check_search(cfg)
    assert [(r.component, r.ok, r.measures) for r in rows] == [("search", True, {})]
    assert "SIMULATED" in rows[0].figure


def _replay(tmp_path: Path) -> Path:
    """A directory holding only proof_step's transcript (links to ../shared)."""
    d = tmp_path / "replay"
    d.mkdir()
    for name in ("proof_step.in", "proof_step.expected.out"):
        (d / name).symlink_to(TRANSCRIPTS / name)
    return d


@needs_replay
@needs_transcripts
def test_the_known_proof_replays_tactic_by_tactic(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", ["solver.mode=search", "search.environment=replay",
                                                    f"search.replay_dir={_replay(tmp_path)}"])
    rows = check_search(cfg, PROOF_STEP)
    assert len(rows) == 1 and rows[0].ok, rows
    assert "2 tactics through replay" in rows[0].figure and "proof complete" in rows[0].figure
    assert rows[0].measures == {}  # a replay's seconds are not Lean's: plan must not read them


@needs_replay
@needs_transcripts
def test_a_failing_tactic_or_goals_left_fail_the_row(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", ["solver.mode=search", "search.environment=replay",
                                                    f"search.replay_dir={_replay(tmp_path)}"])
    wrong = SearchCase("wrong", "", PROOF_STEP.theorem, ("have t : Nat := 42", "exact 7"), "")
    rows = check_search(cfg, wrong)
    assert not rows[0].ok and "tactic 2 of 2 `exact 7` failed" in rows[0].figure and rows[0].fix
    short = SearchCase("short", "", PROOF_STEP.theorem, ("have t : Nat := 42",), "")
    rows = check_search(cfg, short)
    assert not rows[0].ok and "goals left: t : Nat" in rows[0].figure
    unknown = SearchCase("unknown", "", "theorem nope : True := by", ("trivial",), "")
    rows = check_search(cfg, unknown)
    assert not rows[0].ok and "did not start" in rows[0].figure


def test_an_environment_that_cannot_be_built_is_one_failed_row(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", ["solver.mode=search", "search.environment=replay",
                                                    f"search.replay_dir={tmp_path / 'missing'}"])
    rows = check_search(cfg)
    assert len(rows) == 1 and not rows[0].ok and rows[0].check == "tactic environment starts" and rows[0].fix
