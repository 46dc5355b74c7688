"""The GRPO family's rollout regime (solver.rollout_prompts): the draw of a round's rollout batch
(selection.rollout_draw), DAPO's dynamic sampling over an over-sampled draw (round/examples.py), the
config's rules, and the two ways of running rollout steps projected by hand (views/rollout_projection.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.validation import semantic_errors
from sgsbatch.errors import ConfigError
from sgsbatch.logic.selection import rollout_draw
from sgsbatch.round.examples import Carry, family_groups, solver_examples, solver_group_metrics
from sgsbatch.round.lifecycle import prepare_round
from sgsbatch.round.results import round_inputs, round_results
from sgsbatch.views.plan import make_plan, plan_text
from sgsbatch.views.projection import project, published
from tests.unit.test_projection import KNOWN
from tests.unit.test_round import TARGETS, A, C, D, _cfg, _round0, _run

IDS = [f"p{i:02d}" for i in range(10)]


def test_a_pass_over_the_targets_is_cut_into_rollout_batches_and_reshuffled_each_pass() -> None:
    draws = [rollout_draw(IDS, r, 3, "7") for r in range(6)]
    assert all(len(d) == 3 == len(set(d)) for d in draws)
    first, second = draws[:3], draws[3:]  # 10 // 3 = 3 batches a pass; one target waits (drop_last)
    assert len({t for d in first for t in d}) == 9 and len({t for d in second for t in d}) == 9
    assert first != second  # a new shuffle each pass
    assert rollout_draw(IDS, 4, 3, "7") == draws[4]  # deterministic: a resumed round draws the same batch
    assert rollout_draw(IDS, 0, 3, "8") != draws[0]  # seeded by run.seed
    assert rollout_draw(list(reversed(IDS)), 2, 3, "7") == draws[2]  # not by the targets' order
    # a batch as large as the targets takes them all every round, in its pass's order
    assert sorted(rollout_draw(IDS, 5, 12, "7")) == IDS and rollout_draw(IDS, 0, 0, "7") == []


def test_prepare_round_writes_the_rounds_rollout_batch_as_the_targets_it_samples(tmp_path: Path) -> None:
    h = _run(tmp_path, "solver.objective=grpo", "solver.rollout_prompts=2", "conjecturer.enabled=false")
    prepare_round(h, 1)
    draws = [round_inputs(h.paths, r)["solve_targets"] for r in (0, 1)]
    ids = sorted(t.id for t in TARGETS)
    assert draws == [rollout_draw(ids, r, 2, str(h.cfg.run.seed)) for r in (0, 1)]
    assert sorted(draws[0] + draws[1]) == ids  # 4 targets, 2 a round: one pass in two rounds


@pytest.mark.parametrize("prompts,groups,short,unused", [(1, ["t2"], 0, 1), (2, ["t2", "t1"], 0, 0),
                                                         (3, ["t2", "t1"], 1, 0)])
def test_dapo_trains_the_first_rollout_prompts_groups_its_dynamic_sampling_keeps_in_draw_order(
        tmp_path: Path, prompts: int, groups: list[str], short: int, unused: int) -> None:
    h = _round0(tmp_path)
    results = round_results(h.cfg, h.paths, 0)  # t0 all fail, t1 1 of 4, t2 2 of 4, t3 all pass
    cfg = _cfg(tmp_path, "solver.objective=dapo", f"solver.rollout_prompts={prompts}", "solver.rollout_oversample=2")
    draw = ["t3", "t2", "t0", "t1"]
    metrics = solver_group_metrics(cfg, results, draw)
    assert metrics["solver/rollout_short"] == short and metrics["solver/rollout_unused"] == unused
    assert metrics["solver/dropped_groups/all_pass"] == 1 and metrics["solver/dropped_groups/all_fail"] == 2
    examples = solver_examples(cfg, h.paths, results, draw=draw)
    conjectures = 3  # the fixture's conjectures kept by DAPO (A, C, D): not part of the targets' rollout batch
    assert metrics["solver/groups"] == len(groups) + conjectures == len({e.group for e in examples})
    assert len(examples) == 4 * (len(groups) + conjectures)


def test_dapo_re_samples_until_its_batch_is_full_carrying_the_kept_groups_and_trains_what_it_has_at_the_cap(
        tmp_path: Path) -> None:
    """DAPO §3.2 as verl's DAPO trainer runs it: a generation batch whose kept groups (with those carried) fall
    short of the batch trains nothing and the next one adds to them; the step trains the first N in order."""
    h = _round0(tmp_path)
    results = round_results(h.cfg, h.paths, 0)  # t0 all fail, t1 1 of 4, t2 2 of 4, t3 all pass; A, C, D kept
    draw = ["t3", "t2", "t0", "t1"]
    sets = ("solver.objective=dapo", "solver.rollout_prompts=3", "solver.rollout_oversample=2")
    cfg = _cfg(tmp_path, *sets, "solver.rollout_max_gen_batches=3")
    first = family_groups(cfg, results, draw, 0)  # 2 targets kept of 3 wanted, generation batch 1 of 3
    assert first.groups == {} and solver_examples(cfg, h.paths, results, draw=draw) == []
    assert first.pending == [(0, "t2"), (0, "t1"), *((0, k) for k in sorted((A, C, D)))]  # in order, conjectures last
    assert first.metrics["solver/rollout_resampled"] == 1 and first.metrics["solver/rollout_kept"] == 2
    assert first.metrics["solver/groups"] == 0 and first.metrics["solver/rollout_gen_batches"] == 1
    carry = Carry(tuple((g, results[g[1]]) for g in first.pending), 1)
    # the next round (the same weights) samples its own batch; here the same results stand for it
    second = family_groups(cfg, results, draw, 1, carry)
    targets = [g for g in second.groups if not g[1].startswith("c")]
    assert targets == [(0, "t2"), (0, "t1"), (1, "t2")]  # the first 3 kept, the carried ones first
    assert second.pending == [] and second.metrics["solver/rollout_resampled"] == 0
    assert second.metrics["solver/rollout_unused"] == 1 and second.metrics["solver/rollout_short"] == 0
    assert second.metrics["solver/rollout_gen_batches"] == 2 and second.metrics["solver/rollout_kept"] == 4
    assert second.metrics["solver/dropped_groups/all_pass"] == 1  # this round's drops only
    conjectures = len(second.groups) - 3
    assert conjectures == 6  # every kept conjecture of both generation batches (not part of the batch)
    examples = solver_examples(cfg, h.paths, results, draw=draw, r=1, carry=carry)
    assert len(examples) == 4 * 9 and len({e.group for e in examples}) == 9
    # at the cap the step trains what it has and counts the shortfall
    capped = _cfg(tmp_path, *sets, "solver.rollout_prompts=5", "solver.rollout_max_gen_batches=2")
    at_cap = family_groups(capped, results, draw, 1, carry)
    assert at_cap.pending == [] and at_cap.metrics["solver/rollout_short"] == 1
    assert [g for g in at_cap.groups if not g[1].startswith("c")] == [(0, "t2"), (0, "t1"), (1, "t2"), (1, "t1")]
    # without re-sampling (the default 1) the first round trains what it kept, as before
    once = family_groups(_cfg(tmp_path, *sets), results, draw, 0)
    assert once.pending == [] and once.metrics["solver/rollout_short"] == 1 and "solver/rollout_resampled" not in once.metrics


def test_the_rollout_keys_refuse_what_cannot_run(tmp_path: Path) -> None:
    def refused(*sets: str) -> str:
        with pytest.raises(ConfigError) as e:
            _cfg(tmp_path, *sets)
        return e.value.key

    assert refused("solver.objective=grpo", "solver.rollout_prompts=4", "solver.rollout_oversample=2") == \
        "solver.rollout_oversample"
    assert refused("solver.objective=dapo", "solver.rollout_oversample=2") == "solver.rollout_oversample"
    assert refused("solver.objective=dapo", "solver.rollout_prompts=4", "solver.rollout_oversample=0.5") == \
        "solver.rollout_oversample"
    assert refused("solver.rollout_prompts=-1") == "solver.rollout_prompts"
    assert refused("solver.objective=grpo", "solver.rollout_prompts=4", "solver.rollout_max_gen_batches=3") == \
        "solver.rollout_max_gen_batches"
    assert refused("solver.objective=dapo", "solver.rollout_prompts=4", "solver.rollout_max_gen_batches=0") == \
        "solver.rollout_max_gen_batches"
    assert refused("solver.objective=ei", "solver.rollout_prompts=4") == "solver.rollout_prompts"
    assert not semantic_errors(_cfg(tmp_path, "solver.objective=dapo", "solver.rollout_prompts=4",
                                    "solver.rollout_oversample=3"))

    # the colocated job (solver.colocated_steps): a Solver alone in rollout steps, whole proofs, one node, its
    # engine over all the job's GPUs
    colo = ("solver.objective=grpo", "solver.rollout_prompts=4", "solver.colocated_steps=2", "conjecturer.enabled=false")
    assert refused("solver.objective=grpo", "solver.colocated_steps=2", "conjecturer.enabled=false") == "solver.colocated_steps"
    assert refused(*colo, "conjecturer.enabled=true") == "solver.colocated_steps"
    assert refused(*colo, "slurm.train.nodes=2") == "solver.colocated_steps"
    assert refused(*colo, "generation.backend=vllm", "slurm.train.gpus=8", "generation.tensor_parallel_size=1") == \
        "generation.tensor_parallel_size"
    assert refused("solver.colocated_steps=-1") == "solver.colocated_steps"
    assert refused(*colo, "generation.sleep_level=3") == "generation.sleep_level"
    assert not semantic_errors(_cfg(tmp_path, *colo, "generation.backend=vllm", "slurm.train.gpus=8",
                                    "generation.tensor_parallel_size=8"))


def test_rollout_steps_on_the_chain_and_in_a_colocated_job_worked_by_hand(tmp_path: Path) -> None:
    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", [
        *KNOWN, f"run.runs_dir={tmp_path}", "conjecturer.enabled=false", "solver.objective=grpo",
        "solver.rollout_prompts=20", "solver.batch_size=40", "projection.weight_update_s=5",
        "train.old_logprobs=sampler", "slurm.train.time_min=600"])
    p = project(cfg, 100, published(cfg))
    assert p.sampled == 20 and p.targets == 100
    solve, verify, train = p.phase("solve"), p.phase("verify"), p.phase("train")
    assert solve is not None and verify is not None and train is not None
    # 20 prompts x 4 samples of 1,000 tokens; two solve tasks of 2 GPUs at 4,000 tokens/s a GPU
    assert (solve.items, solve.task_s, solve.wall_s) == pytest.approx((80, 100 + 40_000 / 8000, 50 + 105))
    assert (verify.items, verify.task_s) == pytest.approx((80, 10 + 40 / 5))  # 2 tasks of 10 cores at 0.5
    # the GRPO family trains every group: 80 sequences of 1,000 tokens on 4 GPUs at 1,000, one role loaded and saved
    assert (train.items, train.task_s) == pytest.approx((80, 100 + 20 + 80_000 / 4000))
    ro = p.rollout
    assert ro is not None and (ro.steps, ro.prompts, ro.drawn, ro.updates) == (4, 20, 20, 2)
    assert ro.chain_step_s == pytest.approx(155 + 68 + 190)
    assert ro.chain_fixed_s == pytest.approx((50 + 100) + (50 + 10) + (50 + 120))  # queue waits + start-ups
    assert ro.chain_gpu_hours == pytest.approx(4 * (2 * 2 * 105 + 4 * 140) / 3600)
    # colocated on the train job's 4 GPUs: generation 80k tokens at 4 x 4,000, verification 80 proofs on
    # 20 cores at 0.5 (not streaming: after it), the trainer's load of the step's weights 100 s (as built: the
    # trainer starts again each step), training 20 s, checkpoint 20 s, weight update 5 s; once a job: its
    # queue wait and the engine's load
    assert ro.colocated_step_s == pytest.approx(80_000 / 16_000 + 80 / 10 + 100 + 20 + 20 + 5)
    assert ro.colocated_startup_s == pytest.approx(50 + 100) and ro.colocated_jobs == 1
    assert ro.colocated_gpu_hours == pytest.approx(4 * (4 * 158 + 150) / 3600)
    text = plan_text(make_plan(cfg, 100))
    assert "20 targets a round (a rollout batch: solver.rollout_prompts) of 100" in text
    assert "rollout steps: 4 (one a round) of 20 prompts" in text
    assert "chain (in use)" in text and "colocated job (solver.colocated_steps = N)" in text
    assert "weight_update_s=5" in text
    colo = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", [
        *KNOWN, f"run.runs_dir={tmp_path}", "conjecturer.enabled=false", "solver.objective=grpo",
        "solver.rollout_prompts=20", "solver.batch_size=40", "projection.weight_update_s=5",
        "train.old_logprobs=sampler", "slurm.train.time_min=600", "solver.colocated_steps=2"])
    two = project(colo, 100, published(colo)).rollout
    assert two is not None and two.colocated_jobs == 2  # 4 steps, 2 a job
    assert two.colocated_gpu_hours == pytest.approx(4 * (4 * 158 + 2 * 150) / 3600)
    text = plan_text(make_plan(colo, 100))
    assert "chain (solver.colocated_steps = 0)" in text and "colocated job (in use: 2 steps a job)" in text


def test_dapos_over_sampled_draw_is_generated_but_only_its_batch_trained(tmp_path: Path) -> None:
    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", [
        *KNOWN, f"run.runs_dir={tmp_path}", "conjecturer.enabled=false", "solver.objective=dapo",
        "solver.rollout_prompts=10", "solver.rollout_oversample=2.5", "solver.batch_size=40"])
    p = project(cfg, 100, published(cfg))
    solve, train = p.phase("solve"), p.phase("train")
    assert p.sampled == 25 and solve is not None and train is not None
    assert solve.items == 100 and train.items == 40  # 25 x 4 generated, the batch's 10 x 4 trained
    assert p.rollout is not None and p.rollout.drawn == 25 and p.rollout.updates == 1
    assert "(25 drawn: DAPO's over-sampling)" in plan_text(make_plan(cfg, 100))
    assert "re-sampling" not in plan_text(make_plan(cfg, 100)) and p.rollout.max_gen_batches == 1
    again = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", [
        *KNOWN, f"run.runs_dir={tmp_path}", "conjecturer.enabled=false", "solver.objective=dapo",
        "solver.rollout_prompts=10", "solver.rollout_oversample=2.5", "solver.batch_size=40",
        "solver.rollout_max_gen_batches=4"])
    assert "a step short of 10 kept groups takes up to 4 generation batches" in plan_text(make_plan(again, 100))
    assert math.isclose(cfg.solver.rollout_draw(), 25)


def test_every_target_every_round_without_a_rollout_batch(tmp_path: Path) -> None:
    cfg = load_config(Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml", [*KNOWN, f"run.runs_dir={tmp_path}"])
    p = project(cfg, 100, published(cfg))
    assert p.rollout is None and p.sampled == 100 and "rollout steps" not in plan_text(make_plan(cfg, 100))


def test_a_smoke_run_of_dapo_re_samples_within_its_rounds(tmp_path: Path) -> None:
    """`launch jobs/dapo.toml --smoke`: 12 targets can never fill a batch of 512, so at verl's 10 generation
    batches a step no round of the 2-round smoke run would train; the smoke run allows 2 (its last round trains
    what it has), unless the key is set."""
    from sgsbatch.config.smoke import smoke_config

    dapo = Path(__file__).resolve().parents[2] / "jobs" / "dapo.toml"
    sim = "verification.backend=simulated"  # no Lean here: said, as a smoke run needs it said
    cfg = load_config(dapo, [f"run.runs_dir={tmp_path}", sim])
    assert cfg.solver.rollout_max_gen_batches == 10  # the recipe's
    assert smoke_config(cfg, dapo, [sim]).solver.rollout_max_gen_batches == 2
    own = load_config(dapo, [f"run.runs_dir={tmp_path}", sim, "solver.rollout_max_gen_batches=3"])
    assert smoke_config(own, dapo, [sim, "solver.rollout_max_gen_batches=3"]).solver.rollout_max_gen_batches == 3


def test_groups_left_pending_are_trained_after_re_sampling_is_turned_off_or_counted_dropped(tmp_path: Path) -> None:
    """A change of method mid-step never loses pending groups silently: with re-sampling turned off the next
    round still carries them (its cap is 1: it trains what it has, carried first); with an objective that trains
    no rollout step they are counted in `solver/rollout_dropped`."""
    from sgsbatch.phases.train import _carry_dropped, carried, rollout_file
    from sgsbatch.run.shards import atomic_write_json

    h = _round0(tmp_path)
    results = round_results(h.cfg, h.paths, 0)
    draw = ["t3", "t2", "t0", "t1"]
    sets = ("solver.objective=dapo", "solver.rollout_prompts=3", "solver.rollout_oversample=2")
    rollout_file(h.paths, 0).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(rollout_file(h.paths, 0), {"gen_batches": 1, "pending": [[0, "t2"], [0, "t1"]]})
    off = _cfg(tmp_path, *sets)  # rollout_max_gen_batches back to 1
    carry = carried(off, h.paths, 1)
    assert [g for g, _ in carry.groups] == [(0, "t2"), (0, "t1")] and carry.gen_batches == 1
    assert _carry_dropped(off, 1, carry) == 0
    step = family_groups(off, results, draw, 1, carry)
    assert [g for g in step.groups if not g[1].startswith("c")] == [(0, "t2"), (0, "t1"), (1, "t2")]
    assert step.pending == []
    reinforce = _cfg(tmp_path, "solver.objective=reinforce")
    assert _carry_dropped(reinforce, 1, carried(reinforce, h.paths, 1)) == 2
    assert _carry_dropped(reinforce, 1, carried(reinforce, h.paths, 2)) == 0  # round 1 left no file
