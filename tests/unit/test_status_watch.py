"""`status` live progress, solve-rate sparkline, disk use/projection and alarms (views/progress.py);
`watch` writing live alarms to TensorBoard."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sgsbatch.cli import main
from sgsbatch.round.disk import disk_usage
from sgsbatch.run.journal import journal_job
from sgsbatch.run.shards import Shard
from sgsbatch.views.progress import checkpoint_projection, sparkline
from tests.runlib import recorded_run


def _status(runs: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["status", "t", "--runs-dir", str(runs), *args])
    return res.exit_code, res.output


def test_running_phase_progress_and_stuck_shard(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t", executor="slurm")
    d = h.paths.phase_dir(0, "init")
    Shard(d, 0).finish([], {})  # init done: the current phase is the next one
    phase = h.cfg.phases_of_round(0)[1]
    n = h.cfg.shard_count(phase)
    d = h.paths.phase_dir(0, phase)
    journal_job(h.paths.jobs_journal(0), {"phase": phase, "job_id": "4242", "shards": list(range(n))})
    now = time.time()
    for i in range(n):
        s = Shard(d, i)
        s.mark_started()
        s.set_total(4)
        for k in range(i + 1 if i < n - 1 else 1):
            s.append_item({"key": f"p{k}"})
    stuck = Shard(d, n - 1)  # one item, then nothing for two hours
    os.utime(stuck.partial, (now - 7200, now - 7200))
    code, out = _status(tmp_path, "--json")
    assert code == 0, out
    st = json.loads(out)
    p = st["progress"]
    assert p["phase"] == phase and p["items_total"] == 4 * n
    assert p["items_done"] == sum(range(1, n)) + 1
    assert [s["shard"] for s in p["stuck"]] == [n - 1] and p["stuck"][0]["job_id"] == f"4242_{n - 1}"
    assert any(a["metric"] == "alerts/stuck_shards" and a["shard"] == n - 1 for a in st["alerts"])
    assert st["round"] == 0 and "disk" in st and "state" in st  # old fields kept
    code, out = _status(tmp_path)
    assert " round 0 " in out and "(0 of 2 rounds completed)" in out and "ALERT alerts/stuck_shards" in out and f"job 4242_{n - 1}" in out


def test_no_stuck_alarm_for_a_fresh_shard(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    d = h.paths.phase_dir(0, "init")
    Shard(d, 0).mark_started()
    Shard(d, 0).append_item({"key": "a"})
    code, out = _status(tmp_path, "--json")
    st = json.loads(out)
    assert st["progress"]["phase"] == "init" and st["progress"]["stuck"] == []
    assert not [a for a in st["alerts"] if a["metric"] == "alerts/stuck_shards"]


def test_disk_projection_with_known_sizes(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t", executor="local")
    cfg = h.cfg
    for r in (0, 1):
        role = h.paths.checkpoint(r, "solver")
        role.mkdir(parents=True)
        (role / "w.bin").write_bytes(b"x" * 1000)
    du = disk_usage(cfg, h.paths, rounds_completed=2)
    assert du["used_bytes"]["checkpoints"] == 2000 and du["checkpoint_bytes_each"] == 1000
    assert du["checkpoints_kept_at_end"] == 2  # 2 planned rounds, keep_last = 2
    assert du["projected_bytes"] == 2000 + du["used_bytes"]["rounds"] + du["used_bytes"]["database"]


def test_disk_projection_counts_old_rounds_at_their_compacted_size(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t", executor="local")
    cfg = dataclasses.replace(h.cfg, run=dataclasses.replace(h.cfg.run, rounds=100))
    for r, size in enumerate((100, 100, 100, 5000, 5000)):  # rounds 0-2 compacted, 3-4 still whole
        d = h.paths.round_dir(r) / "solve"
        d.mkdir(parents=True, exist_ok=True)
        (d / "shard_00000.jsonl").write_bytes(b"x" * size)
        if r < 3:
            (h.paths.round_dir(r) / "compacted").write_text("")
    inputs = sum(f.stat().st_size for f in (h.paths.root / "rounds").rglob("inputs.json"))  # round 0's, recorded
    du = disk_usage(cfg, h.paths, rounds_completed=4)
    db = du["used_bytes"]["database"]
    assert du["used_bytes"]["rounds"] == 10300 + inputs
    per_compacted = (300 + inputs) / 3
    assert du["projected_bytes"] == int(10000 + per_compacted * 98 + db + db / 4 * 96)


def test_checkpoint_projection_200_rounds() -> None:
    from sgsbatch.config.loading import load_config
    from tests.runlib import TINY

    cfg = load_config(TINY, ["run.rounds=200", "checkpoints.keep_last=2", "checkpoints.keep_every=10"])
    kept, size = checkpoint_projection(cfg, 2 * 14.8e9)  # two 7B roles in bf16 + optimizer-free weights
    assert kept == 21  # rounds 9, 19, ..., 199 (20) and round 198
    assert 600e9 < size < 650e9


def test_sparkline() -> None:
    assert sparkline([0.0, 0.5, 1.0], 0.0, 1.0) == "▁▅█"
    assert sparkline([]) == ""


def test_launch_dry_run_prints_checkpoint_projection(tmp_path: Path) -> None:
    from tests.runlib import TINY

    def dry(*sets: str) -> str:
        args = ["launch", str(TINY), "--dry-run", "--set", f"run.runs_dir={tmp_path}", "--set", "run.executor=local",
                "--set", "run.rounds=200"]
        for x in sets:
            args += ["--set", x]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        return res.output

    out = dry("checkpoints.estimate_gb_per_role=10")  # tiny-random models: their own size, not the estimate
    assert "checkpoints: 21 rounds kept at the end of 200 rounds" in out and "keep_every=10" in out
    assert "x 2 roles x 0.79 MB (tiny-random models, fp32) = 33.1 MB" in out
    from sgsbatch.config.loading import load_config
    from sgsbatch.views.progress import projection_text

    def text(*sets: str) -> str:  # models of the hub: the estimate (a dry run of them would look them up)
        return projection_text(load_config(TINY, [f"run.runs_dir={tmp_path}", "run.rounds=200", "models.solver=a/b",
                                                  "models.conjecturer=a/b", *sets]))

    assert "x 2 roles x 10 GB (checkpoints.estimate_gb_per_role) = 420 GB" in text("checkpoints.estimate_gb_per_role=10")
    # a carried AdamW state (ZeRO-2, bf16: 7x the weights) a role, two while a round trains: 2 x 2 x 70 GB
    assert "+ the carried optimizer states (train.optimizer = \"carry\"): 280 GB at most" in text(
        "checkpoints.estimate_gb_per_role=10", "train.optimizer=carry", "train.zero_stage=2", "train.bf16=true")
    out = text("checkpoints.keep_every=50", "checkpoints.estimate_gb_per_role=10", "alerts.disk_budget_gb=1")
    assert "checkpoints: 5 rounds kept" in out and "over alerts.disk_budget_gb 1" in out


def test_train_stuck_bound_is_a_factor_of_its_slowest_step_with_a_floor(tmp_path: Path) -> None:
    from sgsbatch.config.loading import load_config
    from sgsbatch.views.progress import train_stuck_after_s
    from tests.runlib import TINY

    cfg = load_config(TINY, ["alerts.train_stuck_floor_s=600", "alerts.train_stuck_factor=5"])
    assert train_stuck_after_s(cfg, None) == 600  # before the first step: the floor alone
    assert train_stuck_after_s(cfg, 30.0) == 600  # 5 x 30 s is under the floor
    assert train_stuck_after_s(cfg, 300.0) == 1500


def _at_train(h: Any) -> Shard:
    """Round 0 with every phase before train done and its train shard started (at `started`)."""
    for phase in h.cfg.phases_of_round(0)[:-1]:
        for i in range(h.cfg.shard_count(phase)):
            Shard(h.paths.phase_dir(0, phase), i).finish([], {})
    s = Shard(h.paths.phase_dir(0, "train"), 0)
    s.mark_started()
    return s


def _steps(h: Any, role: str, step_s: list[float], at: float, steps: int = 5) -> None:
    from sgsbatch.run.progress import record_train_step, train_steps_file

    path = train_steps_file(h.paths, 0)
    for k, dt in enumerate(step_s, start=1):
        record_train_step(path, {"role": role, "step": k, "steps": steps, "loss": 2.0 / k, "tokens": 100 + k,
                                 "step_s": dt})
    lines = path.read_text().splitlines()  # the last step's time, as if written at `at`
    path.write_text("\n".join(lines[:-1] + [json.dumps({**json.loads(lines[-1]), "time": at})]) + "\n")


def test_train_job_without_a_step_beyond_its_bound_is_stuck(tmp_path: Path) -> None:
    """Bound = max(alerts.train_stuck_floor_s, alerts.train_stuck_factor x the slowest step): a train
    job with steps of up to 300 s is stuck 10 x 300 s after its last step, not before; `status`
    shows its steps and raises the alarm that `resume` acts on."""
    from sgsbatch.views.progress import alarms, phase_progress

    h = recorded_run(tmp_path, "t", executor="slurm")
    shard = _at_train(h)
    journal_job(h.paths.jobs_journal(0), {"phase": "train", "job_id": "77", "shards": [0]})
    now = time.time()
    shard.started_file.write_text(json.dumps({"time": now - 9000}))
    _steps(h, "solver", [120.0, 300.0], at=now - 2000)
    p = phase_progress(h.cfg, h.paths, 0, "train", now=now)
    assert p["stuck_after_s"] == 3000 and p["stuck"] == []  # 10 x 300 s, over the 1800 s floor
    t = p["train"]
    assert (t["role"], t["step"], t["steps"], t["tokens"], t["role_tokens"]) == ("solver", 2, 5, 102, 203)
    assert t["loss"] == 1.0 and t["step_s"] == 300.0 and t["slowest_step_s"] == 300.0
    p = phase_progress(h.cfg, h.paths, 0, "train", now=now + 1500)  # 3500 s since the last step
    assert [(s["shard"], s["job_id"]) for s in p["stuck"]] == [(0, "77")]  # one shard: a plain job, no array task
    raised = [a for a in alarms(h.cfg, h.paths, 0, p, None) if a["metric"] == "alerts/stuck_shards"]
    assert len(raised) == 1 and "train shard 0 (job 77) made no optimizer step for 58m20s" in raised[0]["message"]

    code, out = _status(tmp_path)  # now: not stuck, its steps shown
    assert code == 0, out
    assert "progress: train solver optimizer step 2/5, loss 1, 102 tokens (203 this role)" in out
    assert "300.00 s/step" in out and "ALERT" not in out


def test_train_job_before_its_first_step_is_judged_by_the_floor(tmp_path: Path) -> None:
    """No step yet: stuck once the floor has passed since the job started, or since its latest
    attempt started (its pid file): a retried job loading its weights again is not stuck."""
    from sgsbatch.views.progress import phase_progress

    h = recorded_run(tmp_path, "t")
    shard = _at_train(h)
    now = time.time()
    shard.started_file.write_text(json.dumps({"time": now - 3600}))
    p = phase_progress(h.cfg, h.paths, 0, "train", now=now)
    assert p["train"] is None and p["stuck_after_s"] == h.cfg.alerts.train_stuck_floor_s == 1800
    assert [s["shard"] for s in p["stuck"]] == [0]
    shard.pid_file.write_text("123")  # a new attempt started 10 min ago
    os.utime(shard.pid_file, (now - 600, now - 600))
    assert phase_progress(h.cfg, h.paths, 0, "train", now=now)["stuck"] == []
    code, out = _status(tmp_path)
    assert "progress: train no optimizer step yet" in out


def test_watch_writes_live_alarms_to_tensorboard_when_they_change(tmp_path: Path, monkeypatch: Any) -> None:
    """`watch` writes the alarms it sees (stuck shards included) under tb/live_alerts at step = the
    round, only when they change: nothing while none was raised, zeros when they clear. The
    scheduler is left out (status from the run's files: `live=False`), so nothing is resumed."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sgsbatch.ops import control
    from sgsbatch.views.status import run_status

    h = recorded_run(tmp_path, "t")
    monkeypatch.setattr(control, "watch_step", lambda h: (run_status(h, live=False), None))
    control.watch(h, 0, lambda st, action: None, max_checks=2)
    assert not (h.paths.tb / "live_alerts").exists()  # no alarm raised: nothing written

    Shard(h.paths.phase_dir(0, "init"), 0).finish([], {})
    d = h.paths.phase_dir(0, h.cfg.phases_of_round(0)[1])
    stuck = Shard(d, 0)
    stuck.mark_started()
    stuck.append_item({"key": "p0"})
    os.utime(stuck.partial, (time.time() - 7200, time.time() - 7200))
    seen: list[int] = []

    def on_check(st: Any, action: str | None) -> None:
        seen.append(sum(a["metric"] == "alerts/stuck_shards" for a in st.alerts))
        if len(seen) == 2:
            stuck.append_item({"key": "p1"})  # progress again: the alarm clears at the next check

    control.watch(h, 0, on_check, max_checks=4)
    assert seen == [1, 1, 0, 0]
    acc = EventAccumulator(str(h.paths.tb / "live_alerts"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("alerts/stuck_shards")] == [(0, 1.0), (0, 0.0)]
    assert [(e.step, e.value) for e in acc.Scalars("alerts/verify_error_rate")] == [(0, 0.0), (0, 0.0)]
    assert not list(h.paths.tb.glob("events.*"))  # the round's own points are the round end's


def test_disk_projection_holds_a_re_sampling_window_of_whole_rounds(tmp_path: Path) -> None:
    """DAPO's re-sampling keeps `solver.rollout_max_gen_batches` rounds uncompacted (their groups may be carried):
    the projection counts that many whole rounds, not the two whole now."""
    from sgsbatch.config.loading import load_config
    from tests.runlib import TINY

    h = recorded_run(tmp_path, "t", executor="local")
    cfg = load_config(TINY, ["run.rounds=100", "solver.objective=dapo", "solver.rollout_prompts=4",
                             "solver.rollout_max_gen_batches=10"])
    assert cfg.solver.window_rounds() == 10
    for r, size in enumerate((100, 100, 100, 5000, 5000)):
        d = h.paths.round_dir(r) / "solve"
        d.mkdir(parents=True, exist_ok=True)
        (d / "shard_00000.jsonl").write_bytes(b"x" * size)
        if r < 3:
            (h.paths.round_dir(r) / "compacted").write_text("")
    inputs = sum(f.stat().st_size for f in (h.paths.root / "rounds").rglob("inputs.json"))
    du = disk_usage(cfg, h.paths, rounds_completed=4)
    db = du["used_bytes"]["database"]
    per_compacted = (300 + inputs) / 3
    # 11 whole at most (10 read by training + the round running) at 5000 each, 89 compacted
    assert du["projected_bytes"] == int(10000 + 9 * 5000 + per_compacted * 89 + db + db / 4 * 96)
