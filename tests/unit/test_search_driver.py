"""The wave driver (search/driver.py) with the SIMULATED tactic environment and the SIMULATED engine:
one engine call per wave across the live searches, results independent of concurrency, stops, and the
policy's prompt and reply parsing (search/policy.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.backends.simulated_generation import SimulatedGenerator, settings_from
from sgsbatch.config.schema import Config, SearchConfig
from sgsbatch.search.driver import Outcome, SearchJob, run_searches
from sgsbatch.search.policy import linearize, prompt_messages, tactic_of
from sgsbatch.search.simulated import SimulatedTacticEnvironment

HEADER = "import Mathlib\n\n"
THEOREMS = [f"theorem t{i} (x y : ℝ) (h : {i} < x) : {i} < x + y ^ 2 := by" for i in range(6)]
CFG = SearchConfig(environment="simulated", width=4, max_expansions=4, time_limit_s=0, tactic_max_tokens=64,
                   simulated_branching=0.3, simulated_depth=3)


class CountingEngine(SimulatedGenerator):
    """The SIMULATED engine, counting its calls: a call is the steps from the first add after a drain to
    the drain (what `generate_wave` does once per wave)."""

    def __init__(self) -> None:
        super().__init__(settings_from(Config(), "solver", 0))
        self.calls: list[int] = []  # requests added per call
        self._adding = 0

    def add(self, request: Request) -> None:
        self._adding += 1
        super().add(request)

    def step(self) -> list[tuple[Request, Generation]]:
        if self._adding:
            self.calls.append(self._adding)
            self._adding = 0
        return super().step()


def jobs(n: int = 6, per: int = 2) -> list[SearchJob]:
    return [SearchJob(f"p{i}#{j}", f"p{i}", j, HEADER, THEOREMS[i % len(THEOREMS)], 1000 * i + j)
            for i in range(n) for j in range(per)]


def run(cfg: SearchConfig, js: list[SearchJob]) -> tuple[dict[str, Outcome], Any, CountingEngine]:
    done: dict[str, Outcome] = {}
    engine = CountingEngine()

    def on_done(o: Outcome) -> None:
        done[o.job.key] = o

    stats = run_searches(js, SimulatedTacticEnvironment(cfg.simulated_branching, cfg.simulated_depth), engine, cfg,
                         on_done=on_done, check_stop=lambda: None)
    return done, stats, engine


def test_one_engine_call_per_wave_across_the_live_searches() -> None:
    js = jobs()
    done, stats, engine = run(replace(CFG, concurrent=len(js)), js)
    assert set(done) == {j.key for j in js}
    assert len(engine.calls) == stats.waves  # one call a wave, never one per expansion
    assert engine.calls[0] == len(js)  # the first wave: every search's root together
    assert sum(engine.calls) == stats.requests == sum(o.stats["expansions"] for o in done.values())
    assert stats.waves < stats.requests
    assert engine.stats.sequences == stats.requests * CFG.width
    assert stats.generated_tokens == engine.stats.generated_tokens == sum(o.stats["generated_tokens"]
                                                                          for o in done.values())
    d = stats.as_dict()
    assert d["tokens_per_call"] == pytest.approx(stats.generated_tokens / stats.waves, abs=0.1)


def test_results_do_not_depend_on_which_searches_share_a_wave() -> None:
    js = jobs()

    def key(o: Outcome) -> tuple[Any, ...]:
        return o.found, o.tactics, o.stop, {k: v for k, v in o.stats.items() if k != "wall_s"}

    one, _, _ = run(replace(CFG, concurrent=1), js)
    many, _, _ = run(replace(CFG, concurrent=5), js)
    assert {k: key(o) for k, o in one.items()} == {k: key(o) for k, o in many.items()}
    found = [o for o in one.values() if o.found]
    assert found and any(not o.found for o in one.values())  # the SIMULATED states give both outcomes
    for o in found:
        assert o.stop == "found" and len(o.steps) == len(o.tactics) == len(o.goals) == o.stats["depth"]
        prompt, tactic, logprobs = o.steps[0]
        assert len(prompt) > 0 and len(tactic) == len(logprobs) > 0


def test_a_stop_request_drops_only_the_live_searches() -> None:
    js = jobs()
    done: dict[str, Outcome] = {}
    waves = {"n": 0}

    class Stop(Exception):
        pass

    def check_stop() -> None:
        waves["n"] += 1
        if waves["n"] > 3:
            raise Stop

    with pytest.raises(Stop):
        run_searches(js, SimulatedTacticEnvironment(CFG.simulated_branching, CFG.simulated_depth), CountingEngine(),
                     replace(CFG, concurrent=4), on_done=lambda o: done.setdefault(o.job.key, o), check_stop=check_stop)
    full, _, _ = run(replace(CFG, concurrent=4), js)
    assert len(done) < len(js)
    for k, o in done.items():  # what finished before the stop is what an unstopped run finds
        assert (o.found, o.tactics) == (full[k].found, full[k].tactics)


def test_refused_tactics_never_reach_the_environment_state() -> None:
    env = SimulatedTacticEnvironment(1.0, 3)
    from sgsbatch.search.environment import Apply, Start

    (root,) = env.start_many([Start("k", HEADER, THEOREMS[0] + " sorry")])
    assert root.ok and root.goals == (f"⊢ {THEOREMS[0].removesuffix(':= by').strip()}",)
    bad, good = env.apply_many([Apply("k", root.state or 0, "run_tac (pure ())"), Apply("k", root.state or 0, "intro z")])
    assert not bad.ok and bad.error is not None and bad.error.startswith("refused: ")
    assert good.ok and good.goals and good.state is not None
    other = env.apply_many([Apply("other", root.state or 0, "intro z")])[0]
    assert not other.ok and other.error == "unknown_proof_state"


def test_prompt_and_reply_format() -> None:
    msgs = prompt_messages(THEOREMS[0], ["intro z", "nlinarith [sq_nonneg y]"], ("x : ℝ\n⊢ 0 < x",), 4096)
    text = msgs[0]["content"]
    assert text.endswith("\n:::") and THEOREMS[0] in text and "\n  intro z\n  nlinarith [sq_nonneg y]\n" in text
    assert "Goals:\nx : ℝ\n⊢ 0 < x" in text
    cut = prompt_messages(THEOREMS[0], [], ("G" * 100,), 10)[0]["content"]
    assert "G" * 10 + "\n..." in cut and "G" * 11 not in cut
    assert tactic_of("  nlinarith [sq_nonneg x]\n\nsomething else") == "nlinarith [sq_nonneg x]"
    assert tactic_of("cases h with\n  | inl h => simp\n  | inr h => simp") == "cases h with\n  | inl h => simp\n  | inr h => simp"
    assert tactic_of("```lean4\ntheorem t : 1 = 1 := by\n  rfl\n  simp\n```") == "rfl"
    restated = "```lean4\ntheorem t : 1 = 1 := by\n  intro z\n  cases h with\n  | inl => simp\n  omega\n```"
    assert tactic_of(restated, ["intro z", "cases h with\n| inl => simp"]) == "omega"  # the proof so far skipped
    assert tactic_of(restated, ["intro y"]) == "intro z"  # not a restatement: its first tactic
    assert tactic_of("   \n") is None and tactic_of("```lean4\n```") is None
    assert linearize(["intro x", "cases h with\n| inl => simp"]) == "\n  intro x\n  cases h with\n  | inl => simp"
