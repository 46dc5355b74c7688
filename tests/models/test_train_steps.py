"""Per-optimizer-step metrics from a real tiny DeepSpeed training on CPU: each step's TrainStep
(statistics, gradient norm, learning rate) and its `train_step/` TensorBoard points at a global step
that continues across rounds, with a resumed round (a step done twice) not duplicating points."""

from __future__ import annotations

import math
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.backends.batches import GRPO_FAMILY, OBJECTIVES, RATIO_OBJECTIVES
from sgsbatch.backends.trainer import (
    Example,
    TrainingInterrupted,
    TrainSettings,
    TrainStep,
    batch_loss,
    train,
)
from sgsbatch.round import metrics as M
from sgsbatch.round.step_metrics import role_tb_dir, round_steps, write_round_steps
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.progress import record_train_step, train_steps_file

pytest.importorskip("tensorboard")


def _examples(k: int, seed: int) -> list[Example]:
    """Groups of 2 with advantages +-1, +-0.5 and sampler logprobs far from the policy's (ratios off 1)."""
    rng = random.Random(seed)
    out = []
    for i in range(k):
        ex = Example([0, 4, *[rng.randrange(10, 400) for _ in range(rng.randrange(2, 6))], 5, 77],
                     [rng.randrange(10, 400) for _ in range(rng.randrange(2, 7))] + [1], [1.0, -1.0, 0.5, -0.5][i % 4],
                     group=i // 2)
        ex.sampler_logprobs = [-9.0 + 0.3 * (t % 2) for t in range(len(ex.completion_ids))]
        out.append(ex)
    return out


def _hand_grad_norm(tiny_dir: Path, examples: list[Example], settings: TrainSettings) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32)
    loss = batch_loss(model, examples, settings.objective, settings=settings)
    loss.backward()
    return float(torch.stack([p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None]).sum().sqrt())


def test_every_objective_reports_each_step(tiny_dir: Path, tmp_path: Path) -> None:
    """Per objective: one TrainStep per optimizer step whose statistics add up to the call's result, the
    first step's gradient norm equal to the hand gradient's, the optimizer's LR, and None exactly where the
    objective has no such value (no ratio for REINFORCE, no clip sides for CISPO)."""
    ex = _examples(8, seed=3)
    for objective in OBJECTIVES:
        settings = TrainSettings(lr=2e-3, batch_size=4, objective=objective, threads=1, clip_low=0.2, clip_high=0.28,
                                 max_tokens=16, grad_clip=1e9)
        seen: list[TrainStep] = []
        res = train(tiny_dir, tmp_path / objective, ex, settings, state_dir=tmp_path / f"s-{objective}",
                    on_step=seen.append)
        assert [s.step for s in seen] == list(range(1, res.steps + 1)) and res.steps == 2, objective
        assert sum(s.tokens for s in seen) == res.tokens and sum(s.sequences for s in seen) == len(ex)
        assert all(s.lr == 2e-3 for s in seen)
        assert all(s.grad_norm is not None and s.grad_norm > 0 for s in seen)
        assert math.isclose(sum(s.entropy * s.tokens for s in seen) / res.tokens, res.entropy, rel_tol=1e-6)
        ratio = objective in RATIO_OBJECTIVES
        assert (seen[0].clip_fraction is not None, seen[0].sampler_kl is not None, seen[0].ratio_std is not None) == (
            ratio,) * 3, objective
        assert (seen[0].clip_fraction_high is not None) == (objective in GRPO_FAMILY), objective
        assert seen[0].ref_kl is None  # no KL term (solver.kl_beta = 0)
        if ratio:
            per_step = sum(s.clip_fraction * s.tokens for s in seen if s.clip_fraction is not None) / res.tokens
            assert math.isclose(per_step, res.clip_fraction, rel_tol=1e-6, abs_tol=1e-12), objective
            kl = sum(s.sampler_kl * s.tokens for s in seen if s.sampler_kl is not None) / res.tokens
            assert math.isclose(kl, res.sampler_kl, rel_tol=1e-6) and kl > 0, objective


