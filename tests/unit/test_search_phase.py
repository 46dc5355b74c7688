"""The search phase's records (phases/search.py): a search as a solve sample, its journal line, and the
(goal state, tactic) training pairs split back from its arrays (round/examples.sample_examples)."""

from __future__ import annotations

from array import array
from pathlib import Path

from sgsbatch.phases.search import read_journal, search_row
from sgsbatch.round.examples import sample_examples
from sgsbatch.run.shards import Shard, append_json_line
from sgsbatch.run.token_arrays import ArraysFile, RecordArrays, TokenArrays
from sgsbatch.search.driver import Outcome, SearchJob

JOB = SearchJob("p#0", "p", 0, "import Mathlib\n", "theorem t (x : ℝ) : 0 ≤ x ^ 2 := by", 7)


def found() -> Outcome:
    steps = [(array("i", [1, 2, 3]), array("i", [10, 11]), array("f", [-0.5, -0.25])),
             (array("i", [4, 5]), array("i", [12]), array("f", [-1.0]))]
    return Outcome(JOB, True, ["intro y", "positivity"], "found", {"expansions": 2.0, "depth": 2}, steps,
                   ["⊢ 0 ≤ x ^ 2", "y : ℝ\n⊢ 0 ≤ x ^ 2"])


def test_a_found_search_is_a_solve_sample_with_its_proof_and_steps(tmp_path: Path) -> None:
    row = search_row(found())
    smp = row["sample"]
    assert smp["ok"] and smp["proof"] == "\n  intro y\n  positivity" and smp["reason"] is None
    assert smp["steps"] == [[3, 2], [2, 1]] and smp["n_tokens"] == 8 == len(row["token_ids"])
    assert row["token_ids"] == [1, 2, 3, 10, 11, 4, 5, 12]
    assert row["logprobs"] == [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, -1.0]  # prompt positions: 0
    assert smp["search"]["stop"] == "found"
    shard = Shard(tmp_path, 0)
    rec = shard.append_item({"key": "p", "problem_id": "p", "is_target": True, "samples": [smp], "n_prompt_tokens": 0},
                            TokenArrays([], [row["token_ids"]], [row["logprobs"]]))
    examples = sample_examples(RecordArrays(rec, ArraysFile(shard.arrays)), 0, smp, 1.0)
    assert [(list(e.prompt_ids), list(e.completion_ids), e.weight) for e in examples] == [
        ([1, 2, 3], [10, 11], 1.0), ([4, 5], [12], 1.0)]


def test_a_search_without_proof_has_no_steps_and_says_how_it_ended() -> None:
    row = search_row(Outcome(JOB, False, [], "start_failed: unknown identifier 'x'", {"expansions": 0.0, "depth": 0}))
    smp = row["sample"]
    assert not smp["ok"] and smp["proof"] is None and smp["reason"] == "search_start_failed"
    assert smp["n_tokens"] == 0 and smp["steps"] == [] and smp["search"]["stop"].startswith("start_failed: ")


def test_journal_keeps_finished_searches_and_drops_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "shard_00000.searches.jsonl"
    append_json_line(path, search_row(found()))
    with path.open("ab") as f:
        f.write(b'{"key": "p#1", "sample": {"ok": tr')  # a writer killed mid-line
    assert set(read_journal(path)) == {"p#0"}
    other = search_row(Outcome(SearchJob("p#1", "p", 1, "", JOB.theorem, 8), False, [], "exhausted", {"depth": 0}))
    append_json_line(path, other)  # the torn tail is cut first: the new line starts clean
    rows = read_journal(path)
    assert set(rows) == {"p#0", "p#1"} and rows["p#1"]["sample"]["reason"] == "search_exhausted"
    assert path.read_text().count("\n") == 2
    assert read_journal(tmp_path / "missing.jsonl") == {}


def test_search_config_errors_name_the_key() -> None:
    from dataclasses import replace

    from sgsbatch.config.schema import Config
    from sgsbatch.config.validation import semantic_errors

    base = Config()
    search = replace(base, solver=replace(base.solver, mode="search"))
    assert semantic_errors(search) == []  # the defaults: 4 Lean processes within slurm.solve.cpus
    errs = dict(semantic_errors(replace(search, slurm=replace(base.slurm, solve=replace(base.slurm.solve, cpus=1)),
                                        search=replace(base.search, lean_processes=4))))
    assert "search.lean_processes (4)" in errs["slurm.solve.cpus"]
    errs = dict(semantic_errors(replace(search, solver=replace(search.solver, objective="grpo"))))
    assert '"reinforce" or "ei"' in errs["solver.objective"]
    errs = dict(semantic_errors(replace(search, search=replace(base.search, width=0, environment="replay"))))
    assert set(errs) >= {"search.width", "search.replay_dir"}


def test_simulated_parts_name_a_simulated_tactic_environment() -> None:
    from dataclasses import replace

    from sgsbatch.config.schema import Config

    base = Config()
    assert base.simulated_parts() == [] and not base.simulated
    sim = replace(base, search=replace(base.search, environment="simulated"))
    assert sim.simulated_parts() == [] and not sim.simulated  # only a search Solver uses it
    search = replace(sim, solver=replace(base.solver, mode="search"))
    assert search.simulated_parts() == ["tactic environment"] and search.simulated
