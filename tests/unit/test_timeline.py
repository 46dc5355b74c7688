"""Realistic time in rehearsals and the critical-path report: the SIMULATED components sleep what
the projection's figures give (config/simulated_time.py; time.sleep patched, no wall clock), and
views/critical_path.py's waiting / start-up / work and idle GPU and CPU time, worked by hand."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgsbatch.backends.batches import Example, TrainSettings
from sgsbatch.backends.generation import Request
from sgsbatch.backends.simulated_generation import SimulatedGenerator, settings_from
from sgsbatch.backends.simulated_trainer import simulated_train
from sgsbatch.cli import main
from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.config.simulated_time import decode_rate, simulated_time
from sgsbatch.errors import ConfigError
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard, atomic_write_json
from sgsbatch.verification.simulated import SimulatedVerifier
from sgsbatch.verification.verdict import ProofJob
from sgsbatch.views.critical_path import TaskTimes, chain, round_timeline
from sgsbatch.views.projection import decode_tokens_per_s, published
from sgsbatch.views.timeline import timeline_text
from tests.runlib import TINY, recorded_run

FIGURES = ["projection.decode_short_tokens_per_s=5000", "projection.decode_long_tokens_per_s=500",
           "generation.max_model_len=8000", "projection.lean_proofs_per_s=0.5", "projection.repl_start_s=10",
           "verification.max_proofs_per_process=3", "projection.model_load_s=100",
           "projection.train_tokens_per_s=1000", "projection.checkpoint_write_s=20"]


SETTINGS = TrainSettings(lr=1e-6, betas=(0.9, 0.95), weight_decay=0.0, grad_clip=1.0, batch_size=2,
                         micro_batch_size=1, zero_stage=2, bf16=True, gradient_checkpointing=True, seed=3)


def cfg_with(tmp_path: Path, *more: str) -> Config:
    return load_config(TINY, [*FIGURES, f"run.runs_dir={tmp_path}", *more])


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    out: list[float] = []
    monkeypatch.setattr(time, "sleep", out.append)
    return out


def test_no_time_scale_sleeps_nothing(tmp_path: Path, slept: list[float]) -> None:
    cfg = cfg_with(tmp_path)
    assert simulated_time(cfg) is None
    v = SimulatedVerifier(simulated_time(cfg), 4)
    list(v.verify_stream([ProofJob("k", "", "theorem t : True := by", "\n  simp")] * 5))
    assert slept == []


def test_decode_sleeps_by_context_as_the_projection_models_it(tmp_path: Path, slept: list[float]) -> None:
    cfg = cfg_with(tmp_path, "projection.simulated_time_scale=0.5")
    clock = simulated_time(cfg)
    assert clock is not None
    # 8000 x 500 / 1000 = 4,000 tokens/s at 1,000 tokens of context; capped at 5,000 below 800
    assert clock.decode_s([(0, 1000)], gpus=1) == pytest.approx(0.5 * 1000 / 4000)
    assert clock.decode_s([(0, 400)], gpus=0) == pytest.approx(0.5 * 400 / 5000)  # no GPUs: stands for one
    assert clock.decode_s([(3000, 1000)], gpus=2) == pytest.approx(0.5 * 1000 / 1000 / 2)  # 4k context: 1k/s
    # the projection's per-GPU rate at its mean context is the same formula
    mean = load_config(TINY, [*FIGURES, "projection.prompt_tokens=3000", "projection.mean_tokens=1000"])
    assert decode_tokens_per_s(mean, published(mean)) == decode_rate(5000, 500, 8000, 4000) == 1000


def test_the_engine_sleeps_a_model_load_then_each_steps_decode(tmp_path: Path, slept: list[float]) -> None:
    cfg = cfg_with(tmp_path, "projection.simulated_time_scale=0.01", "generation.simulated_token_sigma=0")
    gen = SimulatedGenerator(settings_from(cfg, "solver", 0, gpus=1))
    assert slept == [pytest.approx(1.0)]  # model_load_s 100 x 0.01
    gen.add(Request(key="a", messages=[{"role": "user", "content": "x" * 35}], n=2, max_tokens=4000,
                    temperature=1.0, seed=1))
    (_, g), = gen.step()
    prompt = len(g.prompt_ids)
    want = sum(len(s.token_ids) / decode_rate(5000, 500, 8000, prompt + len(s.token_ids)) for s in g.samples)
    assert slept[1] == pytest.approx(0.01 * want)


def test_the_verifier_sleeps_per_proof_and_per_repl_start(tmp_path: Path, slept: list[float]) -> None:
    cfg = cfg_with(tmp_path, "projection.simulated_time_scale=1")
    v = SimulatedVerifier(simulated_time(cfg), processes=2)
    assert slept == [10.0]  # the REPLs start with the task
    list(v.verify_stream([ProofJob("k", "", "theorem t : True := by", "\n  simp")] * 7))
    # 2 cores at 0.5 proofs/s: 1 s a proof; REPLs restart after 3 proofs a core (6 proofs)
    assert slept[1:] == [1.0] * 6 + [10.0, 1.0]


def test_the_trainer_sleeps_load_tokens_and_checkpoint(tmp_path: Path, slept: list[float]) -> None:
    cfg = cfg_with(tmp_path, "projection.simulated_time_scale=0.1")
    ex = [Example(prompt_ids=[1] * 300, completion_ids=[2] * 700, weight=1.0)] * 4
    simulated_train("m", tmp_path / "ckpt", ex, SETTINGS, param_count=10, clock=simulated_time(cfg), gpus=2)
    assert slept == [pytest.approx(10.0), pytest.approx(0.1 * 4000 / 1000 / 2), pytest.approx(2.0)]


def test_the_time_scale_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="projection.simulated_time_scale: must be >= 0, got -1"):
        cfg_with(tmp_path, "projection.simulated_time_scale=-1")
    with pytest.raises(ConfigError, match="simulated_tokens_per_s both set: choose one"):
        cfg_with(tmp_path, "projection.simulated_time_scale=1", "generation.simulated_tokens_per_s=100")


def test_the_critical_path_of_recorded_times_worked_by_hand() -> None:
    # round 2 starts when round 1 ended at t=100; solve: 2 tasks x 1 GPU; verify overlaps solve's end
    # (streaming: it started up before solve ended, and waited 3 s for solve lines with nothing to check)
    tl = chain(2, [("solve", (TaskTimes(110, 130, 200), TaskTimes(112, 140, 220)), 1, 8, 64, None),
                   ("verify", (TaskTimes(215, 216, 260, waited=3.0),), 0, 4, 64, None),
                   ("train", (TaskTimes(270, None, 300),), 4, 16, 1, 90.0)], before=100.0)
    solve, verify, train = tl.phases
    assert (solve.wait_s, solve.startup_s, solve.work_s, solve.path_s) == (10, 28, 82, 120)
    # after solve's end: its start-up (215-216) lay before it, off the path
    assert (verify.wait_s, verify.startup_s, verify.work_s, verify.path_s) == (0, 0, 40, 40)
    assert (train.wait_s, train.startup_s, train.work_s) == (10, None, 30)  # submitted at 90, verify ended 260
    assert tl.round_s == 200 and tl.critical.phase == "solve"
    assert tl.totals() == {"wait_s": 20, "startup_s": 28, "work_s": 152}  # 200 in all
    gpu = tl.resource("gpus")  # pool: train's 4 GPUs x 200 s; solve's tasks start up 20 + 28, work 70 + 80
    assert (gpu.peak, gpu.pool_s, gpu.startup_s, gpu.work_s) == (4, 800, 48, 150 + 120)
    assert gpu.idle_s == 800 - 48 - 270
    cpu = tl.resource("cpus")  # pool: solve's 2 x 8 CPUs x 200 s
    assert (cpu.peak, cpu.pool_s) == (16, 3200)
    assert cpu.startup_s == 8 * 48 + 4 * 1 and cpu.work_s == 8 * 150 + 4 * (44 - 3) + 16 * 30  # the wait is idle
    text = timeline_text(tl)
    assert "longest: solve" in text and "GPU: pool 4" in text


def test_the_first_phase_waits_from_its_submission_or_starts_the_round() -> None:
    tl = chain(0, [("init", (TaskTimes(50, 55, 60),), 0, 1, 1, 40.0)], before=None)
    assert (tl.start, tl.phases[0].wait_s) == (40.0, 10.0)
    assert chain(0, [("init", (TaskTimes(50, 55, 60),), 0, 1, 1, None)], before=None).phases[0].wait_s == 0
    with pytest.raises(ValueError, match="no task times"):
        chain(0, [("init", (), 0, 1, 1, None)], before=None)


def _task(d: Path, i: int, start: float, ready: float | None, end: float | None) -> None:
    s = Shard(d, i)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(s.started_file, {"time": start})
    if ready is not None:
        atomic_write_json(s.ready_file, {"time": ready})
    if end is not None:
        atomic_write_json(s.marker, {"time": end})


def test_a_round_timeline_reads_the_shard_files_and_the_command_prints_it(tmp_path: Path) -> None:
    cfg = load_config(TINY, [f"run.runs_dir={tmp_path}", "run.rounds=2"])
    paths = RunPaths(tmp_path / "run")
    t = 1000.0
    for r in (0, 1):
        for phase in cfg.phases_of_round(r):
            for i in range(cfg.shard_count(phase)):
                _task(paths.phase_dir(r, phase), i, t + 1, t + 2, t + 5)
            t += 5
    tl = round_timeline(cfg, paths, 1)
    assert tl is not None and tl.start == pytest.approx(1000 + 5 * len(cfg.phases_of_round(0)))
    assert all((p.wait_s, p.startup_s, p.work_s) == (1, 1, 3) for p in tl.phases)
    Shard(paths.phase_dir(1, "train"), 0).marker.unlink()
    assert round_timeline(cfg, paths, 1) is None  # not completed: no timeline


def test_the_command_prints_completed_rounds_and_refuses_an_unfinished_one(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    r = ["--runs-dir", str(tmp_path)]
    assert CliRunner().invoke(main, ["timeline", "t", *r]).output.strip() == "run t: no completed round yet"
    for k, phase in enumerate(h.cfg.phases_of_round(0)):
        for i in range(h.cfg.shard_count(phase)):
            _task(h.paths.phase_dir(0, phase), i, 100.0 + 10 * k + 1, 100.0 + 10 * k + 3, 100.0 + 10 * k + 10)
    out = CliRunner().invoke(main, ["timeline", "t", "--json", *r])
    assert out.exit_code == 0, out.output
    (got,) = json.loads(out.output)
    assert got["round"] == 0 and got["round_s"] == pytest.approx(9 + 10 * (len(h.cfg.phases_of_round(0)) - 1))
    assert [p["startup_s"] for p in got["phases"]] == [2.0] * len(h.cfg.phases_of_round(0))
    text = CliRunner().invoke(main, ["timeline", "t", "--round", "0", *r]).output
    assert text.startswith("round 0: ") and "CPU: pool" in text
    bad = CliRunner().invoke(main, ["timeline", "t", "--round", "1", *r])
    assert bad.exit_code == 2 and "round 1 has no completed timeline" in bad.output
