"""What the Solver and the Conjecturer train on under the reference's statement selection modes and STP's rules.

Worked cases from LukeBailey181/sgs (sgs/pipeline/step1_data_gen.py:1040-1126 for the modes) and from
kfdong/STP (RL/utils/RL_utils.py:28, 79-101, 373, 481 for the Conjecturer's band and elegance filter;
RL/RL_step3_final_model.py:176-187 for the per-problem proof cap), each citing its line. The round-level
cases reuse tests/unit/test_round.py's synthetic round 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config, SolverConfig
from sgsbatch.errors import ConfigError
from sgsbatch.logic.selection import capped_proofs, selected_problems, stp_conjecture_band
from sgsbatch.round.compaction import rounds_to_compact
from sgsbatch.round.examples import (
    conjecturer_examples,
    ei_stored_proofs,
    in_band_conjectures,
    solver_examples,
    solver_selection,
)
from sgsbatch.round.lifecycle import ingest_round, prepare_round
from sgsbatch.round.results import round_results
from sgsbatch.run.shards import read_json
from tests.unit.test_round import CA, CB, LONG_WEIGHT, A, B, C, D, _cfg, _ids, _round0, _run

REPO = Path(__file__).resolve().parents[2]
# targets t* (t_new unsolved when the round started, t_old solved before) and conjectures c*
RATES = {"t_new0": 0.0, "t_new1": 0.125, "t_new8": 1.0, "t_old1": 0.125, "t_old4": 0.5, "t_old7": 0.875,
         "t_old8": 1.0, "c0": 0.0, "c1": 0.125, "c4": 0.5, "c5": 0.625, "c8": 1.0}
TARGETS = {k for k in RATES if k.startswith("t")}
UNSOLVED = {"t_new0", "t_new1", "t_new8"}


@pytest.mark.parametrize(("mode", "want"), [
    # HARD: `statement_solve_rate <= 0.5 and statement_solve_rate > 0.0` (1042, conjectures 1111)
    ("hard", {"t_new1", "t_old1", "t_old4", "c1", "c4"}),
    # UNSOLVED: targets `> 0.0 and statement.id in unsolved_target_statement_ids` (1045), conjectures `> 0.0` (1114)
    ("unsolved", {"t_new1", "t_new8", "c1", "c4", "c5", "c8"}),
    # ALL_NONE_0_1: `> 0.0 and < 1.0` (1048, 1117)
    ("all_none_0_1", {"t_new1", "t_old1", "t_old4", "t_old7", "c1", "c4", "c5"}),
    # ALL and LESS_16_PROOFS: `> 0.0` (1051, 1055; 1120, 1123); STP_IMPROVED_EI (not implemented there): as EI
    ("all", {"t_new1", "t_new8", "t_old1", "t_old4", "t_old7", "t_old8", "c1", "c4", "c5", "c8"}),
    ("less_16_proofs", {"t_new1", "t_new8", "t_old1", "t_old4", "t_old7", "t_old8", "c1", "c4", "c5", "c8"}),
    ("stp_improved_ei", {"t_new1", "t_new8", "t_old1", "t_old4", "t_old7", "t_old8", "c1", "c4", "c5", "c8"}),
])
def test_selection_modes_worked_from_the_reference(mode: str, want: set[str]) -> None:
    assert selected_problems(mode, RATES, TARGETS, UNSOLVED) == want


def test_selection_modes_keep_the_band_keys_and_refuse_unknown_modes() -> None:
    # "hard" is the band keys' band (0 < s <= 0.5 by default); all_none_0_1 keeps band_low
    assert selected_problems("hard", RATES, TARGETS, UNSOLVED, high=0.625, include_high=False) == {
        "t_new1", "t_old1", "t_old4", "c1", "c4"}
    assert selected_problems("all_none_0_1", RATES, low=0.125) == {"t_old4", "t_old7", "c4", "c5"}
    with pytest.raises(ValueError, match="valid: hard, unsolved"):
        selected_problems("HARD", RATES)


def test_auto_selection_is_each_objectives_own() -> None:
    assert [SolverConfig(objective=o).selection_mode() for o in ("reinforce", "cispo", "ei", "grpo", "dapo")] == [
        "hard", "all_none_0_1", "less_16_proofs", "auto", "auto"]
    assert SolverConfig(objective="ei", selection="stp_improved_ei").selection_mode() == "stp_improved_ei"
    assert [SolverConfig(selection=m).window_rounds() for m in ("hard", "less_16_proofs", "stp_improved_ei")] == [1, 3, 3]
    assert rounds_to_compact(Config(), 7) == 7
    assert rounds_to_compact(Config(solver=SolverConfig(objective="ei", selection="stp_improved_ei")), 7) == 5


def test_capped_proofs_keep_distinct_proofs_per_problem_newest_first() -> None:
    found = [(0, "t1", 0, "simp"), (0, "t1", 1, "simp"), (1, "t1", 3, "simp"), (1, "t1", 0, "linarith"),
             (2, "t1", 5, "norm_num"), (0, "c0-x", 2, "simp"), (2, "t2", 0, "omega"), (2, "t2", 1, "omega ")]
    # t1: 3 distinct texts; the newest copy of "simp" (round 1, sample 3) stands for the others
    assert capped_proofs(found, 16) == [(0, "c0-x", 2), (1, "t1", 0), (1, "t1", 3), (2, "t1", 5), (2, "t2", 0),
                                        (2, "t2", 1)]
    # STP's cap (`if proof_count[key] < 16`, RL_step3_final_model.py:187): here at 2, newest rounds first
    assert capped_proofs(found, 2) == [(0, "c0-x", 2), (1, "t1", 0), (2, "t1", 5), (2, "t2", 0), (2, "t2", 1)]
    assert capped_proofs(found, 1) == [(0, "c0-x", 2), (2, "t1", 5), (2, "t2", 0)]
    with pytest.raises(ValueError):
        capped_proofs(found, 0)


def test_stp_conjecture_band_worked_from_stp() -> None:
    rates = {"a": 0.0, "b": 0.125, "c": 0.125, "d": 0.125, "e": 0.125, "f": 0.125, "g": 0.25, "h": 0.5}
    ratios = {"b": 0.5, "c": 0.1, "d": 2.0, "e": 0.3, "f": 0.7, "g": 0.01, "h": 0.02}
    # `get_succ_rate(test_info) < CONJECTURE_THRESHOLD` (RL_utils.py:481, 28: 0.25): 0 and 0.25 are out;
    # filter_by_ratio(..., 0.2) (RL_utils.py:373, 79-101): cutoff = sorted(ratios)[int(5 * 0.2)] = 0.3, keep >= it
    assert stp_conjecture_band(rates, ratios) == {"b", "d", "e", "f"}
    assert stp_conjecture_band(rates, ratios, quantile=0.0) == {"b", "c", "d", "e", "f"}
    assert stp_conjecture_band(rates, ratios, quantile=0.5) == {"b", "d", "f"}  # cutoff sorted[2] = 0.5
    # threshold 0.5: g (0.25) joins; 6 candidates, cutoff sorted[int(6 * 0.2)] = 0.1, so c stays and g (0.01) goes
    assert stp_conjecture_band(rates, ratios, threshold=0.5) == {"b", "c", "d", "e", "f"}
    # `or len(group) < 2`: a lone candidate is kept whatever its ratio
    assert stp_conjecture_band({"c": 0.125, "h": 0.5}, ratios) == {"c"}
    with pytest.raises(ValueError, match="no proof length ratio"):
        stp_conjecture_band({"b": 0.125, "z": 0.125}, ratios)


def test_unsolved_selection_trains_targets_first_solved_this_round(tmp_path: Path) -> None:
    h = _round0(tmp_path, "solver.selection=unsolved")
    res = round_results(h.cfg, h.paths, 0)
    # round 0: every target was unsolved; rates t1 .25, t2 .5, t3 1, conjectures .25 .25 .5 .75
    assert read_json(h.paths.round_inputs(0))["unsolved"] == ["t0", "t1", "t2", "t3"]
    assert solver_selection(h.cfg, res, ["t0", "t1", "t2", "t3"]) == {"t1", "t2", "t3", A, B, C, D}
    assert solver_selection(h.cfg, res, ["t0", "t2"]) == {"t2", A, B, C, D}
    ex = solver_examples(h.cfg, h.paths, res, (), ["t0", "t2"])
    # t2: its proof (weight 1) and its over-long proof; A: 1; B's and C's `try` proofs dropped; D: 3 proofs
    assert sorted(e.weight for e in ex) == pytest.approx(sorted([1.0, LONG_WEIGHT, 1.0, 1.0, 1.0, 1.0, 1.0]))
    # a solver-only run still records the round's unsolved targets for this selection
    solo = _run(tmp_path / "solo", "solver.selection=unsolved", "conjecturer.enabled=false", "guide.enabled=false")
    assert read_json(solo.paths.round_inputs(0))["unsolved"] == ["t0", "t1", "t2", "t3"]


def test_stp_improved_ei_trains_capped_proofs_of_targets_and_conjectures(tmp_path: Path) -> None:
    h = _round0(tmp_path, "solver.objective=ei", "solver.selection=stp_improved_ei", "guide.enabled=false")
    assert read_json(h.paths.round_inputs(0))["solve_targets"] == ["t0", "t1", "t2", "t3"]  # every target sampled
    assert ingest_round(h, 0)
    stored = ei_stored_proofs(h, 0)
    # every verified proof of round 0, one per distinct text per problem (t2's two "simp" proofs: one;
    # t3's four: one; C's "simp" and "try simp": two)
    assert sorted(stored) == sorted([(0, "t1", 0), (0, "t2", 0), (0, "t3", 0), (0, A, 1), (0, B, 0), (0, C, 0),
                                     (0, C, 1), (0, D, 0)])
    ex = solver_examples(h.cfg, h.paths, {}, stored)
    # weighted as REINFORCE-1/2: the `try` proofs (B's, C's second) dropped
    assert sorted((e.prompt_ids[0], e.weight) for e in ex) == [(1001, 1.0), (1002, 1.0), (1003, 1.0), (1004, 1.0),
                                                               (1006, 1.0), (1007, 1.0)]
    assert ei_stored_proofs(h, 3) == []  # ei_rounds = 3: rounds 1..3
    prepare_round(h, 1)
    assert read_json(h.paths.round_inputs(1))["solve_targets"] == ["t0", "t1", "t2", "t3"]


def test_stp_conjecturer_reward_is_weight_one_on_stps_band(tmp_path: Path) -> None:
    h = _round0(tmp_path, "conjecturer.reward=stp", "guide.enabled=false")
    res = round_results(h.cfg, h.paths, 0)
    # conjecture rates A .25, B .25, C .5, D .75: none is below STP's 0.25 with 4 samples
    assert in_band_conjectures(h.cfg, res) == set()
    assert conjecturer_examples(h.cfg, h.paths, 0, res) == ([], {})
    cfg = _cfg(tmp_path, "conjecturer.reward=stp", "guide.enabled=false", "conjecturer.stp_threshold=0.5")
    # A and B (.25); shortest verified proofs "simp" (A) and "try simp" (B) over equally long statements
    assert len(CA) == len(CB) and in_band_conjectures(cfg, res) == {A, B}
    ex, rewards = conjecturer_examples(cfg, h.paths, 0, res)
    assert rewards == {A: 1.0, B: 1.0}
    assert sorted((_ids(e.prompt_ids), _ids(e.completion_ids), e.weight) for e in ex) == [([200], [300, 300], 1.0),
                                                                              ([201], [312, 312], 1.0)]
    # the elegance filter at the median: A's ratio 4 / 28 is below B's 8 / 28, so A goes
    strict = _cfg(tmp_path, "conjecturer.reward=stp", "guide.enabled=false", "conjecturer.stp_threshold=0.5",
                  "conjecturer.stp_elegance_quantile=0.5")
    assert in_band_conjectures(strict, res) == {B}


@pytest.mark.parametrize(("overrides", "key", "words"), [
    (["conjecturer.setup=seed"], "conjecturer.setup",
     "one of 'target_statement_only_unsolved', 'target_statement', 'seed_statement'"),
    (["solver.selection=hardest"], "solver.selection",
     "one of 'auto', 'hard', 'unsolved', 'stp_improved_ei', 'all_none_0_1', 'all', 'less_16_proofs'"),
    (["conjecturer.reward=guide"], "conjecturer.reward", "one of 'sgs', 'stp'"),
    (["solver.objective=ei"], "conjecturer.enabled", "Expert Iteration uses no conjectures"),
    (["solver.selection=less_16_proofs"], "conjecturer.enabled", "\"stp_improved_ei\" trains on conjectures too"),
    (["solver.objective=ei", "solver.selection=hard", "conjecturer.enabled=false"], "solver.selection",
     "use solver.objective = \"reinforce\""),
    (["solver.objective=cispo", "solver.selection=stp_improved_ei"], "solver.selection", "valid: auto, hard"),
    (["solver.objective=grpo", "solver.selection=all"], "solver.selection", "must be \"auto\""),
    (["conjecturer.reward=stp"], "guide.enabled", "uses no Guide"),
    (["conjecturer.stp_threshold=0"], "conjecturer.stp_threshold", "(0, 1]"),
    (["conjecturer.stp_elegance_quantile=1"], "conjecturer.stp_elegance_quantile", "[0, 1)"),
    (["solver.proof_cap=0"], "solver.proof_cap", ">= 1"),
])
def test_bad_selection_and_setup_values_are_refused_with_the_choices(overrides: list[str], key: str,
                                                                       words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(REPO / "jobs" / "tiny.toml", overrides)
    assert key in str(info.value) and words in str(info.value)


def test_stp_combinations_load() -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [
        "solver.objective=ei", "solver.selection=stp_improved_ei", "conjecturer.setup=seed_statement",
        "conjecturer.reward=stp", "guide.enabled=false"])
    assert (cfg.solver.selection_mode(), cfg.conjecturer.setup, cfg.conjecturer.reward) == (
        "stp_improved_ei", "seed_statement", "stp")
    assert cfg.phases_of_round(1) == ("conjecture", "solve", "verify", "train")