def test_a_kl_term_reports_each_steps_kl_to_the_reference(tiny_dir: Path, tmp_path: Path) -> None:
    """GRPO with kl_beta > 0 (the reference: the starting weights): each step's ref_kl, weighted by its tokens,
    makes the call's; 0 at the first step (the policy is the reference), above 0 once it moved."""
    ex = _examples(8, seed=3)
    settings = TrainSettings(lr=5e-3, batch_size=4, objective="grpo", threads=1, kl_beta=0.04,
                             kl_reference=str(tiny_dir))
    seen: list[TrainStep] = []
    res = train(tiny_dir, tmp_path / "o", ex, settings, state_dir=tmp_path / "s", on_step=seen.append)
    kls = [s.ref_kl for s in seen]
    assert len(kls) == 2 and all(k is not None for k in kls)
    assert kls[0] == pytest.approx(0.0, abs=1e-7) and kls[1] > 1e-7
    assert math.isclose(sum(s.ref_kl * s.tokens for s in seen if s.ref_kl is not None) / res.tokens, res.ref_kl,
                        rel_tol=1e-6)


def test_first_step_gradient_norm_is_the_hand_gradients(tiny_dir: Path, tmp_path: Path) -> None:
    """One optimizer step over all examples: the reported norm is |grad| of the step's loss before clipping
    (grad_clip small, so DeepSpeed clips the update but not the reported norm): ours at ZeRO stage 0,
    DeepSpeed's own at stages 1 and 2."""
    ex = _examples(4, seed=8)
    for objective, zero in (("reinforce", 0), ("grpo", 0), ("grpo", 1), ("grpo", 2)):
        settings = TrainSettings(lr=1e-3, batch_size=4, objective=objective, threads=1, grad_clip=1e-3,
                                 micro_batch_size=2, zero_stage=zero)
        seen: list[TrainStep] = []
        train(tiny_dir, tmp_path / f"{objective}{zero}", ex, settings, state_dir=tmp_path / f"s-{objective}{zero}",
              on_step=seen.append)
        assert len(seen) == 1 and seen[0].grad_norm is not None
        hand = _hand_grad_norm(tiny_dir, ex, settings)
        assert hand > 1e-3 and math.isclose(seen[0].grad_norm, hand, rel_tol=1e-4), (objective, zero)


class _Killed(Exception):
    """Stands in for a job killed between an optimizer step's record and its checkpoint."""


def _train_round(tiny_dir: Path, paths: RunPaths, r: int, ex: list[Example], settings: TrainSettings,
                 interrupt: bool) -> int:
    """Round r's training as the train phase runs it (rank 0 records each step in steps.jsonl); with
    `interrupt`: stopped after step 1 (checkpoint), then killed after recording step 2 (no checkpoint),
    then resumed to the end, so step 2 is done and recorded twice."""
    out, state = paths.checkpoint(r, "solver"), paths.phase_dir(r, "train") / "solver"
    kill_at: list[int] = [2] if interrupt else []

    def on_step(step: TrainStep) -> None:
        record_train_step(train_steps_file(paths, r), {"role": "solver", **asdict(step)})
        if kill_at and step.step == kill_at[0]:
            kill_at.clear()
            raise _Killed()

    if interrupt:
        with pytest.raises(TrainingInterrupted):
            train(tiny_dir, out, ex, settings, state_dir=state, should_stop=lambda: True, on_step=on_step)
        with pytest.raises(_Killed):
            train(tiny_dir, out, ex, settings, state_dir=state, on_step=on_step)
    return train(tiny_dir, out, ex, settings, state_dir=state, on_step=on_step).steps


