"""The GRPO family's rewards, advantages and group selection (logic/rewards.py), the step plan's zero-advantage
rule (backends/batches.py) and its config keys, against worked cases written out from the papers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sgsbatch.backends.batches import Example, TrainSettings, loss_scales, plan_steps, rank_shares
from sgsbatch.config.loading import load_config
from sgsbatch.errors import ConfigError
from sgsbatch.logic.rewards import (
    correct_samples,
    dapo_keeps,
    grpo_advantages,
    overlong_shaping,
    policy_rewards,
)
from sgsbatch.phases.train import train_settings

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_grpo_advantages_are_group_normalised_with_the_unbiased_std() -> None:
    # rewards 1, 0, 0: mean 1/3, std = sqrt(((2/3)^2 + 2 (1/3)^2) / (3 - 1)) = sqrt(1/3) (verl's torch.std)
    std = math.sqrt(1 / 3)
    assert grpo_advantages([1.0, 0.0, 0.0]) == pytest.approx([(2 / 3) / (std + 1e-6), -(1 / 3) / (std + 1e-6),
                                                             -(1 / 3) / (std + 1e-6)], rel=1e-12)
    assert grpo_advantages([1.0, 0.0, 0.0]) == pytest.approx([2 / math.sqrt(3), -1 / math.sqrt(3), -1 / math.sqrt(3)],
                                                            rel=1e-5)
    assert grpo_advantages([1.0, 0.0], eps=0.5) == pytest.approx([0.5 / (math.sqrt(0.5) + 0.5), -0.5 / (math.sqrt(0.5) + 0.5)])
    # Dr. GRPO: r - mean, no std
    assert grpo_advantages([1.0, 0.0, 0.0], scale_std=False) == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    # all equal (a group of one too): exactly 0, whatever the rewards' float rounding
    assert grpo_advantages([0.1, 0.1, 0.1]) == [0.0, 0.0, 0.0]
    assert grpo_advantages([1.0], scale_std=False) == [0.0]
    with pytest.raises(ValueError, match="empty"):
        grpo_advantages([])


@pytest.mark.parametrize(("length", "penalty", "expected"), [
    # L_max 100, L_cache 0.2 * 100 = 20: 0 up to 80, then (80 - L) / 20 * penalty, -penalty from 100 on
    (10, 1.0, 0.0), (80, 1.0, 0.0), (81, 1.0, -0.05), (90, 1.0, -0.5), (100, 1.0, -1.0), (130, 1.0, -1.0),
    (90, 0.5, -0.25), (100, 0.5, -0.5),
])
def test_dapo_overlong_shaping_is_piecewise_linear(length: int, penalty: float, expected: float) -> None:
    assert overlong_shaping(length, 100, 0.2, penalty) == pytest.approx(expected)


def test_overlong_shaping_off_and_bad_arguments() -> None:
    assert overlong_shaping(100, 100, 0.0) == 0.0
    with pytest.raises(ValueError, match="buffer_fraction"):
        overlong_shaping(10, 100, 1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        overlong_shaping(10, 0, 0.2)


def test_policy_rewards_add_the_shaping_to_the_correctness_reward() -> None:
    # DAPO §2.4: 1 correct / -1 otherwise; a correct 90-token proof of 100: 1 - 0.5
    assert policy_rewards([True, False, True], [10, 10, 90], incorrect=-1.0, max_tokens=100,
                          overlong_buffer=0.2) == pytest.approx([1.0, -1.0, 0.5])
    # grpo, dr_grpo, gspo: 1 / 0, no length shaping at all (the SGS length penalty is not theirs)
    assert policy_rewards([True, False, True], [10, 10, 99], max_tokens=100) == [1.0, 0.0, 1.0]


def test_correctness_drops_try_proofs_and_dapo_keeps_mixed_groups() -> None:
    assert correct_samples([True, True, False], ["simp", "try simp", "simp"]) == [True, False, False]
    assert correct_samples([True, True], ["simp", "try simp"], zero_try=False) == [True, True]
    # DAPO §3.2: 0 < |correct| < G
    assert dapo_keeps([True, False, False]) and dapo_keeps([False, True])
    assert not dapo_keeps([True, True, True]) and not dapo_keeps([False, False]) and not dapo_keeps([])


def test_zero_advantage_samples_run_nowhere_but_count_in_the_normaliser() -> None:
    """-min(r 0, clip(r) 0) = 0: no rank runs such a sample; DAPO still divides by its tokens."""
    ex = [Example([1], [2] * n, a, group=g, sampler_logprobs=[-1.0] * n)
          for n, a, g in ((3, 0.0, 0), (2, 0.0, 0), (4, 1.0, 1), (1, -1.0, 1))]
    assert plan_steps(ex, TrainSettings(objective="dapo", batch_size=4)) != []
    assert rank_shares(ex, [0, 1, 2, 3], "dapo", 2) == [[2], [3]]
    assert loss_scales(ex, [0, 1, 2, 3], "dapo") == dict.fromkeys(range(4), 0.1)
    assert rank_shares(ex, [0, 1], "grpo", 2) == [[], []]  # every rank runs a dummy micro-batch
    assert rank_shares(ex, [0, 1, 2, 3], "cispo", 1) == [[0, 1, 2, 3]]  # CISPO: unchanged
    # with a KL term (kl_beta > 0) an advantage-0 sample still has a loss and a gradient: it runs
    assert rank_shares(ex, [0, 1], "grpo", 2, kl_beta=0.04) == [[0], [1]]


def test_kl_and_old_logprobs_reach_the_solver_settings(tmp_path: Path) -> None:
    """jobs/grpo.toml: DeepSeekMath's beta = 0.04 with k3, pi_old recomputed; the reference is the run's
    initial Solver (round 0's weights) in every round; the Conjecturer has no KL term. The other family jobs
    recompute pi_old without a KL term; CISPO's keeps the sampler's logprobs (the reference's)."""
    from sgsbatch.phases.task import Task
    from sgsbatch.phases.train import settings_for
    from sgsbatch.round.checkpoints import weights_for
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.shards import Shard

    cfg = load_config(JOBS / "grpo.toml", ["conjecturer.enabled=true"])
    assert (cfg.solver.kl_beta, cfg.solver.kl_estimator, cfg.train.old_logprobs) == (0.04, "k3", "recompute")
    paths = RunPaths(tmp_path)
    for r in (0, 3):
        task = Task(cfg, paths, r, "train", Shard(paths.phase_dir(r, "train"), 0), lambda: False)
        s = settings_for(task, "solver")
        assert (s.kl_beta, s.kl_estimator, s.old_logprobs) == (0.04, "k3", "recompute")
        assert s.kl_reference == weights_for(cfg, paths, "solver", 0)
        assert settings_for(task, "conjecturer").kl_beta == 0.0
    for name in ("drgrpo", "dapo", "gspo"):
        other = load_config(JOBS / f"{name}.toml")
        assert (other.solver.kl_beta, other.train.old_logprobs) == (0.0, "recompute")
    assert load_config(JOBS / "cispo_solver_only.toml").train.old_logprobs == "sampler"


def test_the_warm_up_position_reaches_the_settings_through_prepared_json(tmp_path: Path) -> None:
    """jobs/dapo.toml warms up over 320 optimizer steps; the train job records each role's steps in earlier
    rounds in prepared.json (`prepare`, from the database's train/<role>_steps) and settings_for reads them."""
    import json

    from sgsbatch.phases.task import Task
    from sgsbatch.phases.train import PREPARED, settings_for
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.shards import Shard

    cfg = load_config(JOBS / "dapo.toml")
    assert cfg.solver.lr_warmup_steps == 320
    paths = RunPaths(tmp_path)
    task = Task(cfg, paths, 2, "train", Shard(paths.phase_dir(2, "train"), 0), lambda: False)
    assert (settings_for(task, "solver").warmup_steps, settings_for(task, "solver").steps_before) == (320, 0)
    paths.phase_dir(2, "train").mkdir(parents=True)
    (paths.phase_dir(2, "train") / PREPARED).write_text(json.dumps({"solver": {"examples": 5, "steps_before": 41}}))
    s = settings_for(task, "solver")
    assert (s.warmup_steps, s.steps_before) == (320, 41)
    assert train_settings(cfg, "conjecturer", 2).warmup_steps == 0  # the Conjecturer keeps a constant LR


def test_clip_range_defaults_to_the_published_values() -> None:
    tiny = JOBS / "tiny.toml"
    expected = {"grpo": (0.2, 0.2), "dr_grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "gspo": (3e-4, 4e-4)}
    for objective, clip in expected.items():
        cfg = load_config(tiny, [f"solver.objective={objective}"])
        settings = train_settings(cfg, "solver", 0)
        assert (settings.objective, settings.clip_low, settings.clip_high) == (objective, *clip)
        assert settings.max_tokens == cfg.solver.max_tokens
        assert train_settings(cfg, "conjecturer", 0).objective == "reinforce"
    cfg = load_config(tiny, ["solver.objective=dapo", "solver.clip_high=0.3"])
    assert (train_settings(cfg, "solver", 0).clip_low, train_settings(cfg, "solver", 0).clip_high) == (0.2, 0.3)


@pytest.mark.parametrize(("overrides", "key", "words"), [
    (["solver.objective=grpo", "solver.beta=0.04"], "solver.beta", "renamed solver.kl_beta"),
    (["solver.objective=cispo", "solver.kl_beta=0.04"], "solver.kl_beta", "GRPO family only"),
    (["solver.objective=grpo", "solver.kl_beta=-0.1"], "solver.kl_beta", ">= 0"),
    (["solver.objective=grpo", "solver.kl_estimator=k2"], "solver.kl_estimator", "one of"),
    (["train.old_logprobs=vllm"], "train.old_logprobs", "one of"),
    (["solver.objective=gspo", "solver.samples=1"], "solver.samples", "two samples"),
    (["solver.clip_low=1.0"], "solver.clip_low", "[0, 1)"),
    (["solver.overlong_buffer=1.0"], "solver.overlong_buffer", "[0, 1)"),
    (["solver.objective=ppo"], "solver.objective", "one of"),
])
def test_bad_family_keys_are_refused(overrides: list[str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(JOBS / "tiny.toml", overrides)
    assert key in str(info.value) and words in str(info.value)
