"""The canary's generation, Guide and training checks on a real tiny model (transformers on CPU,
DeepSpeed on a gloo CPU rank): what passes, and each failure with the key it names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sgsbatch.canary.generation import check_guide, check_role
from sgsbatch.canary.training import check_training
from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.logic.data import Target

REPO = Path(__file__).resolve().parents[2]


def _cfg(model: Path, tmp_path: Path, *more: str) -> Config:
    return load_config(REPO / "jobs" / "tiny.toml", [
        f"models.solver={model}", f"models.conjecturer={model}", f"models.guide={model}", f"run.runs_dir={tmp_path}",
        "canary.max_tokens=8", "guide.max_tokens=24", "solver.batch_size=2", *more])


def _targets(targets: list[tuple[str, str, str]]) -> list[Target]:
    return [Target(i, h, t) for i, h, t in targets[:2]]


def test_generation_reports_start_speed_and_the_prompt_budget(tiny_dir: Path, tmp_path: Path,
                                                              targets: list[tuple[str, str, str]]) -> None:
    rows, texts = check_role(_cfg(tiny_dir, tmp_path), "solver", _targets(targets), threads=1)
    by = {r.check: r for r in rows}
    assert all(r.ok for r in rows), rows
    assert len(texts) == 2
    assert "tokens/s" in by["generate"].figure and "transformers" in by["engine start"].figure
    assert "longest real prompt" in by["prompt + max_tokens"].figure


def test_a_prompt_longer_than_max_model_len_fails(tiny_dir: Path, tmp_path: Path,
                                                   targets: list[tuple[str, str, str]]) -> None:
    rows, texts = check_role(_cfg(tiny_dir, tmp_path, "generation.max_model_len=16"), "conjecturer",
                             _targets(targets), threads=1)
    assert texts == [] and [r.check for r in rows] == ["prompt fits"]
    assert not rows[0].ok and rows[0].fix.startswith("generation.max_model_len")


def test_guide_replies_under_the_parse_threshold_fail(tiny_dir: Path, tmp_path: Path,
                                                       targets: list[tuple[str, str, str]]) -> None:
    # a tiny random model never writes the Guide's tags: 0% parses
    rows = {r.check: r for r in check_guide(_cfg(tiny_dir, tmp_path), _targets(targets), threads=1)}
    assert not rows["replies parse"].ok and rows["replies parse"].figure.startswith("0 of 2 (0%)")
    assert "canary.min_guide_parse_rate" in rows["replies parse"].fix
    rows = {r.check: r for r in check_guide(_cfg(tiny_dir, tmp_path, "canary.min_guide_parse_rate=0"),
                                            _targets(targets), threads=1)}
    assert rows["replies parse"].ok


def test_training_stops_checkpoints_and_resumes_and_a_slow_checkpoint_fails(
        tiny_dir: Path, tmp_path: Path, targets: list[tuple[str, str, str]]) -> None:
    cfg = _cfg(tiny_dir, tmp_path, "slurm.train.signal_delay_s=0")  # no checkpoint can fit in 0 s
    work = tmp_path / "work"
    rows = {r.check: r for r in check_training(cfg, _targets(targets), work)}
    assert rows["load + step 1"].ok and "1 ranks, ZeRO-0" in rows["load + step 1"].figure
    slow = rows["stop checkpoint fits signal_delay_s"]
    assert not slow.ok and slow.fix.startswith("slurm.train.signal_delay_s = 60")
    assert rows["resume at the same step"].ok, rows["resume at the same step"].figure
    assert not work.exists()  # the checkpoint and the weights are removed


def test_training_of_a_simulated_trainer_is_reported_as_such(tmp_path: Path) -> None:
    cfg = replace(Config(), train=replace(Config().train, backend="simulated"))
    rows = check_training(cfg, [], tmp_path / "w")
    assert len(rows) == 1 and "SIMULATED" in rows[0].figure
