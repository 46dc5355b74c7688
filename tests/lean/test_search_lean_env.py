"""The search's tactic environments on Lean's side: `lean` (search/lean_env.py) over the stand-in
REPL (fake_repl.py rules mode, its tactic model in fake_tactics.py) in the bwrap sandbox with the
process filter, as verify runs; `replay` (search/replay.py) over the recorded transcripts; and
one tactic through the real REPL (skipped, saying why, without Lean)."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from leanlib import FAKE, need_real_lean
from test_lean_sandbox import _wait_gone, needs_bwrap

from sgsbatch.config.schema import SearchConfig, VerificationConfig
from sgsbatch.search.environment import Apply, Start
from sgsbatch.search.lean_env import LeanTacticEnvironment
from sgsbatch.search.replay import UNRECORDED, ReplayTacticEnvironment

HEADER = "import Mathlib\nopen Real"
THEOREM = "theorem t_{i} (n : Nat) (h : n > 0) : n = n → n > 0 := by sorry"


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Callable[..., LeanTacticEnvironment]]:
    """A factory of LeanTacticEnvironments over the stand-in; every one is closed and its processes gone."""
    token = f"lean-env-test-{uuid.uuid4().hex}"
    made: list[LeanTacticEnvironment] = []

    def make(processes: int = 1, tactic_timeout_s: float = 5.0) -> LeanTacticEnvironment:
        vcfg = VerificationConfig(repl_command=(sys.executable, str(FAKE), token), project_dir=str(tmp_path),
                                  kernel_recheck=False, memory_limit_mb=0, timeout_s=10.0, header_timeout_s=10.0,
                                  sandbox="bwrap", process_filter=True, scratch_dir=str(tmp_path / "scratch"))
        env = LeanTacticEnvironment(vcfg, SearchConfig(lean_processes=processes, tactic_timeout_s=tactic_timeout_s))
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()
    assert _wait_gone(token) == [], "close() ends every process the environment started"


@needs_bwrap
def test_a_path_a_failed_edge_and_a_refused_tactic(make_env: Callable[..., LeanTacticEnvironment]) -> None:
    env = make_env()
    (root,) = env.start_many([Start("a", HEADER, THEOREM.format(i=0))])
    assert root.ok and root.state == 0 and root.goals == ("n : Nat\nh : n > 0\n⊢ n = n → n > 0",)
    intro, wrong, refused, unknown = env.apply_many([
        Apply("a", 0, "intro e"), Apply("a", 0, "exact nope"), Apply("a", 0, "#eval FAKE_CRASH"),
        Apply("a", 42, "rfl")])
    assert intro.ok and intro.goals == ("n : Nat\nh : n > 0\ne : n = n\n⊢ n > 0",) and intro.lean_s > 0
    assert not wrong.ok and wrong.error == "lean_error: unknown identifier 'nope'" and wrong.state is None
    assert refused.error == "refused: eval" and refused.lean_s == 0.0
    assert unknown.error == "unknown_proof_state"
    (done,) = env.apply_many([Apply("a", intro.state or 0, "exact h")])
    assert done.solved
    # the refused tactic never reached Lean: it would have crashed the process
    assert env.restarts == 0 and len(env.pool.started_pids) == 1
    sorry, bad = env.apply_many([Apply("a", 0, "sorry"), Apply("a", 0, "exat h")])
    assert sorry.error == "refused: sorry" and bad.error == "refused: unknown_tactic"
    env.finish("a")
    assert env.apply_many([Apply("a", 0, "intro e")])[0].error == "unknown_proof_state"


@needs_bwrap
def test_statements_that_cannot_start(make_env: Callable[..., LeanTacticEnvironment]) -> None:
    env = make_env()
    no_sorry, code, header = env.start_many([
        Start("a", HEADER, "theorem a (n : Nat) : n = n := by rfl"),
        Start("b", HEADER, "theorem b (n : Nat) : n = (by exact n) := by sorry"),
        Start("c", "import Mathlib\n#eval 1", THEOREM.format(i=2))])
    assert "bad_statement" in (no_sorry.error or "")
    assert code.error == "refused: statement_code" and header.error == "refused: bad_header"
    assert env.pool.started_pids == [], "nothing refused reached Lean"


@needs_bwrap
def test_timeout_restarts_the_process_and_replays_from_the_root(make_env: Callable[..., LeanTacticEnvironment]) -> None:
    env = make_env(tactic_timeout_s=1.0)
    (root,) = env.start_many([Start("a", HEADER, THEOREM.format(i=0))])
    (intro,) = env.apply_many([Apply("a", 0, "intro e")])
    (hang,) = env.apply_many([Apply("a", intro.state or 0, "skip FAKE_HANG")])
    assert hang.error == "timeout" and 1.0 <= hang.lean_s < 5.0
    assert env.restarts == 1
    (done,) = env.apply_many([Apply("a", intro.state or 0, "exact h")])  # on a dead process: replayed
    assert done.solved, done
    assert env.replayed == 1 and len(env.pool.started_pids) == 2
    (again,) = env.apply_many([Apply("a", 0, "intro f")])  # the root lives on the new process now
    assert again.ok and env.replayed == 1
    (crash,) = env.apply_many([Apply("a", again.state or 0, "skip FAKE_CRASH")])  # a crash: a failed edge too
    assert crash.error == "repl_crash" and env.restarts == 2
    (after,) = env.apply_many([Apply("a", again.state or 0, "exact h")])
    assert after.solved and env.replayed == 2 and len(env.pool.started_pids) == 3


@needs_bwrap
def test_apply_many_runs_processes_in_parallel(make_env: Callable[..., LeanTacticEnvironment]) -> None:
    env = make_env(processes=2)
    roots = env.start_many([Start(k, HEADER, THEOREM.format(i=i)) for i, k in enumerate("ab")])
    assert all(r.ok for r in roots) and len(env.pool.started_pids) == 2, "each search pinned to its own process"
    calls = [Apply(k, 0, "skip FAKE_SLOW") for _ in range(4) for k in "ab"]
    t0 = time.perf_counter()
    results = env.apply_many(calls)
    wall = time.perf_counter() - t0
    assert all(r.ok and r.goals == roots[0].goals for r in results[::2])
    lean = sum(r.lean_s for r in results)
    assert lean >= 8 * 0.3 and wall < 0.75 * lean, f"{wall:.2f} s wall for {lean:.2f} s of Lean: not parallel"


def test_replay_environment_answers_recorded_steps(transcripts: Path) -> None:
    env = ReplayTacticEnvironment(transcripts)
    assert env.name == "replay"
    root, other = env.start_many([Start("a", "", "def f : Nat := by sorry"), Start("b", "", "theorem nope : 1 = 2 := by sorry")])
    assert root.ok and root.goals == ("⊢ Nat",) and other.error == UNRECORDED
    step, have, unrecorded = env.apply_many([Apply("a", root.state or 0, "apply Int.natAbs"),
                                             Apply("a", root.state or 0, "have t : Nat := 42"),
                                             Apply("a", root.state or 0, "simp")])
    assert step.ok and step.goals == ("⊢ Int",)
    assert have.ok and have.goals == ("t : Nat\n⊢ Nat",) and unrecorded.error == UNRECORDED
    (done,) = env.apply_many([Apply("a", have.state or 0, "exact t")])
    assert done.solved
    # recorded on proof state 0 of unknown_tactic.in, not of proof_step.in, where this root comes from
    (bad,) = env.apply_many([Apply("a", root.state or 0, "exat 42")])
    assert bad.error == UNRECORDED
    (header_env,) = env.start_many([Start("c", "import Lean", "def f : Nat := by sorry")])
    assert header_env.ok and header_env.goals == ("⊢ Nat",)
    env.finish("a")
    assert env.apply_many([Apply("a", root.state or 0, "apply Int.natAbs")])[0].error == "unknown_proof_state"


def test_replay_environment_needs_transcripts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="search.replay_dir .* holds no recorded transcripts"):
        ReplayTacticEnvironment(tmp_path)
    with pytest.raises(ValueError, match="search.replay_dir .* is not a directory"):
        ReplayTacticEnvironment(tmp_path / "missing")


def test_real_lean_applies_a_tactic(tmp_path: Path) -> None:
    need_real_lean()
    vcfg = VerificationConfig(kernel_recheck=False, scratch_dir=str(tmp_path))
    env = LeanTacticEnvironment(vcfg, SearchConfig(lean_processes=1, tactic_timeout_s=60.0))
    try:
        (root,) = env.start_many([Start("a", "import Mathlib", "theorem t (n : ℕ) : n + 0 = n := by sorry")])
        assert root.ok and root.goals == ("n : ℕ\n⊢ n + 0 = n",), root
        wrong, done = env.apply_many([Apply("a", 0, "exact my_fake_premise"), Apply("a", 0, "simp")])
        assert wrong.error is not None and "unknown identifier" in wrong.error
        assert done.solved, done
    finally:
        env.close()