def _scalars(tb: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def test_event_files_hold_one_point_per_step_across_rounds_and_a_resumed_round(tiny_dir: Path,
                                                                              tmp_path: Path) -> None:
    paths = RunPaths(tmp_path / "run")
    settings = TrainSettings(lr=1e-3, batch_size=2, objective="grpo", threads=1, seed=4)
    steps0 = _train_round(tiny_dir, paths, 0, _examples(6, seed=1), settings, interrupt=False)
    steps1 = _train_round(tiny_dir, paths, 1, _examples(8, seed=2), settings, interrupt=True)
    assert (steps0, steps1) == (3, 4)
    recorded = [rec["step"] for rec in _records(paths, 1)]
    assert recorded.count(2) == 2 and len(recorded) == steps1 + 1  # the killed attempt's step 2 is there twice
    tb = paths.tb
    assert write_round_steps(tb, paths, 0, {"solver": 0}) == {"solver": steps0}
    assert write_round_steps(tb, paths, 1, {"solver": steps0}) == {"solver": steps1}
    write_round_steps(tb, paths, 1, {"solver": steps0})  # the round ended again (a retried train job)
    run = role_tb_dir(tb, "solver")
    loss = _scalars(run, M.train_step("solver", "loss"))
    assert [s for s, _ in loss] == list(range(1, steps0 + steps1 + 1))  # one point per step, global, no duplicate
    kept = round_steps(paths, 0, "solver") + round_steps(paths, 1, "solver")
    assert [round(v, 5) for _, v in loss] == [round(rec["loss"], 5) for rec in kept]
    assert [int(v) for _, v in _scalars(run, M.train_step("solver", "round"))] == [0] * steps0 + [1] * steps1
    for what in ("clip_fraction", "clip_fraction_low", "clip_fraction_high", "ratio_mean", "ratio_std", "sampler_kl",
                 "entropy", "grad_norm", "lr", "tokens", "sequences"):
        assert [s for s, _ in _scalars(run, M.train_step("solver", what))] == list(range(1, steps0 + steps1 + 1)), what
    assert _scalars(run, M.train_step("solver", "ref_kl")) == []  # written only when the objective has one
    assert [v for _, v in _scalars(run, M.train_step("solver", "lr"))] == pytest.approx([1e-3] * (steps0 + steps1))


def _records(paths: RunPaths, r: int) -> list[dict[str, Any]]:
    from sgsbatch.run.progress import train_steps

    return train_steps(train_steps_file(paths, r))


def test_the_lr_warm_up_continues_across_rounds_and_is_the_lr_each_step_used(tiny_dir: Path, tmp_path: Path) -> None:
    """solver.lr_warmup_steps (DAPO's warm-up): step k of a round after `steps_before` steps of earlier rounds
    trains at lr x min(1, (steps_before + k) / warmup_steps), which each TrainStep reports; weights differ from a
    constant-LR call, and a stopped call resumes to the same weights (the LR is a function of the step)."""
    import torch
    from transformers import AutoModelForCausalLM

    from sgsbatch.backends.batches import step_lr

    ex = _examples(8, seed=3)
    base = TrainSettings(lr=2e-3, batch_size=2, objective="reinforce", threads=1, grad_clip=1e9)
    warm = TrainSettings(**{**asdict(base), "warmup_steps": 6, "steps_before": 3})
    assert [step_lr(warm, k) for k in (1, 2, 3, 4)] == pytest.approx([2e-3 * 4 / 6, 2e-3 * 5 / 6, 2e-3, 2e-3])
    assert step_lr(base, 1) == 2e-3
    seen: list[TrainStep] = []
    train(tiny_dir, tmp_path / "w", ex, warm, state_dir=tmp_path / "sw", on_step=seen.append)
    assert [s.lr for s in seen] == pytest.approx([2e-3 * 4 / 6, 2e-3 * 5 / 6, 2e-3, 2e-3])
    train(tiny_dir, tmp_path / "c", ex, base, state_dir=tmp_path / "sc")
    stop = iter([True])  # stopped after the first step, then resumed
    with pytest.raises(TrainingInterrupted):
        train(tiny_dir, tmp_path / "r", ex, warm, state_dir=tmp_path / "sr", should_stop=lambda: next(stop, False))
    train(tiny_dir, tmp_path / "r", ex, warm, state_dir=tmp_path / "sr")

    def weights(d: Path) -> list[Any]:
        return list(AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32).parameters())

    w, c, r = weights(tmp_path / "w"), weights(tmp_path / "c"), weights(tmp_path / "r")
    assert any(not torch.equal(a, b) for a, b in zip(w, c, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(w, r, strict=True))
