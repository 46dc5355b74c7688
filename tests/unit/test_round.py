"""The round glue (sgsbatch/round/, scheduling/chain.py) on a synthetic run directory.

Round 0's shard files are written by hand (one shard per phase, 4 samples per problem) with
verdicts chosen so that solve rates, bands and rewards can be computed by hand. Covered: reading
a round back (conjecture deduplication and ids, verified counts, rates, samples joined with their
verdicts); trainer examples per objective (reinforce, cispo, ei) and the Conjecturer's examples
(guide on / off, frozen); ingesting and finishing rounds (metrics, the next round's rows and
inputs, idempotence, the run's completion); checkpoint retention and `deleted` marks; ending a
round from its train marker; which weights a role uses. Not covered: the formulas themselves
(test_selection.py, test_rewards.py) and the phases' sampling, verification and training.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.logic.data import Target
from sgsbatch.round.checkpoints import awaiting_evaluation, prune, retained, weights_for
from sgsbatch.round.compaction import token_count
from sgsbatch.round.examples import (
    conjecturer_examples,
    ei_stored_proofs,
    in_band_conjectures,
    solver_examples,
    solver_group_metrics,
)
from sgsbatch.round.lifecycle import (
    current_phase,
    finish_round,
    first_unfinished_round,
    generation_metrics,
    ingest_round,
    prepare_round,
    round_completed,
)
from sgsbatch.round.results import (
    Problem,
    ProblemResult,
    conjecture_id,
    round_conjectures,
    round_results,
    run_targets,
    solve_problems,
    verify_rates,
)
from sgsbatch.run.checkpoint import publish_dir, staging_dir
from sgsbatch.run.handle import RunHandle, create_run
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard, atomic_write_json, read_json
from sgsbatch.run.token_arrays import RecordArrays
from sgsbatch.scheduling.chain import end_round_from_marker
from sgsbatch.state.ingest import is_ingested
from sgsbatch.state.schema import Attempt, Checkpoint, Metric, Phase, Round, Run, RunState
from tests.shardlib import FORMATS, finish_records

REPO = Path(__file__).resolve().parents[2]
TARGETS = [Target(f"t{i}", f"import Mathlib\n-- h{i}\n", f"theorem t{i} : {i} + 0 = {i} := by") for i in range(4)]
HEADERS = [t.header for t in TARGETS]
CA, CB, CC, CD = (f"theorem c{n} : {n} + {n} = {2 * n} := by" for n in (2, 3, 4, 5))
A, B, C, D = (conjecture_id(0, s) for s in (CA, CB, CC, CD))
# round 0's conjecture samples per target (None: malformed); the 2nd of t0 is an exact copy of target t1,
# the 1st of t1 is cA up to whitespace, the 1st of t2 is target t3 up to whitespace
CONJ0: dict[str, list[str | None]] = {"t0": [CA, TARGETS[1].theorem], "t1": [" theorem c2 :  2 + 2\n= 4 := by ", None, CB],
                                      "t2": ["theorem t3 :\t3 + 0 = 3  := by", CC], "t3": [CD]}
# verdict per sample: v verified, L verified and over-long (86 tokens), T verified using `try`, f failed,
# t timeout, u unextracted; rates t0 0, t1 .25, t2 .5, t3 1, A .25, B .25, C .5, D .75
SOLVE0 = {"t0": "ffut", "t1": "vfff", "t2": "vLff", "t3": "vvvv", A: "fvff", B: "Tfff", C: "vTff", D: "vvvf"}
REVIEWS0: dict[str, tuple[int | None, int | None, int | None]] = {A: (4, 0, 1), B: (2, 1, 2), C: (None, None, None)}
VERDICT = {"v": "verified", "L": "verified", "T": "verified", "f": "failed", "t": "timeout", "u": "unextracted"}
TRAIN = {"solver": {"steps": 2, "sequences": 5, "mean_loss": 0.5}}
LONG_WEIGHT = -(86 - 0.8 * 96) / (0.2 * 96)  # tiny: solver.max_tokens 96, length_penalty_start 0.8


def _cfg(tmp: Path, *extra: str) -> Config:
    """The fixture's config; its round 0 was written for whitespace-normalised de-duplication (the
    default, exact equality as the reference, is tested on its own)."""
    return load_config(REPO / "jobs" / "tiny.toml", [
        f"run.runs_dir={tmp}", "run.name=r", "run.executor=local", "run.rounds=3", "shards.conjecture=1",
        "shards.solve=1", "shards.guide=1", "solver.samples=4", "conjecturer.dedup=whitespace", *extra])


def _run(tmp: Path, *extra: str) -> RunHandle:
    h = create_run(_cfg(tmp, *extra), TARGETS, "local")
    prepare_round(h, 0)
    return h


def _write_round(h: RunHandle, r: int, conj: dict[str, list[str | None]], solve: dict[str, str],
                 reviews: dict[str, tuple[int | None, int | None, int | None]], fmt: str = "arrays") -> None:
    """Every shard of round r but train; solve prompt ids are [1000 + position], sample tokens [10 * position + k];
    `fmt`: token arrays in the arrays files (today) or inline (runs written before: tests/shardlib.py)."""
    inline = fmt == "inline"

    def shard(phase: str) -> Shard:
        return Shard(h.paths.phase_dir(r, phase), 0)

    if r == 0:
        shard("init").finish([])
    items = []
    for tid, stmts in conj.items():
        i = int(tid[1:])
        samples = [{"text": f"```lean4\n{s}\n```", "token_ids": [300 + 10 * i + k] * 2, "logprobs": [-0.5] * 2,
                    "finish_reason": "stop", "ok": s is not None, "statement": s,
                    "reason": None if s is not None else "no_statement"} for k, s in enumerate(stmts)]
        items.append({"key": tid, "target_id": tid, "prompt_ids": [200 + i], "samples": samples})
    finish_records(shard("conjecture"), items, inline)
    solved, verified = [], []
    for idx, (pid, spec) in enumerate(solve.items()):
        samples, verdicts = [], []
        for k, c in enumerate(spec):
            n = 86 if c == "L" else 3
            samples.append({"text": "proof", "token_ids": [10 * idx + k] * n, "logprobs": [-0.1 * (k + 1)] * n,
                            "finish_reason": "length" if c == "L" else "stop", "ok": c != "u",
                            "proof": None if c == "u" else ("try simp" if c == "T" else "simp"),
                            "reason": "no_code_block" if c == "u" else None})
            verdicts.append({"verdict": VERDICT[c], "verify_reason": None if c in "vLT" else f"{VERDICT[c]}!",
                             "messages": [], "time_s": 0.5})
        solved.append({"key": pid, "problem_id": pid, "is_target": pid.startswith("t"), "prompt_ids": [1000 + idx],
                       "samples": samples})
        verified.append({"key": pid, "problem_id": pid, "verdicts": verdicts})
    finish_records(shard("solve"), solved, inline)
    shard("verify").finish(verified)
    finish_records(shard("guide"), [{"key": cid, "conjecture_id": cid, "text": "review", "token_ids": [7] * 4,
                            "logprobs": [-1.0] * 4, "finish_reason": "stop", "ok": rel is not None,
                            "reason": None if rel is not None else "missing_relevance", "relevance": rel,
                            "redundant": red, "complexity": cx} for cid, (rel, red, cx) in reviews.items()],
                   inline)


def _round0(tmp: Path, *extra: str, fmt: str = "arrays") -> RunHandle:
    h = _run(tmp, *extra)
    _write_round(h, 0, CONJ0, SOLVE0, REVIEWS0, fmt)
    return h


def _ids(xs: Any) -> list[int]:
    """Token ids as a list, from an arrays-file view or a record's list."""
    return [int(x) for x in xs]


