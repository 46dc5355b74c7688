"""`train_step/<role>/*` written by the round's end (round/step_metrics.py via lifecycle.finish_round) from
the rounds' `steps.jsonl`, on a synthetic run directory (tests/unit/test_round.py's): one point per
optimizer step at the role's global step (offset by the steps of earlier rounds, from the database),
the last record of a step done twice, ending a round again replacing its points, values that do not
apply (None) left out, each role in its own TensorBoard run. The steps come from the real trainer in
tests/models/test_train_steps.py; here they are written by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sgsbatch.round import metrics as M
from sgsbatch.round.lifecycle import finish_round, ingest_round
from sgsbatch.round.step_metrics import role_tb_dir, round_steps, step_scalars
from sgsbatch.run.handle import RunHandle
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.progress import record_train_step, train_steps_file
from tests.unit.test_round import _round0, _write_round

pytest.importorskip("tensorboard")


def _step(role: str, step: int, steps: int, loss: float, **extra: Any) -> dict[str, Any]:
    return {"role": role, "step": step, "steps": steps, "loss": loss, "tokens": 10 * step, "step_s": 0.5,
            "sequences": 4, "entropy": 2.0, "lr": 1e-6, "grad_norm": 0.7, "clip_fraction": None,
            "clip_fraction_low": None, "clip_fraction_high": None, "ratio_mean": None, "ratio_std": None,
            "sampler_kl": None, "ref_kl": None, **extra}


def _record(h: RunHandle, r: int, *records: dict[str, Any]) -> None:
    for rec in records:
        record_train_step(train_steps_file(h.paths, r), rec)


def _scalars(tb: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, round(e.value, 6)) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_round_end_writes_each_step_at_its_global_step_once(tmp_path: Path) -> None:
    h = _round0(tmp_path)
    assert ingest_round(h, 0)
    grpo = {"clip_fraction": 0.25, "clip_fraction_low": 0.05, "clip_fraction_high": 0.2, "ratio_mean": 1.01,
            "ratio_std": 0.02, "sampler_kl": 0.003}
    # round 0: the Solver's step 2 was done twice (killed after recording it, resumed from step 1): the last counts
    _record(h, 0, _step("solver", 1, 2, 0.9, **grpo), _step("solver", 2, 2, 0.8, **grpo),
            _step("conjecturer", 1, 1, 0.3), _step("solver", 2, 2, 0.7, **grpo))
    finish_round(h, 0, {"solver": {"steps": 2, "sequences": 8, "mean_loss": 0.8},
                        "conjecturer": {"steps": 1, "sequences": 2, "mean_loss": 0.3}})
    _write_round(h, 1, {"t0": [None]}, {"t0": "vfff", "t1": "ffff", "t2": "ffff", "t3": "ffff"}, {})
    assert ingest_round(h, 1)
    # round 1: an attempt of 5 steps left steps 4 and 5, then the data changed and the trainer started afresh
    _record(h, 1, _step("solver", 4, 5, 9.0), _step("solver", 5, 5, 9.0),
            *(_step("solver", k, 3, 0.5 - 0.1 * k, **grpo) for k in (1, 2, 3)))
    train1 = {"solver": {"steps": 3, "sequences": 12, "mean_loss": 0.4}}
    finish_round(h, 1, train1)
    finish_round(h, 1, train1)  # ended again (a retried train job): its points are replaced
    solver = _scalars(role_tb_dir(h.paths.tb, "solver"))
    assert solver[M.train_step("solver", "loss")] == [(1, 0.9), (2, 0.7), (3, 0.4), (4, 0.3), (5, 0.2)]
    assert [v for _, v in solver[M.train_step("solver", "round")]] == [0, 0, 1, 1, 1]
    assert solver[M.train_step("solver", "clip_fraction_high")] == [(k, 0.2) for k in range(1, 6)]
    assert [s for s, _ in solver[M.train_step("solver", "grad_norm")]] == [1, 2, 3, 4, 5]
    assert M.train_step("solver", "ref_kl") not in solver  # None in every record: not written
    conj = _scalars(role_tb_dir(h.paths.tb, "conjecturer"))
    assert conj[M.train_step("conjecturer", "loss")] == [(1, 0.3)]
    assert M.train_step("conjecturer", "clip_fraction") not in conj  # REINFORCE has no ratio
    assert all(tag.startswith("train_step/conjecturer/") for tag in conj)


def test_step_scalars_leave_out_what_does_not_apply() -> None:
    got = step_scalars("solver", 3, _step("solver", 2, 4, 0.5, ref_kl=0.01))
    assert got[M.train_step("solver", "round")] == 3 and got[M.train_step("solver", "ref_kl")] == 0.01
    assert M.train_step("solver", "clip_fraction") not in got and got[M.train_step("solver", "tokens")] == 20
    assert round_steps(RunPaths(Path("/nonexistent")), 0, "solver") == []  # no steps.jsonl: no steps


def test_one_file_per_round_in_step_order_whatever_order_they_are_written(tmp_path: Path) -> None:
    """Round 1 written before round 0 (and round 0 twice, in the same second): TensorBoard reads a run's
    files in name order, and the names are the rounds' first global steps, so both rounds stay whole."""
    from sgsbatch.round.step_metrics import write_round_steps

    paths = RunPaths(tmp_path / "run")
    for r, n in ((0, 2), (1, 3)):
        for k in range(1, n + 1):
            record_train_step(train_steps_file(paths, r), _step("solver", k, n, 10.0 * r + k))
    write_round_steps(paths.tb, paths, 1, {"solver": 2})
    write_round_steps(paths.tb, paths, 0, {"solver": 0})
    write_round_steps(paths.tb, paths, 0, {"solver": 0})
    run = role_tb_dir(paths.tb, "solver")
    assert sorted(p.name for p in run.iterdir()) == ["events.out.tfevents.000000000001.r000000",
                                                     "events.out.tfevents.000000000003.r000001"]
    assert _scalars(run)[M.train_step("solver", "loss")] == [(1, 1.0), (2, 2.0), (3, 11.0), (4, 12.0), (5, 13.0)]
    assert not list((paths.phase_dir(0, "train")).glob(".train_steps_tb_*"))  # the temporary directory is gone


def test_steps_of_the_simulated_trainer_are_labelled_so(tmp_path: Path) -> None:
    """A rehearsal's steps (the SIMULATED trainer's records) get a `train_step/labels` text; real ones none."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sgsbatch.round.step_metrics import write_round_steps

    paths = RunPaths(tmp_path / "run")
    record_train_step(train_steps_file(paths, 0), _step("solver", 1, 1, 0.0, simulated=True))
    record_train_step(train_steps_file(paths, 0), _step("conjecturer", 1, 1, 0.5))
    write_round_steps(paths.tb, paths, 0, {})

    def labels(role: str) -> list[str]:
        acc = EventAccumulator(str(role_tb_dir(paths.tb, role)))
        acc.Reload()
        return [t for t in acc.Tags()["tensors"] if t.startswith(M.TRAIN_STEP_LABELS)]

    assert labels("solver") and not labels("conjecturer")
