"""train.optimizer = "carry": a role's AdamW state crosses rounds (backends/optimizer_state.py).

Two rounds trained with the carried state end with weights bitwise identical to one uninterrupted
training over both rounds' optimizer steps (the LR warm-up spanning them), also when the second round is
stopped mid-way and resumed (the stop/resume checkpoint wins over the carried state); a fresh AdamW in
the second round gives other weights. Covered on CPU, one rank: fp32 and bf16 with ZeRO-2, fp32 with ZeRO-0
through the train phase (2 CPU ranks: tests/models/test_train_ranks.py); not covered: GPUs (NCCL, CUDA
kernels: only a GPU run can confirm those), a state loaded by another number of ranks than saved it.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from sgsbatch.backends.optimizer_state import state_matches
from sgsbatch.backends.trainer import Example, TrainingInterrupted, TrainSettings, plan_steps, train
from sgsbatch.run.checkpoint import is_complete, read_marker


def _digest(d: Path) -> str:
    return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()


def _round(seed: int, first_group: int) -> list[Example]:
    """2 groups of 2 (advantages +-1, +-0.5) with sampler logprobs that put the ratios off 1."""
    rng = random.Random(seed)
    out = []
    for i in range(4):
        completion = [rng.randrange(10, 400) for _ in range(rng.randrange(2, 6))] + [1]
        out.append(Example([0, 4, *[rng.randrange(10, 400) for _ in range(3)], 5, 77], completion,
                           [1.0, -1.0, 0.5, -0.5][i], group=first_group + i // 2,
                           sampler_logprobs=[-6.0 + 0.2 * (t % 3) for t in range(len(completion))]))
    return out


def _settings(seed: int, steps_before: int = 0) -> TrainSettings:
    # the warm-up spans both rounds (3 of the 4 steps): the second round's LR follows from steps_before
    return TrainSettings(lr=1e-3, batch_size=2, objective="grpo", threads=1, seed=seed, warmup_steps=3,
                         steps_before=steps_before)


def _joint_seed(a: list[Example], b: list[Example], seed_a: int, seed_b: int) -> int:
    """A seed under which one call over a + b takes round a's steps, then round b's, in each round's order."""
    want = plan_steps(a, _settings(seed_a)) + [[len(a) + i for i in s] for s in plan_steps(b, _settings(seed_b))]
    for seed in range(10_000):
        if plan_steps(a + b, _settings(seed)) == want:
            return seed
    raise AssertionError("no seed orders the joint run as the two rounds")


@pytest.fixture(scope="module")
def rounds(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Example], list[Example]]:
    """Round 0 trained from the tiny model with its optimizer state published (2 optimizer steps)."""
    tmp = tmp_path_factory.mktemp("carry")
    a = _round(1, 0)
    res = train(tiny_dir, tmp / "r0", a, _settings(11), state_dir=tmp / "s0",
                optimizer_out=tmp / "opt" / "r0000")
    assert res.steps == 2
    return tmp, a, _round(2, 10)


def test_two_carried_rounds_are_one_uninterrupted_run(tiny_dir: Path, rounds: tuple[Path, list[Example],
                                                      list[Example]]) -> None:
    tmp, a, b = rounds
    state0 = tmp / "opt" / "r0000"
    assert is_complete(state0) and read_marker(state0)["weights"] == str((tmp / "r0").resolve())
    assert read_marker(state0)["steps"] == 2
    joint = train(tiny_dir, tmp / "joint", a + b, _settings(_joint_seed(a, b, 11, 12)), state_dir=tmp / "sj")
    assert joint.steps == 4
    carried = train(tmp / "r0", tmp / "r1", b, _settings(12, steps_before=2), state_dir=tmp / "s1",
                    optimizer_in=state0, optimizer_out=tmp / "opt" / "r0001")
    fresh = train(tmp / "r0", tmp / "r1-fresh", b, _settings(12, steps_before=2), state_dir=tmp / "s1f")
    assert carried.steps == fresh.steps == 2
    assert _digest(tmp / "r1") == _digest(tmp / "joint")  # bitwise: moments, step counts, master carried
    assert _digest(tmp / "r1-fresh") != _digest(tmp / "joint")  # Adam's first step again: another algorithm
    assert is_complete(tmp / "opt" / "r0001") and read_marker(tmp / "opt" / "r0001")["steps"] == 2


def test_a_round_stopped_mid_way_resumes_from_its_checkpoint_not_the_carried_state(
        tiny_dir: Path, rounds: tuple[Path, list[Example], list[Example]]) -> None:
    tmp, a, b = rounds
    joint = tmp / "joint2"
    train(tiny_dir, joint, a + b, _settings(_joint_seed(a, b, 11, 12)), state_dir=tmp / "sj2")
    kwargs = {"state_dir": tmp / "s1r", "optimizer_in": tmp / "opt" / "r0000", "optimizer_out": tmp / "opt-r" / "r1"}
    with pytest.raises(TrainingInterrupted, match="step 1/2"):
        train(tmp / "r0", tmp / "r1-resumed", b, _settings(12, steps_before=2), should_stop=lambda: True, **kwargs)
    assert not is_complete(tmp / "opt-r" / "r1")  # nothing published by a stopped round
    train(tmp / "r0", tmp / "r1-resumed", b, _settings(12, steps_before=2), **kwargs)
    assert _digest(tmp / "r1-resumed") == _digest(joint)
    assert is_complete(tmp / "opt-r" / "r1")