def _metrics(h: RunHandle, r: int) -> dict[str, float]:
    with h.db.read() as s:
        return {m.name: m.value for m in s.exec(select(Metric).where(Metric.round == r)).all()}


def _snapshot(h: RunHandle) -> list[Any]:
    """Every row finishing a round writes."""
    with h.db.read() as s:
        return [sorted((m.round, m.name, m.value) for m in s.exec(select(Metric)).all()),
                sorted((x.index, x.state, x.unsolved, x.generations, x.started_at, x.completed_at)
                       for x in s.exec(select(Round))),
                sorted((p.round, p.kind, p.status, p.wall_s, p.started_at, p.completed_at)
                       for p in s.exec(select(Phase)).all()),
                sorted((c.round, c.role, c.path, c.steps, c.deleted) for c in s.exec(select(Checkpoint)).all())]


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_results_deduplicates_conjectures_and_joins_verdicts(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    problems, rows, funnel = round_conjectures(h.cfg, h.paths, 0, run_targets(h.paths))
    assert [(p.problem_id, p.theorem, p.target_id, p.header, p.is_target) for p in problems] == [
        (A, CA, "t0", HEADERS[0], False), (B, CB, "t1", HEADERS[1], False),
        (C, CC, "t2", HEADERS[2], False), (D, CD, "t3", HEADERS[3], False)]
    assert A.startswith("c0-") and len(A) == 15 and conjecture_id(1, CA) != A
    assert [(x["target_id"], x["sample"], x["status"], x["conjecture_id"]) for x in rows] == [
        ("t0", 0, "ok", A), ("t0", 1, "duplicate", None), ("t1", 0, "duplicate", None), ("t1", 1, "malformed", None),
        ("t1", 2, "ok", B), ("t2", 0, "duplicate", None), ("t2", 1, "ok", C), ("t3", 0, "ok", D)]
    assert (funnel.generated, funnel.well_formed, funnel.unique, funnel.rejected) == (8, 7, 4, {"no_statement": 1})
    res = round_results(h.cfg, h.paths, 0)
    assert list(res) == ["t0", "t1", "t2", "t3", A, B, C, D]
    assert {k: (v.verified, v.rate) for k, v in res.items()} == {
        "t0": (0, 0.0), "t1": (1, 0.25), "t2": (2, 0.5), "t3": (4, 1.0), A: (1, 0.25), B: (1, 0.25), C: (2, 0.5),
        D: (3, 0.75)}
    t0 = res["t0"].samples
    assert [x["verdict"] for x in t0] == ["failed", "failed", "unextracted", "timeout"]
    assert (t0[2]["ok"], t0[2]["reason"], t0[3]["verify_reason"], t0[3]["time_s"]) == (False, "no_code_block",
                                                                                       "timeout!", 0.5)
    t2 = res["t2"].samples[1]
    assert (t2["verdict"], t2["proof"], token_count(t2), t2["finish_reason"]) == ("verified", "simp", 86, "length")
    assert _ids(res["t2"].arrays.token_ids(1)) == [21] * 86
    assert list(res["t2"].arrays.logprobs(1)) == pytest.approx([-0.2] * 86)
    assert _ids(res[A].arrays.prompt_ids) == [1004] and res[A].problem.target_id == "t0" and not res[A].problem.is_target
    assert verify_rates(h.cfg, h.paths, 0) == {k: v.rate for k, v in res.items()}  # the Guide's rates
    # the round's conjecture problems were derived once and kept: later readers need no conjecture shard
    assert (h.paths.round_dir(0) / "conjectures.jsonl").is_file()
    shutil.rmtree(h.paths.phase_dir(0, "conjecture"))
    assert [p.problem_id for p in solve_problems(h.cfg, h.paths, 0)] == ["t0", "t1", "t2", "t3", A, B, C, D]
    assert [p for p in solve_problems(h.cfg, h.paths, 0) if not p.is_target] == problems


@pytest.mark.parametrize("fmt", FORMATS)
def test_reinforce_trains_on_verified_samples_of_the_hard_band(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    ex = solver_examples(h.cfg, h.paths, round_results(h.cfg, h.paths, 0))
    # band 0 < s <= .5: t1, t2, A, B, C; B's only proof and C's 2nd use `try` (dropped: no example);
    # t0 (s=0), t3 (s=1), D (s=.75) give none
    got = {(e.prompt_ids[0], e.completion_ids[0], len(e.completion_ids)): e.weight for e in ex}
    assert len(ex) == len(got) == 5
    assert got == pytest.approx({(1001, 10, 3): 1.0, (1002, 20, 3): 1.0, (1002, 21, 86): LONG_WEIGHT,
                                 (1004, 41, 3): 1.0, (1006, 60, 3): 1.0})
    assert pytest.approx(-0.4791667) == LONG_WEIGHT
    assert all(e.group is None and e.sampler_logprobs is None for e in ex)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cispo_trains_on_whole_groups_with_advantages(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    ex = solver_examples(_cfg(tmp_path, "solver.objective=cispo"), h.paths, round_results(h.cfg, h.paths, 0))
    # band 0 < s < 1: t1, t2, A, B, C, D; B's rewards are all 0 (its proof uses `try`): group dropped
    keys = sorted(["t1", "t2", A, C, D])
    prompt = {pid: 1000 + i for i, pid in enumerate(SOLVE0)}
    assert len(ex) == 20
    for gid, key in enumerate(keys):
        group = [e for e in ex if e.group == gid]
        assert [_ids(e.prompt_ids) for e in group] == [[prompt[key]]] * 4
        assert [e.completion_ids[0] % 10 for e in group] == [0, 1, 2, 3]
        for k, e in enumerate(group):  # float32 in the arrays file
            assert e.sampler_logprobs is not None
            assert list(e.sampler_logprobs) == pytest.approx([-0.1 * (k + 1)] * len(e.completion_ids), rel=1e-6)
        assert sum(e.weight for e in group) == pytest.approx(0.0, abs=1e-6)
    r3 = math.sqrt(3)
    assert [e.weight for e in ex if e.group == keys.index("t1")] == pytest.approx([r3, -1 / r3, -1 / r3, -1 / r3], rel=1e-4)
    assert [e.weight for e in ex if e.group == keys.index(D)] == pytest.approx([1 / r3, 1 / r3, 1 / r3, -r3], rel=1e-4)


@pytest.mark.parametrize("fmt", FORMATS)
def test_grpo_family_trains_on_every_group_and_dapo_drops_the_uniform_ones(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    results = round_results(h.cfg, h.paths, 0)
    # correctness (verified, no `try`): t0 0000, t1 1000, t2 1100 (its 86-token proof too: no SGS length
    # penalty), t3 1111, A 0100, B 0000 (`try`), C 1000, D 1110; GRPO A = (r - mean) / (unbiased std + 1e-6):
    # 1000 -> mean .25, std .5: 1.5, -.5, -.5, -.5; 1100 -> +-.5 / sqrt(1/3); uniform groups -> 0
    keys = sorted(SOLVE0)
    grpo_cfg = _cfg(tmp_path, "solver.objective=grpo")
    grpo = solver_examples(grpo_cfg, h.paths, results)
    assert len(grpo) == 32
    adv = {key: [e.weight for e in grpo if e.group == gid] for gid, key in enumerate(keys)}
    assert adv["t1"] == adv[C] == pytest.approx([1.5, -0.5, -0.5, -0.5], rel=1e-5)
    assert adv["t2"] == pytest.approx([0.5 / math.sqrt(1 / 3)] * 2 + [-0.5 / math.sqrt(1 / 3)] * 2, rel=1e-5)
    assert adv["t0"] == adv["t3"] == adv[B] == [0.0] * 4
    assert all(e.sampler_logprobs is not None and len(e.sampler_logprobs) == len(e.completion_ids) for e in grpo)
    assert solver_group_metrics(grpo_cfg, results) == {"solver/groups": 8, "solver/zero_std_groups": 3}
    # Dr. GRPO: r - mean
    drgrpo = solver_examples(_cfg(tmp_path, "solver.objective=dr_grpo"), h.paths, results)
    assert [e.weight for e in drgrpo if e.group == keys.index(D)] == pytest.approx([0.25, 0.25, 0.25, -0.75])
    # DAPO: t0, B (all fail) and t3 (all pass) dropped; rewards +-1 plus the overlong shaping: t2's 86-token
    # proof of max_tokens 96 past (1 - 0.2) * 96 gets (76.8 - 86) / 19.2 = LONG_WEIGHT
    dapo_cfg = _cfg(tmp_path, "solver.objective=dapo")
    dapo = solver_examples(dapo_cfg, h.paths, results)
    kept = sorted(["t1", "t2", A, C, D])
    assert len(dapo) == 20 and {e.group for e in dapo} == set(range(5))
    r = [1.0, 1.0 + LONG_WEIGHT, -1.0, -1.0]
    mean = sum(r) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / 3)
    assert [e.weight for e in dapo if e.group == kept.index("t2")] == pytest.approx([(x - mean) / std for x in r],
                                                                                    rel=1e-5)
    assert solver_group_metrics(dapo_cfg, results) == {
        "solver/groups": 5, "solver/zero_std_groups": 0, "solver/dropped_groups/all_pass": 1,
        "solver/dropped_groups/all_fail": 2, "solver/overlong_shaped": 1}
    assert solver_group_metrics(h.cfg, results) == {}  # reinforce
    # DAPO's Overlong Filtering (solver.overlong_filter): t2's truncated sample (finish "length") leaves the loss,
    # its reward still in t2's advantages; every other example as without the filter
    filt_cfg = _cfg(tmp_path, "solver.objective=dapo", "solver.overlong_filter=true")
    filtered = solver_examples(filt_cfg, h.paths, results)
    t2 = kept.index("t2")
    assert len(filtered) == 19 and [e.weight for e in filtered if e.group == t2] == pytest.approx(
        [e.weight for e in dapo if e.group == t2][:1] + [e.weight for e in dapo if e.group == t2][2:], rel=1e-6)
    assert all(len(e.completion_ids) != 86 for e in filtered)
    assert solver_group_metrics(filt_cfg, results)["solver/overlong_filtered"] == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_expert_iteration_reads_stored_proofs_back_from_the_solve_shard(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    assert ingest_round(h, 0)
    stored = ei_stored_proofs(h, 0)
    assert sorted(stored) == [(0, "t1", 0), (0, "t2", 0), (0, "t2", 1), (0, "t3", 0), (0, "t3", 1), (0, "t3", 2),
                              (0, "t3", 3)]  # targets only; conjectures' proofs are not stored
    assert ei_stored_proofs(h, 3) == []  # ei_rounds = 3: rounds 1..3 only
    cfg = _cfg(tmp_path, "solver.objective=ei", "conjecturer.enabled=false")
    # weighted as REINFORCE-1/2 (the reference's EI goes through the same loop, step2_train.py:507-565):
    # t2's over-long proof gets the length penalty; a proof using `try` (B's sample 0) is dropped
    ex = solver_examples(cfg, h.paths, {}, [(0, "t2", 1), (0, "t1", 0), (0, B, 0)])
    assert [(_ids(e.prompt_ids), _ids(e.completion_ids)) for e in ex] == [([1001], [10] * 3), ([1002], [21] * 86)]
    assert [e.weight for e in ex] == pytest.approx([1.0, LONG_WEIGHT])


def test_try_comments_decide_which_proofs_use_try(tmp_path: Path) -> None:
    """`solver.try_comments`: the reference's stripping (the default) leaves ` try simp -/` of a nested block
    comment as code (the proof is dropped); "lean" reads the whole comment as one (weight 1)."""
    proof = "\n  /- first /- a note -/ try simp -/\n  linarith"
    samples = [{"verdict": v, "proof": proof, "token_ids": [7] * 3, "logprobs": [-0.1] * 3, "finish_reason": "stop"}
               for v in ("verified", "failed")]
    arrays = RecordArrays({"key": "p", "prompt_ids": [9], "samples": samples}, None)  # inline: a run written before
    results = {"p": ProblemResult(Problem("p", "", "theorem p : True := by", True, "p"), arrays, samples, 1, 0.5)}
    assert solver_examples(_cfg(tmp_path), RunPaths(tmp_path), results) == []
    lean = solver_examples(_cfg(tmp_path, "solver.try_comments=lean"), RunPaths(tmp_path), results)
    assert [(e.completion_ids, e.weight) for e in lean] == [([7] * 3, 1.0)]
    cispo = [e.weight for e in solver_examples(_cfg(tmp_path, "solver.objective=cispo"), RunPaths(tmp_path), results)]
    assert cispo == []  # rewards 0 (the `try` proof zeroed) and 0 (failed): the group is dropped
    cispo_lean = _cfg(tmp_path, "solver.objective=cispo", "solver.try_comments=lean")
    assert [e.weight for e in solver_examples(cispo_lean, RunPaths(tmp_path), results)] == pytest.approx([1.0, -1.0], rel=1e-4)


@pytest.mark.parametrize("fmt", FORMATS)
def test_conjecturer_examples_reward_in_band_conjectures(tmp_path: Path, fmt: str) -> None:
    h = _round0(tmp_path, fmt=fmt)
    res = round_results(h.cfg, h.paths, 0)
    # conjecture rates .25, .25, .5, .75: threshold sorted[int(.7 * 4)] = .5, so A, B, C
    assert in_band_conjectures(h.cfg, res) == {A, B, C}
    # guide scores A 4+1+1 = 6, B 2+0+0 = 2, C failed: the mean 4; R = 4.5, 1.5, 2 -> 1, 0, 1/6
    ex, rewards = conjecturer_examples(h.cfg, h.paths, 0, res)
    assert rewards == pytest.approx({A: 1.0, B: 0.0, C: 1 / 6})
    # B's weight-0 example is kept: its tokens count in the trainer's normaliser, as the reference's
    # ("for conjecture, weight in zip(conjectures, normalized_rewards): ... train_data.append", step2_train.py:277-323)
    assert {(tuple(_ids(e.prompt_ids)), tuple(_ids(e.completion_ids))): e.weight for e in ex} == pytest.approx(
        {((200,), (300, 300)): 1.0, ((201,), (312, 312)): 0.0, ((202,), (321, 321)): 1 / 6})
    # no guide: R = 1 - s = .75, .75, .5 -> 1, 1, 0
    ex, rewards = conjecturer_examples(_cfg(tmp_path, "guide.enabled=false"), h.paths, 0, res)
    assert rewards == pytest.approx({A: 1.0, B: 1.0, C: 0.0})
    assert sorted((_ids(e.prompt_ids), _ids(e.completion_ids), e.weight) for e in ex) == [([200], [300, 300], 1.0),
                                                                              ([201], [312, 312], 1.0),
                                                                              ([202], [321, 321], 0.0)]
    assert conjecturer_examples(_cfg(tmp_path, "conjecturer.train=false"), h.paths, 0, res) == ([], {})


def test_exact_dedup_is_the_default(tmp_path: Path) -> None:
    """`conjecturer.dedup = "exact"` (the default): only exact copies are duplicates, as the reference
    ("if conjecture.conjecture not in conjecture_str_set", step1_data_gen.py:449)."""
    h = _round0(tmp_path)
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=r", "shards.conjecture=1"])
    assert cfg.conjecturer.dedup == "exact"
    problems, rows, funnel = round_conjectures(cfg, h.paths, 0, run_targets(h.paths))
    # t0's 2nd (an exact copy of target t1) is still a duplicate; t1's 1st (cA up to whitespace) and
    # t2's 1st (target t3 up to whitespace) are new conjectures
    assert [(x["target_id"], x["sample"], x["status"]) for x in rows] == [
        ("t0", 0, "ok"), ("t0", 1, "duplicate"), ("t1", 0, "ok"), ("t1", 1, "malformed"), ("t1", 2, "ok"),
        ("t2", 0, "ok"), ("t2", 1, "ok"), ("t3", 0, "ok")]
    assert funnel.unique == len(problems) == 6
    assert conjecture_id(0, " theorem c2 :  2 + 2\n= 4 := by ") in {p.problem_id for p in problems}


def test_conjecturer_rewards_when_every_review_failed(tmp_path: Path) -> None:
    """Every review failed: the fill is 0.0 (the reference's "average_review = 0.0",
    llm_judge_guide.py:105-106), so every reward is 0 and normalises to 1 (step2_train.py:220-221)."""
    h = _run(tmp_path)
    _write_round(h, 0, CONJ0, SOLVE0, {A: (None, None, None), B: (None, None, None), C: (None, None, None)})
    res = round_results(h.cfg, h.paths, 0)
    ex, rewards = conjecturer_examples(h.cfg, h.paths, 0, res)
    assert rewards == {A: 1.0, B: 1.0, C: 1.0}
    assert sorted(e.weight for e in ex) == [1.0, 1.0, 1.0]


def test_finish_round_records_metrics_prepares_next_round_and_is_idempotent(tmp_path: Path) -> None:
    h = _round0(tmp_path)
    assert ingest_round(h, 0) and not ingest_round(h, 0)
    train = {**TRAIN, "conjecturer": {"steps": 1, "sequences": 2, "mean_loss": 0.25, "reward_mean": 0.4}}
    finish_round(h, 0, train)
    m = _metrics(h, 0)
    # generations: 8 conjectures + 32 Solver samples; the 3 Guide reviews are not generations (SGS-SPEC)
    expected = {"cumulative_solve_rate": 0.75, "solved_targets": 3, "generations/round": 8 + 32,
                "generations/total": 40, "guide/reviews": 3, "solver/try_proofs": 2, "solver/length_penalised": 1, "train/solver_steps": 2, "train/solver_sequences": 5,
                "train/solver_loss": 0.5, "train/conjecturer_steps": 1, "conjecturer/reward_mean": 0.4,
                "pass@8": 0.75, "store/new_proofs": 7, "conjectures/in_band": 3, "conjectures/unique": 4}
    assert {k: m[k] for k in expected} == expected
    assert round_completed(h, 0) and not round_completed(h, 1)
    with h.db.read() as s:
        r1 = s.exec(select(Round).where(Round.index == 1)).one()
        assert (r1.state, r1.unsolved) == ("pending", 1)
        assert s.exec(select(Round).where(Round.index == 0)).one().generations == 40
        assert sorted(p.kind for p in s.exec(select(Phase).where(Phase.round == 1))) == sorted(
            ["conjecture", "solve", "verify", "guide", "train"])
        assert {p.status for p in s.exec(select(Phase).where(Phase.round == 0))} == {"completed"}
        assert sorted((c.round, c.role, c.path) for c in s.exec(select(Checkpoint))) == [
            (0, "conjecturer", str(h.paths.checkpoint(0, "conjecturer"))),
            (0, "solver", str(h.paths.checkpoint(0, "solver")))]
    inputs = read_json(h.paths.round_inputs(1))
    assert inputs == {"round": 1, "unsolved": ["t0"], "solve_targets": ["t0", "t1", "t2", "t3"], "solved": 3}
    assert list(h.paths.tb.glob("events.out.tfevents.*"))
    before = _snapshot(h)
    finish_round(h, 0, train)  # ending it again (a retried train job) changes nothing, completion time included
    assert _snapshot(h) == before and read_json(h.paths.round_inputs(1)) == inputs
    # round 1 solves t0 and has one malformed conjecture: 1 + 16 generations, cumulative 4/4
    _write_round(h, 1, {"t0": [None]}, {"t0": "vfff", "t1": "ffff", "t2": "ffff", "t3": "ffff"}, {})
    assert ingest_round(h, 1)
    finish_round(h, 1, TRAIN)
    m = _metrics(h, 1)
    assert (m["generations/round"], m["generations/total"], m["cumulative_solve_rate"], m["solved_targets"]) == (
        17, 57, 1.0, 4)
    assert "train/conjecturer_steps" not in m
    assert read_json(h.paths.round_inputs(2))["unsolved"] == []
    # the last round completes the run and prepares nothing more
    _write_round(h, 2, {}, {"t0": "ffff", "t1": "ffff", "t2": "ffff", "t3": "ffff"}, {})
    assert ingest_round(h, 2)
    finish_round(h, 2, TRAIN)
    assert h.row().state == RunState.completed and _metrics(h, 2)["generations/total"] == 73
    assert not h.paths.round_inputs(3).exists() and first_unfinished_round(h) == 2
    with h.db.read() as s:
        assert s.exec(select(Round).where(Round.index == 3)).first() is None


def test_retention_keeps_last_rounds_and_every_nth(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "checkpoints.keep_last=2", "checkpoints.keep_every=3")
    assert [r for r in range(8) if retained(cfg, r, 6)] == [2, 5, 6, 7]
    assert [r for r in range(7) if retained(_cfg(tmp_path, "checkpoints.keep_every=0"), r, 6)] == [5, 6]
    paths = RunPaths(tmp_path / "p")
    assert prune(cfg, paths, 6) == []  # no checkpoints directory yet
    for name in ["init", *(f"r{r:04d}" for r in range(8))]:
        for role in ("solver", "conjecturer"):
            (paths.checkpoints_dir() / name / role).mkdir(parents=True)
    root = paths.checkpoints_dir()
    assert prune(cfg, paths, 6) == [root / "r0000", root / "r0001", root / "r0003", root / "r0004"]
    assert sorted(p.name for p in root.iterdir()) == ["init", "r0002", "r0005", "r0006", "r0007"]
    assert prune(cfg, paths, 6) == []


def test_retention_keeps_weights_an_evaluation_job_still_needs(tmp_path: Path) -> None:
    """Round 1's evaluation job has one of its two sets done, round 3's (one set, `--set b`) is done, round
    0's record is unreadable: rounds 0 and 1 are kept, 3 is pruned; once round 1's sets are done it goes."""
    import json

    cfg = _cfg(tmp_path, "checkpoints.keep_last=1", "eval.sets={a = 'x.jsonl', b = 'y.jsonl'}")
    paths = RunPaths(tmp_path / "p")
    for r in range(5):
        (paths.checkpoints_dir() / f"r{r:04d}" / "solver").mkdir(parents=True)
    for r, only in ((1, None), (3, "b")):
        paths.eval_round_dir(r).mkdir(parents=True)
        paths.eval_job(r).write_text(json.dumps({"job_id": "7", "round": r, "set": only}))
    paths.eval_round_dir(0).mkdir(parents=True)
    paths.eval_job(0).write_text("{not json")
    for r, name in ((1, "a"), (3, "b")):
        paths.eval_done(r, name).parent.mkdir(parents=True)
        paths.eval_done(r, name).write_text("1\n")
    assert [awaiting_evaluation(cfg, paths, r) for r in range(5)] == [True, True, False, False, False]
    root = paths.checkpoints_dir()
    assert prune(cfg, paths, 4) == [root / "r0002", root / "r0003"]
    paths.eval_done(1, "b").parent.mkdir(parents=True)
    paths.eval_done(1, "b").write_text("1\n")
    assert prune(cfg, paths, 4) == [root / "r0001"]


def test_finish_round_marks_pruned_checkpoints_deleted(tmp_path: Path) -> None:
    h = _run(tmp_path, "checkpoints.keep_last=1", "checkpoints.keep_every=0")
    for r in (0, 1):
        ck = h.paths.checkpoint(r, "solver")
        publish_dir(staging_dir(ck), ck, {"round": r})
        finish_round(h, r, TRAIN)
    assert not h.paths.checkpoint(0, "solver").exists() and h.paths.checkpoint(1, "solver").exists()
    with h.db.read() as s:
        assert sorted((c.round, c.deleted) for c in s.exec(select(Checkpoint))) == [(0, True), (1, False)]


def test_end_round_from_marker_ingests_and_completes_the_round(tmp_path: Path) -> None:
    h = _run(tmp_path)
    assert (current_phase(h.cfg, h.paths, 0), first_unfinished_round(h)) == ("init", 0)
    _write_round(h, 0, CONJ0, SOLVE0, REVIEWS0)
    marker = Shard(h.paths.phase_dir(0, "verify"), 0).marker
    marker.rename(marker.with_suffix(".off"))
    assert current_phase(h.cfg, h.paths, 0) == "verify"
    marker.with_suffix(".off").rename(marker)
    assert current_phase(h.cfg, h.paths, 0) == "train"
    assert end_round_from_marker(h, 0) is False  # the train job has not finished
    with h.db.read() as s:
        assert s.exec(select(Attempt)).first() is None and s.exec(select(Round).where(Round.index == 1)).first() is None
    assert not is_ingested(h.db, h.run_id, 0) and not round_completed(h, 0)
    assert not h.paths.round_inputs(1).exists() and first_unfinished_round(h) == 0
    train = Shard(h.paths.phase_dir(0, "train"), 0)
    train.mark_started()
    train.finish([{"key": "solver", "role": "solver", "steps": 2, "sequences": 5, "mean_loss": 0.5,
                   "target_tokens": 10}])
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    atomic_write_json(solve.started_file, {"time": 1000.0})  # the round's first task started then
    assert end_round_from_marker(h, 0) is True
    with h.db.read() as s:  # the real start and end times, from the shard files
        rnd = s.exec(select(Round).where(Round.index == 0)).one()
        phases = {p.kind: (p.started_at, p.completed_at) for p in s.exec(select(Phase).where(Phase.round == 0))}
    assert rnd.started_at == 1000.0 and rnd.completed_at == train.meta()["time"]
    assert phases["solve"] == (1000.0, solve.meta()["time"])
    assert phases["train"] == (train.started(), train.meta()["time"])
    assert phases["verify"] == (0.0, 0.0)  # never marked started: unknown
    assert _metrics(h, 0)["wall_s/round"] == pytest.approx(train.meta()["time"] - 1000.0)
    with h.db.read() as s:
        attempts = {(a.problem_id, a.sample): a for a in s.exec(select(Attempt)).all()}
        completed_at = s.exec(select(Round).where(Round.index == 0)).one().completed_at
    assert len(attempts) == 32
    a = attempts[("t2", 1)]
    assert (a.verdict, a.proof, a.tokens, a.finish_reason, a.is_target) == ("verified", "simp", 86, "length", True)
    a = attempts[("t0", 2)]
    assert (a.extracted, a.extract_reason, a.verdict, a.proof) == (False, "no_code_block", "unextracted", None)
    assert attempts[("t0", 0)].proof is None  # proof text is kept for verified samples only
    assert round_completed(h, 0) and first_unfinished_round(h) == 1 and completed_at == train.meta()["time"]
    m = _metrics(h, 0)
    assert (m["train/solver_steps"], m["train/solver_sequences"], m["cumulative_solve_rate"]) == (2, 5, 0.75)
    assert m["wall_s/train"] == pytest.approx(train.meta()["time"] - (train.started() or 0.0))
    assert (current_phase(h.cfg, h.paths, 0), current_phase(h.cfg, h.paths, 1)) == ("train", "conjecture")
    before = _snapshot(h)
    assert end_round_from_marker(h, 0) is True and _snapshot(h) == before


def test_weights_for_base_previous_round_or_error(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    paths = RunPaths(tmp_path / "w")
    for role in ("solver", "conjecturer", "guide"):
        assert weights_for(cfg, paths, role, 0) == str(paths.checkpoint(None, role))
    ck = paths.checkpoint(0, "solver")
    with pytest.raises(FileNotFoundError, match=re.escape(str(ck))):
        weights_for(cfg, paths, "solver", 1)
    ck.mkdir(parents=True)
    (ck / "model.safetensors").write_text("half written")
    with pytest.raises(FileNotFoundError, match="round 0"):  # no completion marker: not a checkpoint
        weights_for(cfg, paths, "solver", 1)
    shutil.rmtree(ck)
    tmp = staging_dir(ck)
    (tmp / "model.safetensors").write_text("weights")
    assert publish_dir(tmp, ck, {"round": 0})
    assert weights_for(cfg, paths, "solver", 1) == str(ck)
    with pytest.raises(FileNotFoundError, match=re.escape(str(paths.checkpoint(1, "solver")))):
        weights_for(cfg, paths, "solver", 2)  # never falls back to older weights
    with pytest.raises(FileNotFoundError, match="conjecturer weights after round 0"):
        weights_for(cfg, paths, "conjecturer", 1)
    assert weights_for(cfg, paths, "guide", 2) == str(paths.checkpoint(None, "guide"))
    frozen = _cfg(tmp_path, "conjecturer.train=false", "models.guide=org/guide-7b")
    assert weights_for(frozen, paths, "conjecturer", 2) == str(paths.checkpoint(None, "conjecturer"))
    assert weights_for(frozen, paths, "guide", 5) == "org/guide-7b"
    assert weights_for(_cfg(tmp_path, "solver.train=false"), paths, "solver", 3) == str(paths.checkpoint(None, "solver"))


def test_run_row_counts_targets(tmp_path: Path) -> None:
    h = _run(tmp_path)
    with h.db.read() as s:
        run = s.exec(select(Run)).one()
    assert (run.targets, run.executor) == (4, "local")
    assert read_json(h.paths.round_inputs(0)) == {"round": 0, "unsolved": ["t0", "t1", "t2", "t3"],
                                                  "solve_targets": ["t0", "t1", "t2", "t3"], "solved": 0}


def test_entropy_and_clip_metrics_come_from_the_engines_and_the_trainer(tmp_path: Path) -> None:
    """entropy/sampled/<role>: - sum of recorded logprobs / generated tokens over a phase's tasks;
    entropy/train/<role> and the CISPO clip fraction: the train results' own statistics."""
    g = _run(tmp_path / "g", "shards.solve=2")
    for i, (tokens, nll) in enumerate(((100, 150.0), (300, 250.0))):
        Shard(g.paths.phase_dir(0, "solve"), i).finish([], {"generated_tokens": tokens, "generate_s": 1.0,
                                                             "sequences": 1, "startup_s": 0.0,
                                                             "neg_logprob_sum": nll})
    assert generation_metrics(g.cfg, g.paths, 0)["entropy/sampled/solver"] == pytest.approx(400.0 / 400)
    h = _round0(tmp_path)
    assert ingest_round(h, 0)
    finish_round(h, 0, {"solver": {"steps": 2, "sequences": 5, "mean_loss": 0.5, "tokens": 40, "entropy": 2.5,
                                   "clip_fraction": 0.125, "objective": "cispo"},
                        "conjecturer": {"steps": 1, "sequences": 2, "mean_loss": 0.1, "tokens": 9, "entropy": 3.0,
                                        "clip_fraction": 0.0, "objective": "reinforce"}})
    got = _metrics(h, 0)
    assert (got["entropy/train/solver"], got["entropy/train/conjecturer"]) == (2.5, 3.0)
    assert got["train/solver_clip_fraction"] == 0.125


def test_grpo_family_metrics_come_from_the_trainer_and_the_examples(tmp_path: Path) -> None:
    """Clip fractions per side, sampler KL, sequence-ratio statistics (the train result) and the group
    counts `prepare` stored with the solver's examples ("metrics")."""
    h = _round0(tmp_path)
    assert ingest_round(h, 0)
    stats = {"clip_fraction": 0.3, "clip_low_fraction": 0.1, "clip_high_fraction": 0.2, "sampler_kl": 0.01,
             "seq_ratio_mean": 1.02, "seq_ratio_std": 0.05}
    finish_round(h, 0, {"solver": {"steps": 2, "sequences": 5, "mean_loss": 0.5, "tokens": 40, "entropy": 2.5,
                                   "objective": "dapo", **stats,
                                   "metrics": {"solver/groups": 5.0, "solver/dropped_groups/all_pass": 1.0}}})
    got = _metrics(h, 0)
    assert {k: got[k] for k in got if k.startswith(("train/solver_c", "train/solver_s"))} == {
        "train/solver_clip_fraction": 0.3, "train/solver_clip_fraction_low": 0.1,
        "train/solver_clip_fraction_high": 0.2, "train/solver_sampler_kl": 0.01,
        "train/solver_seq_ratio_mean": 1.02, "train/solver_seq_ratio_std": 0.05, "train/solver_sequences": 5.0,
        "train/solver_steps": 2.0}
    assert (got["solver/groups"], got["solver/dropped_groups/all_pass"]) == (5.0, 1.0)
