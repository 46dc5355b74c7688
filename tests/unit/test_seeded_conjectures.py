"""Seeded conjecturing (`conjecturer.setup`): which solved statements and which of their proofs seed the
Conjecturer's prompts, cycled as the reference does, and each setup's prompts of a round.

The cycling is checked against the reference's loop itself (LukeBailey181/sgs
sgs/pipeline/step1_data_gen.py:303-340, quoted in `reference_seeds` with its module-level `random`
replaced by a seeded `random.Random`); the round-level cases reuse tests/unit/test_round.py's
synthetic round 0 (stored proofs: t1 one, t2 two, t3 four; t0 unsolved).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.logic.prompts import conjecturer_messages, seeded_conjecturer_messages
from sgsbatch.logic.selection import conjecture_seeds, seed_cycle
from sgsbatch.phases.conjecture import round_prompts
from sgsbatch.phases.task import Task
from sgsbatch.round.lifecycle import ingest_round, prepare_round, round_seeds
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.shards import Shard, read_json
from tests.unit.test_round import TARGETS, _round0


def reference_seeds(statement_proofs: list[Any], num_to_add: int, rnd: random.Random) -> list[Any]:
    """step1_data_gen.py:310-340 (SEED_STATEMENT), as written there but for `rnd` and the prompt building."""
    seeds: list[Any] = []
    if len(statement_proofs) == 0:
        return seeds  # `continue`: an unsolved statement seeds nothing
    num_added = 0
    while num_added < num_to_add:
        # Cycle through the proofs
        statement_proof_objs = rnd.sample(statement_proofs, len(statement_proofs))
        for proof in statement_proof_objs:
            seeds.append(proof)
            num_added += 1
            if num_added >= num_to_add:
                break
    return seeds


@pytest.mark.parametrize("proofs", [0, 1, 2, 3, 5, 16])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 16, 33])
def test_seed_cycle_is_the_reference_loop(proofs: int, n: int) -> None:
    for seed in range(5):
        items = [f"p{i}" for i in range(proofs)]
        assert seed_cycle(items, n, random.Random(seed)) == reference_seeds(items, n, random.Random(seed))


def test_seed_cycle_worked_cases() -> None:
    rng = random.Random(0)
    # conjectures_per_statement = 1 (the reference default and SGS's): one proof, any of them
    assert len(seed_cycle(["a", "b", "c"], 1, rng)) == 1
    # 5 prompts from 2 proofs: passes of 2, 2 and 1, so one proof seeds 3 prompts and the other 2
    five = seed_cycle(["a", "b"], 5, rng)
    assert sorted(Counter(five).values()) == [2, 3] and five[0] != five[1] and five[2] != five[3]
    # 6 from 3: two whole passes, each a permutation of all three
    six = seed_cycle(["a", "b", "c"], 6, rng)
    assert sorted(six[:3]) == sorted(six[3:]) == ["a", "b", "c"]
    # more proofs than prompts: distinct proofs, never one twice
    assert len(set(seed_cycle(list("abcdefgh"), 4, rng))) == 4
    assert seed_cycle([], 3, rng) == [] and seed_cycle(["a"], 0, rng) == []
    with pytest.raises(ValueError):
        seed_cycle(["a"], -1, rng)


def test_conjecture_seeds_group_prompts_per_proof_and_depend_on_the_target_alone() -> None:
    stored = {"t1": [0], "t2": [0, 1], "t3": [0, 1, 2, 3]}
    seeds = conjecture_seeds(["t0", "t1", "t2", "t3"], stored, 5, "0:1")
    # t0 is unsolved: no seed; every solved target gets 5 prompts, its proofs used 5 // p or 5 // p + 1 times
    assert [t for t, _, _ in seeds] == ["t1"] + ["t2"] * 2 + ["t3"] * 4
    per = {t: sorted(k for tt, _, k in seeds if tt == t) for t in stored}
    assert per == {"t1": [5], "t2": [2, 3], "t3": [1, 1, 1, 2]}
    assert all(sum(k for tt, _, k in seeds if tt == t) == 5 for t in stored)
    # the same target draws the same seeds whatever the others and the order; another round draws anew
    alone = conjecture_seeds(["t3"], {"t3": [3, 2, 1, 0]}, 5, "0:1")
    assert alone == [s for s in seeds if s[0] == "t3"]
    assert conjecture_seeds(["t3", "t1"], stored, 5, "0:1")[:4] == alone
    # the rng is per round and target: over rounds, t3's single prompt is seeded by each of its proofs
    assert {conjecture_seeds(["t3"], stored, 1, f"0:{r}")[0][1] for r in range(40)} == {0, 1, 2, 3}
    # one prompt per solved target (SGS's samples_per_target = 1): one proof each
    assert [(t, k) for t, _, k in conjecture_seeds(["t0", "t1", "t2", "t3"], stored, 1, "x")] == [
        ("t1", 1), ("t2", 1), ("t3", 1)]


def _task(h: RunHandle, r: int) -> Task:
    return Task(h.cfg, h.paths, r, "conjecture", Shard(h.paths.phase_dir(r, "conjecture"), 0), lambda: False)


def _round1(tmp: Path, *extra: str) -> RunHandle:
    """Round 0 of test_round.py ingested (t1, t2, t3 solved: 1, 2 and 4 stored proofs), round 1 prepared."""
    h = _round0(tmp, *extra)
    assert ingest_round(h, 0)
    prepare_round(h, 1)
    return h


def test_seed_statement_round_inputs_and_prompts(tmp_path: Path) -> None:
    h = _round1(tmp_path, "conjecturer.setup=seed_statement", "conjecturer.samples_per_target=5", "guide.enabled=false")
    inputs = read_json(h.paths.round_inputs(1))
    seeds = inputs["seeds"]
    assert [(s["target_id"], s["samples"]) for s in seeds] == [
        (t, k) for t, _, k in conjecture_seeds(["t0", "t1", "t2", "t3"], {"t1": [0], "t2": [0, 1], "t3": [0, 1, 2, 3]},
                                               5, f"{h.cfg.run.seed}:1")]
    assert {s["proof"] for s in seeds} == {"simp"}  # the stored proofs' texts travel with the seeds
    assert inputs["unsolved"] == ["t0"] and inputs["solve_targets"] == ["t0", "t1", "t2", "t3"]
    prompts = round_prompts(_task(h, 1))
    assert [(p.key, p.target.problem_id, p.slot, p.samples) for p in prompts] == [
        (f"{s['target_id']}:{s['slot']}", s["target_id"], s["slot"], s["samples"]) for s in seeds]
    # round 0 had nothing solved: no seeds, no prompts (STP's first round is the Solver's alone)
    assert read_json(h.paths.round_inputs(0))["seeds"] == [] and round_prompts(_task(h, 0)) == []
    # the message each prompt becomes: the reference's seeded string of the target and that proof
    t1 = TARGETS[1]
    assert seeded_conjecturer_messages(t1.header, t1.theorem, "simp")[0]["content"].startswith(
        f"Here is a Lean 4 problem statement and its proof:\n```lean4\n{t1.theorem}simp\n```\n")


def test_round_seeds_carry_the_text_of_their_own_stored_proof(tmp_path: Path) -> None:
    """Each seed's proof is the stored proof of its (target, slot), fetched for the chosen targets only."""
    from sqlmodel import select

    from sgsbatch.state.schema import StoredProof

    h = _round1(tmp_path, "conjecturer.setup=seed_statement", "conjecturer.samples_per_target=5", "guide.enabled=false")
    with h.db.write() as s:
        for row in s.exec(select(StoredProof)).all():
            row.proof = f"proof of {row.problem_id} slot {row.slot}"
            s.add(row)
    seeds = round_seeds(h, 1, ["t3", "t1"])
    assert {x["target_id"] for x in seeds} == {"t1", "t3"}  # t2 is solved but not asked for
    assert all(x["proof"] == f"proof of {x['target_id']} slot {x['slot']}" for x in seeds)
    assert sum(x["samples"] for x in seeds) == 10


def test_target_setups_prompt_unsolved_or_every_target(tmp_path: Path) -> None:
    h = _round1(tmp_path)  # the default: target_statement_only_unsolved, as before (no new inputs)
    assert read_json(h.paths.round_inputs(1)) == {"round": 1, "unsolved": ["t0"],
                                                 "solve_targets": ["t0", "t1", "t2", "t3"], "solved": 3}
    assert [(p.key, p.samples, p.proof) for p in round_prompts(_task(h, 1))] == [("t0", 1, None)]
    every = _round1(tmp_path / "every", "conjecturer.setup=target_statement", "conjecturer.samples_per_target=2")
    assert [(p.key, p.samples, p.proof) for p in round_prompts(_task(every, 1))] == [
        (t.id, 2, None) for t in TARGETS]
    assert "seeds" not in read_json(every.paths.round_inputs(1))
    t = TARGETS[2]
    assert conjecturer_messages(t.header, t.theorem)[0]["content"].startswith(
        f"Here is a Lean 4 problem statement:\n```lean4\n{t.theorem}\n```\n")