def test_a_state_belongs_to_its_weights_and_to_weights_carried_from_them(
        rounds: tuple[Path, list[Example], list[Example]]) -> None:
    """A round with nothing to train carries the weights: the older state still belongs to them; a state of
    other weights does not, and the trainer then starts a fresh AdamW (the same weights as no state)."""
    tmp, _, b = rounds
    state0 = tmp / "opt" / "r0000"
    train(tmp / "r0", tmp / "r1-empty", [], TrainSettings(), state_dir=tmp / "se")
    assert state_matches(state0, tmp / "r0") and state_matches(state0, tmp / "r1-empty")
    assert not state_matches(state0, tmp)  # other weights
    train(tmp / "r1-empty", tmp / "r2-carried", b, _settings(12, steps_before=2), state_dir=tmp / "s2",
          optimizer_in=state0)
    train(tmp / "r1-empty", tmp / "r2-fresh", b, _settings(12, steps_before=2), state_dir=tmp / "s2f")
    assert _digest(tmp / "r2-carried") != _digest(tmp / "r2-fresh")  # the state was carried through the gap
    # a state of other weights is ignored
    train(tmp / "r2-fresh", tmp / "r3-a", b, _settings(13), state_dir=tmp / "s3a", optimizer_in=state0)
    train(tmp / "r2-fresh", tmp / "r3-b", b, _settings(13), state_dir=tmp / "s3b")
    assert _digest(tmp / "r3-a") == _digest(tmp / "r3-b")


def test_the_train_phase_carries_each_roles_state_under_the_run_dir(tiny_dir: Path, tmp_path: Path) -> None:
    """jobs/tiny.toml (ZeRO stage 0, fp32) with train.optimizer = "carry": round 0 publishes the Solver's state
    at checkpoints/optimizer/solver/r0000, round 1 starts from it (other weights than a fresh AdamW's) and
    publishes r0001; the round's end keeps only the newest. With "fresh" no state is written."""
    import shutil

    from sgsbatch.config.loading import load_config
    from sgsbatch.phases.task import Task
    from sgsbatch.phases.train import settings_for, train_role
    from sgsbatch.round.checkpoints import prune_optimizer_states
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.shards import Shard

    jobs = Path(__file__).resolve().parents[2] / "jobs"
    cfg = load_config(jobs / "tiny.toml", ["train.optimizer=carry", "slurm.train.cpus=1"])
    paths = RunPaths(tmp_path / "run")
    shutil.copytree(tiny_dir, paths.checkpoint(None, "solver"))

    def task(r: int) -> Task:
        return Task(cfg, paths, r, "train", Shard(paths.phase_dir(r, "train"), 0), lambda: False)

    ex = _round(3, 0) + _round(4, 2)
    assert train_role(task(0), "solver", ex[:4])["steps"] == 1
    assert is_complete(paths.optimizer_state(0, "solver"))
    assert train_role(task(1), "solver", ex[4:])["steps"] == 1
    assert is_complete(paths.optimizer_state(1, "solver"))
    fresh = tmp_path / "fresh"
    train(paths.checkpoint(0, "solver"), fresh, ex[4:], settings_for(task(1), "solver"), state_dir=tmp_path / "sf")
    assert _digest(fresh) != _digest(paths.checkpoint(1, "solver"))
    assert prune_optimizer_states(paths) == [paths.optimizer_state(0, "solver")]
    assert sorted(p.name for p in paths.optimizer_states("solver").iterdir()) == ["r0001"]
    cfg = load_config(jobs / "tiny.toml", ["slurm.train.cpus=1"])  # "fresh": the reference's
    train_role(task(2), "solver", ex[:4])
    assert not paths.optimizer_state(2, "solver").exists()


def test_bf16_training_carries_its_fp32_masters(tiny_dir: Path, tmp_path: Path) -> None:
    """bf16 with ZeRO-2 (train.bf16, the research configs' setting): the carried state holds ZeRO's fp32 master
    partitions, so round 1 continues from them, not from the bf16 export, exactly as one uninterrupted run."""
    import dataclasses

    def bf16(seed: int, steps_before: int = 0) -> TrainSettings:
        return dataclasses.replace(_settings(seed, steps_before), bf16=True)

    a, b = _round(1, 0), _round(2, 10)
    train(tiny_dir, tmp_path / "joint", a + b, bf16(_joint_seed(a, b, 11, 12)), state_dir=tmp_path / "sj")
    train(tiny_dir, tmp_path / "r0", a, bf16(11), state_dir=tmp_path / "s0", optimizer_out=tmp_path / "opt")
    train(tmp_path / "r0", tmp_path / "r1", b, bf16(12, 2), state_dir=tmp_path / "s1", optimizer_in=tmp_path / "opt")
    train(tmp_path / "r0", tmp_path / "r1-fresh", b, bf16(12, 2), state_dir=tmp_path / "s1f")
    assert _digest(tmp_path / "r1") == _digest(tmp_path / "joint") != _digest(tmp_path / "r1-fresh")
