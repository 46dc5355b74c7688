"""The run projected before launch (views/projection.py, views/plan.py): worked cases by hand, the
canary's figures, the critical path and the shard advice, `plan` and `launch --dry-run`, and the
projection against a run's completed rounds in `status` and the report."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.canary.record import save
from sgsbatch.cli import main
from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.config.validation import semantic_errors
from sgsbatch.round import metrics as M
from sgsbatch.state.schema import Metric, Round
from sgsbatch.views.plan import canary_figures, make_plan, plan_text
from sgsbatch.views.projection import FIGURES, advise, project, published, with_sets
from tests.runlib import TINY, recorded_run

# a round of known numbers: 100 targets, 50 conjectures, (100 + 50) x 4 = 600 samples of 1,000 tokens
# at 500 x 8000 / 1000 = 4,000 tokens/s per GPU (under the short-context cap of 5,000)
KNOWN = ["run.rounds=4", "solver.samples=4", "conjecturer.samples_per_target=1", "generation.max_model_len=8000",
         "shards.conjecture=1", "shards.solve=2", "shards.guide=1", "shards.verify=0",
         "slurm.conjecture.gpus=1", "slurm.conjecture.cpus=4", "slurm.solve.gpus=2", "slurm.solve.cpus=8",
         "slurm.guide.gpus=1", "slurm.guide.cpus=4", "slurm.verify.cpus=10", "slurm.train.gpus=4",
         "slurm.train.cpus=16", "slurm.train.nodes=1",
         "projection.unsolved_share=0.5", "projection.reviewed_share=0.2", "projection.trained_share=0.1",
         "projection.mean_tokens=1000", "projection.prompt_tokens=0", "projection.decode_short_tokens_per_s=5000",
         "projection.decode_long_tokens_per_s=500", "projection.lean_proofs_per_s=0.5", "projection.repl_start_s=10",
         "projection.model_load_s=100", "projection.train_tokens_per_s=1000", "projection.checkpoint_write_s=20",
         "projection.queue_wait_s=50", "projection.gpu_budget=8", "projection.cpu_budget=80",
         "verification.streaming=false"]  # phases one after another (streaming: its own test)


def known(tmp_path: Path, *more: str) -> Config:
    return load_config(TINY, [*KNOWN, f"run.runs_dir={tmp_path}", *more])


def test_a_round_of_known_numbers_projects_to_hours_worked_by_hand(tmp_path: Path) -> None:
    cfg = known(tmp_path)
    p = project(cfg, 100, published(cfg))
    walls = {ph.phase: (ph.items, ph.task_s, ph.wall_s) for ph in p.phases}
    by_hand = {
        "conjecture": (50, 100 + 50_000 / 4000, 50 + 112.5),  # one task: load + 50k tokens at 4,000 tokens/s
        "solve": (600, 100 + 300_000 / 8000, 50 + 137.5),  # two tasks of 2 GPUs: 300k tokens each at 8,000
        "verify": (600, 10 + 300 / 5, 50 + 70.0),  # two tasks of 10 cores at 0.5: 300 proofs each, one REPL start
        "guide": (10, 100 + 10_000 / 4000, 50 + 102.5),  # 50 x 0.2 reviews
        "train": (70, 2 * (100 + 20) + 70_000 / 4000, 50 + 257.5),  # 60 + 10 sequences, two roles loaded and saved
    }
    assert list(walls) == list(by_hand)
    for phase, want in by_hand.items():
        assert walls[phase] == pytest.approx(want), phase
    assert p.round_s == pytest.approx(930.0) and p.run_days == pytest.approx(4 * 930 / 86400)
    solve = p.phase("solve")
    assert solve is not None and solve.gpu_hours == pytest.approx(2 * 2 * 137.5 / 3600)
    assert solve.cpu_hours == pytest.approx(2 * 8 * 137.5 / 3600)
    assert p.hours("cpu") == pytest.approx((4 * 112.5 + 2 * 8 * 137.5 + 2 * 10 * 70 + 4 * 102.5 + 16 * 257.5) / 3600)
    assert [x.phase for x in p.projected] == ["conjecture", "solve", "verify", "guide", "train"]
    crit = p.critical
    assert crit is not None and crit.phase == "train"  # the chain's longest phase


def test_the_kl_reference_and_recomputed_old_logprobs_add_scoring_passes_to_train(tmp_path: Path) -> None:
    """GRPO with kl_beta > 0 and recomputed old log-probs: the family trains every group (all 600 of the
    Solver's samples, not trained_share's 60), and two forward-only passes over them at scoring_pass_share
    0.25 (300k tokens at 4,000 tokens/s) and one more model load (the reference's) on the known round
    above; either alone is one pass, neither none."""
    from sgsbatch.views.projection import scoring_passes

    base = ["solver.objective=grpo", "projection.scoring_pass_share=0.25"]
    both = known(tmp_path, *base, "solver.kl_beta=0.04", "train.old_logprobs=recompute")
    train = project(both, 100, published(both)).phase("train")
    assert train is not None and train.tokens == pytest.approx(610_000)  # 600 samples + the Guide's 10 reviews
    assert train.task_s == pytest.approx(2 * (100 + 20) + 100 + (610_000 + 300_000) / 4000)
    assert scoring_passes(both) == 2
    assert scoring_passes(known(tmp_path, *base, "train.old_logprobs=recompute")) == 1
    assert scoring_passes(known(tmp_path, *base, "solver.kl_beta=0.04")) == 1
    assert scoring_passes(known(tmp_path, *base)) == 0
    assert scoring_passes(known(tmp_path, "train.old_logprobs=recompute")) == 0  # REINFORCE has no ratio


def test_streaming_verify_is_on_the_path_only_after_solve_worked_by_hand(tmp_path: Path) -> None:
    """Verify streaming behind solve: on the path, the later of its excess over solve and the last
    problem's proofs (4 samples on 10 cores at 0.5 proofs/s: one proof, 2 s); its CPUs held all along."""
    cfg = known(tmp_path, "verification.streaming=true")
    p = project(cfg, 100, published(cfg))
    verify = p.phase("verify")
    # its span: from solve's start (with the same queue wait) to solve's end + the last problem's proofs
    assert verify is not None and verify.wall_s == pytest.approx(187.5 + 2) and verify.on_path_s == pytest.approx(2)
    assert p.round_s == pytest.approx(930 - 120 + 2)
    assert verify.cpu_hours == pytest.approx(2 * 10 * (137.5 + 2) / 3600)  # from solve's start to its end + 2 s
    assert verify.to_json()["path_s"] == pytest.approx(2)
    slow = known(tmp_path, "verification.streaming=true", "projection.lean_proofs_per_s=0.05")
    verify = project(slow, 100, published(slow)).phase("verify")  # a task: 10 + 300 / 0.5 = 610 s, wall 660 s
    assert verify is not None and verify.on_path_s == pytest.approx(660 - 187.5 + 20)  # one proof: 20 s
    assert verify.wall_s == pytest.approx(660)
    text = plan_text(make_plan(cfg, 100))
    assert "streams behind solve: 2s after solve's end" in text
    # solve decodes 600 proofs in 187.5 - 50 (queue) - 100 (load) = 37.5 s: 16 a second, 32 cores at 0.5
    assert "verify streams behind solve: 32 Lean cores keep pace with its decoding; this config holds 20 (2 x 10)\n" \
        in text + "\n"
    many = known(tmp_path, "verification.streaming=true", "slurm.verify.cpus=40")
    assert "holds 80 (2 x 40), idle while they wait for proofs" in plan_text(make_plan(many, 100))
    assert "keep pace" not in plan_text(make_plan(known(tmp_path), 100))  # streaming off: no such line


def test_decode_rate_falls_with_context_and_waves_follow_array_parallelism(tmp_path: Path) -> None:
    cfg = known(tmp_path, "projection.prompt_tokens=3000", "slurm.solve.array_parallelism=1")
    p = project(cfg, 100, published(cfg))
    solve = p.phase("solve")
    assert solve is not None and solve.rate == pytest.approx(2 * 500 * 8000 / 4000)  # context 4,000: 1,000 per GPU
    assert solve.wall_s == pytest.approx(50 + 2 * (100 + 300_000 / 2000))  # two waves of one task
    short = known(tmp_path, "projection.mean_tokens=100")
    ph = project(short, 100, published(short)).phase("solve")
    assert ph is not None and ph.rate == 2 * 5000  # 500 x 8000 / 100 would be 40k: capped by the short figure


def test_verify_pays_a_repl_start_per_max_proofs_per_process(tmp_path: Path) -> None:
    cfg = known(tmp_path, "verification.max_proofs_per_process=7")
    ph = project(cfg, 100, published(cfg)).phase("verify")
    assert ph is not None and ph.startup_s == 5 * 10  # 30 proofs a core, a fresh REPL every 7: 5 starts


def test_without_a_conjecturer_and_on_cpus_phases_are_left_out_or_unprojected(tmp_path: Path) -> None:
    cfg = known(tmp_path, "conjecturer.enabled=false", "slurm.train.gpus=0")
    p = project(cfg, 100, published(cfg))
    assert [x.phase for x in p.phases] == ["solve", "verify", "train"]
    assert p.not_projected == ["train"] and p.round_s == pytest.approx(
        (50 + 100 + 400 * 1000 / 2 / 8000) + (50 + 10 + 200 / 5))
    tiny = load_config(TINY, [f"run.runs_dir={tmp_path}"])
    assert project(tiny, 12, published(tiny)).not_projected == ["conjecture", "solve", "guide", "train"]


def test_the_advice_shards_the_longest_shardable_phase_within_the_gpu_budget(tmp_path: Path) -> None:
    cfg = known(tmp_path)
    adv = advise(cfg, 100, published(cfg))
    # train is longest but one job; solve next: 8 GPUs / 2 a task = 4 tasks at most. 3 tasks: 175 s,
    # 4 tasks: 168.75 s; 3 is within advice_margin (5%) of the shortest, and costs one start-up less
    assert adv is not None and (adv.longest, adv.phase, adv.resource, adv.budget) == ("train", "solve", "GPU", 8)
    assert adv.sets == {"shards.solve": 3} and adv.set_args() == "--set shards.solve=3"
    # shards.verify = 0: verify follows solve to 3 tasks, 200 proofs each: 10 + 200 / 5 = 50 s a task
    assert adv.after is not None and adv.after.round_s == pytest.approx(930 - 187.5 + 175 - 120 + 100)
    assert adv.after == project(with_sets(cfg, adv.sets), 100, published(cfg))
    at_budget = known(tmp_path, "projection.gpu_budget=4")
    adv = advise(at_budget, 100, published(at_budget))
    assert adv is not None and adv.after is None and adv.sets == {}
    assert "more shards would not shorten it (`--set projection.gpu_budget=8` shows" in plan_text(
        make_plan(at_budget, 100))


def test_the_gpu_budget_defaults_to_the_train_jobs_gpus(tmp_path: Path) -> None:
    cfg = known(tmp_path, "projection.gpu_budget=0", "slurm.train.gpus=8", "slurm.train.nodes=2")
    adv = advise(cfg, 100, published(cfg))
    assert adv is not None and adv.budget == 16


def test_verify_as_the_critical_path_gets_multiples_of_solve_within_the_cpu_budget(tmp_path: Path) -> None:
    cfg = known(tmp_path, "projection.lean_proofs_per_s=0.05")
    adv = advise(cfg, 100, published(cfg))
    # verify: 2 tasks of 10 CPUs, 610 s each; 80 CPUs allow 8 tasks in steps of 2 solve tasks: 4 -> 310 s,
    # 6 -> 210 s, 8 -> 160 s: only 8 is within 5% of the shortest
    assert adv is not None and (adv.longest, adv.phase, adv.resource) == ("verify", "verify", "CPU")
    assert adv.sets == {"shards.verify": 8}
    assert adv.after is not None and adv.after.phase("verify").wall_s == 50 + 160  # type: ignore[union-attr]
    assert not semantic_errors(with_sets(cfg, adv.sets))


def test_solve_advice_keeps_a_set_verify_count_a_multiple_of_solve(tmp_path: Path) -> None:
    cfg = known(tmp_path, "shards.verify=8", "slurm.train.gpus=1", "projection.gpu_budget=10",
                "slurm.solve.gpus=1")
    adv = advise(cfg, 100, published(cfg))
    # solve: 150 + 150 / n s (n tasks of 1 GPU, 10 at most); 10 -> 165 s, 7 -> 171.4 s is within 5%, 6 is not.
    # verify (8 tasks of 10 CPUs) goes up to 14, a multiple of 7, unless 80 CPUs allow only 7 tasks
    assert adv is not None and adv.phase == "solve" and adv.sets == {"shards.solve": 7, "shards.verify": 7}
    assert not semantic_errors(with_sets(cfg, adv.sets))
    roomy = known(tmp_path, "shards.verify=8", "slurm.train.gpus=1", "projection.gpu_budget=10",
                  "slurm.solve.gpus=1", "projection.cpu_budget=1000")
    adv = advise(roomy, 100, published(roomy))
    assert adv is not None and adv.sets == {"shards.solve": 7, "shards.verify": 14}


def _canary(runs: Path, cfg: Config, ok: bool = True, **measures: dict[str, float]) -> None:
    rows = [{"component": "x", "check": name, "ok": ok, "figure": "", "fix": "", "shape": "", "measures": m}
            for name, m in measures.items()]
    save(runs, cfg, rows, {"python": "3", "packages": {}}, ["1"])


def test_a_passed_canarys_measurements_replace_the_published_figures(tmp_path: Path) -> None:
    cfg = known(tmp_path, "checkpoints.estimate_gb_per_role=10")
    figures, note = canary_figures(cfg, published(cfg))
    assert figures == published(cfg) and note.startswith("no passed canary")
    _canary(tmp_path, cfg, solver={"model_load_s": 80.0, "decode_tokens_per_s_per_gpu": 6000.0},
            conj={"model_load_s": 120.0, "decode_tokens_per_s_per_gpu": 7000.0},
            lean={"repl_start_s": 4.0, "lean_proofs_per_s": 0.9}, train={"checkpoint_bytes_per_s": 2e9})
    other = known(tmp_path, "checkpoints.estimate_gb_per_role=10", "shards.solve=4")  # same throughput, other shards
    figures, note = canary_figures(other, published(other))
    assert figures["model_load_s"] == 100.0 and figures["repl_start_s"] == 4.0  # measured, as measured
    assert figures["checkpoint_write_s"] == 5.0  # 10 GB at 2 GB/s
    assert figures["decode_short_tokens_per_s"] == 6500.0  # its few sequences: a floor over the published 5,000
    assert figures["lean_proofs_per_s"] == 0.5  # its easy proofs: a ceiling, above the published 0.5
    assert figures.sources["model_load_s"].startswith("canary ") and "measured" in figures.sources["model_load_s"]
    assert figures.sources["queue_wait_s"].startswith("published")
    assert "its figures used: model_load_s, repl_start_s, checkpoint_write_s, decode_short_tokens_per_s" in note
    p = make_plan(other, 100).projection
    assert p.phase("conjecture").task_s == 100 + 50_000 / 4000  # type: ignore[union-attr]  # min(6500, 4000)
    text = plan_text(make_plan(other, 100))
    assert "figures, canary " in text and "model_load_s=100" in text


def test_a_canary_rows_measures_survive_its_record() -> None:
    from sgsbatch.canary.rows import Row

    row = Row("verification", "speed", True, "header 4.0 s", measures={"repl_start_s": 4.0})
    assert Row.from_dict(json.loads(json.dumps(row.as_dict()))) == row
    assert Row.from_dict({"component": "x", "check": "y", "ok": True}).measures == {}  # a record from before


def test_a_failed_canary_or_one_of_other_models_is_not_read(tmp_path: Path) -> None:
    cfg = known(tmp_path)
    _canary(tmp_path, cfg, ok=False, solver={"model_load_s": 1.0})
    _canary(tmp_path, known(tmp_path, "models.solver=other/model"), solver={"model_load_s": 2.0})
    figures, note = canary_figures(cfg, published(cfg))
    assert figures["model_load_s"] == 100.0 and note.startswith("no passed canary")


def test_plan_json_has_the_projection_figures_and_advice(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["plan", str(TINY), "--json", "--runs-dir", str(tmp_path),
                                    *(a for s in KNOWN for a in ("--set", s))])
    assert res.exit_code == 0, res.output
    d: dict[str, Any] = json.loads(res.stdout)
    assert {"targets", "targets_from", "rounds", "phases", "path", "critical_phase", "not_projected", "round_s",
            "round_gpu_hours", "round_cpu_hours", "run", "figures", "canary", "advice"} <= set(d)
    assert d["targets"] == 12 and d["targets_from"].endswith("tiny_targets.jsonl") and d["rounds"] == 4
    assert set(d["run"]) == {"days", "gpu_hours", "cpu_hours"} and set(d["figures"]) == set(FIGURES)
    assert [p["phase"] for p in d["phases"]] == d["path"] == ["conjecture", "solve", "verify", "guide", "train"]
    assert {"shards", "gpus", "cpus", "items", "tokens", "rate", "task_s", "wall_s", "gpu_hours", "cpu_hours"} <= set(
        d["phases"][0])
    adv = d["advice"]
    assert adv["phase"] == "solve" and adv["set_args"].startswith("--set shards.solve=")
    # the advice runs as printed: the same plan with its --set gives the round it promised
    again = CliRunner().invoke(main, ["plan", str(TINY), "--json", "--runs-dir", str(tmp_path),
                                      *(a for s in KNOWN for a in ("--set", s)), *adv["set_args"].split()])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["round_s"] == pytest.approx(adv["round_s"])


def test_plan_of_a_hub_dataset_assumes_hub_targets_and_names_it(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["plan", str(TINY.parent / "sgs.toml"), "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "projection: 200 rounds of 3,323 targets (projection.hub_targets: data.source" in res.stdout
    assert "longest solve" in res.stdout and "run: 200 rounds = " in res.stdout and "advice: solve" in res.stdout


def test_launch_dry_run_prints_the_projection(tmp_path: Path) -> None:
    args = ["launch", str(TINY), "--dry-run", "--set", f"run.runs_dir={tmp_path}", "--set", "run.executor=local",
            *(a for s in KNOWN for a in ("--set", s))]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "checkpoints: " in out and "dry run: nothing created, nothing submitted" in out  # as before
    assert "projection: 4 rounds of 12 targets" in out and "critical path conjecture -> solve -> verify" in out
    assert "advice: train is the longest phase" in out and "`--set shards.solve=" in out
    assert "figures, published" in out and "canary figures: no passed canary" in out


def test_status_and_the_report_show_projected_against_actual(tmp_path: Path) -> None:
    from sgsbatch.run.handle import open_run
    from sgsbatch.views.report import run_section

    h = recorded_run(tmp_path, "t")
    with h.db.write() as s:
        r0 = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == 0)).one()
        r0.state, r0.started_at, r0.completed_at = "completed", 1000.0, 1000.0 + 900.0
        s.add(r0)
        s.add(Metric(run_id=h.run_id, round=0, name=M.CUMULATIVE_SOLVE_RATE, value=0.5))
        s.add(Metric(run_id=h.run_id, round=0, name=M.wall_s("verify"), value=400.0))
    res = CliRunner().invoke(main, ["status", "t", "--runs-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    c = json.loads(res.stdout)["projection"]
    want = project(h.cfg, 3, published(h.cfg))
    queue = h.cfg.projection.queue_wait_s
    assert c["round_s"] == pytest.approx(want.round_s - queue) and c["critical_phase"] == "verify"
    assert c["rounds"] == {"0": {"projected_s": pytest.approx(want.round_s - queue), "actual_s": 900.0}}
    assert c["phases"]["verify"]["actual_s"] == 400.0 and c["actual_mean_s"] == 900.0
    text = CliRunner().invoke(main, ["status", "t", "--runs-dir", str(tmp_path)]).stdout
    assert "  projection: projected " in text and "actual 15m00s a round over 1" in text and "verify " in text
    page, data = run_section(open_run(tmp_path, "t", readonly=True))
    assert data["projection"]["rounds"][0]["actual_s"] == 900.0 and "Projection (sgsbatch plan): projected" in page
    # one truth: its driver is not alive, so status says stalled, and so does the report, with no finish time
    assert json.loads(res.stdout)["state"] == data["state"] == "stalled"
    assert "State: stalled." in page and "stalled: no projected finish" in page and "projected finish in" not in page
    # `plan RUN`: the launched run's own config, its 3 targets, and the same comparison
    planned = CliRunner().invoke(main, ["plan", "t", "--runs-dir", str(tmp_path)])
    assert planned.exit_code == 0, planned.output
    assert planned.stdout.startswith(f"projection: {h.cfg.run.rounds} rounds of 3 targets")
    assert "  against its 1 completed rounds: projected " in planned.stdout and "actual 15m00s a round" in planned.stdout
    as_json = json.loads(CliRunner().invoke(main, ["plan", str(tmp_path / "t"), "--json"]).stdout)
    assert as_json["targets"] == 3 and as_json["round_s"] == pytest.approx(want.round_s)
    for args, says in ((["plan", "t", "--runs-dir", str(tmp_path), "--set", "run.rounds=9"], "is a run, not a jobs file"),
                       (["plan", "nope", "--runs-dir", str(tmp_path)], "nope is neither a jobs file nor a launched run")):
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 2 and says in refused.output, refused.output


def test_launch_dry_run_of_sgs_toml_prints_its_run(tmp_path: Path, ready_machine: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ready_machine.apply(monkeypatch)
    res = CliRunner().invoke(main, ["launch", str(TINY.parent / "sgs.toml"), "--dry-run", "--set",
                                    f"run.runs_dir={tmp_path}", "--set", "run.executor=local",
                                    *(a for s in ready_machine.sets for a in ("--set", s))])
    assert res.exit_code == 0, res.output
    cfg = load_config(TINY.parent / "sgs.toml", [f"run.runs_dir={tmp_path}"])
    p = project(cfg, 3323, published(cfg))
    assert f"run: 200 rounds = {p.run_days:.1f} days" in res.stdout and "longest solve" in res.stdout
    assert "pre-flight passed:" in res.stdout and res.stdout.index("pre-flight") < res.stdout.index("projection:")


def test_the_comparison_line_gives_a_ratio_only_for_a_whole_projection() -> None:
    from sgsbatch.views.plan import comparison_text

    c = {"round_s": 1000.0, "critical_phase": "solve", "run_days": 2.3, "run_gpu_hours": 620.0, "not_projected": [],
         "rounds": {0: {}, 1: {}}, "actual_mean_s": 1200.0,
         "phases": {"solve": {"projected_s": 400.0, "actual_s": 500.0},
                    "guide": {"projected_s": 60.0, "actual_s": None}}}
    assert comparison_text(c) == ("projected 16m40s a round (longest solve), 2.3 days, 620 GPU-hours; actual 20m00s a "
                                  "round over 2 (+20%); last round projected/actual: solve 6m40s/8m20s")
    partial = comparison_text({**c, "not_projected": ["train"]})
    assert "without train (no GPUs: not projected)" in partial and "%" not in partial
    assert comparison_text({**c, "actual_mean_s": None, "rounds": {}}).endswith("; no round completed yet")


def test_each_completed_round_is_projected_with_the_shard_counts_it_ran_with(tmp_path: Path) -> None:
    from sgsbatch.ops.amend import amend
    from sgsbatch.run.amendments import config_at
    from sgsbatch.views.plan import run_projection

    h = recorded_run(tmp_path, "t")
    h, _ = amend(h, ["run.rounds=3"])
    h, _ = amend(h, ["shards.solve=4"], method_change=True, from_round=1)
    timing = {"round_s": {0: 600.0, 1: 500.0}}
    c = run_projection(h, 3, timing, {})
    want = [project(config_at(h.cfg, h.paths, r), 3, published(h.cfg)).round_s - 60.0 for r in (0, 1)]
    assert [c["rounds"][r]["projected_s"] for r in (0, 1)] == pytest.approx(want) and want[0] != want[1]
    assert c["actual_mean_s"] == 550.0


def test_the_same_run_on_the_reference_layout_worked_by_hand(tmp_path: Path) -> None:
    """The known round on one node of the train job's 4 GPUs and 16 CPUs holding every phase: each
    generating phase an engine start + its tokens on 4 GPUs at 4,000 tokens/s; verify 600 proofs on 16
    cores at 0.5 (37.5 a core, one REPL start of 10 s); train as projected; GPUs held throughout."""
    cfg = known(tmp_path, "verification.max_proofs_per_process=100")
    p = project(cfg, 100, published(cfg))
    ref = p.reference
    assert ref is not None and (ref.gpus, ref.cpus) == (4, 16)
    assert ref.phase_s == pytest.approx({"conjecture": 100 + 50_000 / 16_000, "solve": 100 + 600_000 / 16_000,
                                         "verify": 10 + 37.5 / 0.5, "guide": 100 + 10_000 / 16_000,
                                         "train": 2 * (100 + 20) + 70_000 / 4000})
    assert ref.round_s == pytest.approx(683.75) and ref.gpu_hours == pytest.approx(4 * 4 * 683.75 / 3600)
    text = plan_text(make_plan(cfg, 100))
    assert "the reference's layout (one node of 4 GPUs and 16 CPUs" in text
    assert f"this layout: {4 * p.hours('gpu') / ref.gpu_hours:.2f}x its GPU-hours" in text
    assert project(known(tmp_path, "solver.mode=search"), 100, published(cfg)).reference is None  # none there


def test_no_advice_on_part_of_a_round_and_never_more_tasks_than_problems(tmp_path: Path) -> None:
    """The tiny config (no GPUs: only verify is projected) gets no shard advice, not one that makes its
    one projected phase look like the round; and no phase is advised more tasks than it has problems."""
    tiny = load_config(TINY, [f"run.runs_dir={tmp_path}"])
    p = make_plan(tiny, 12)
    assert p.advice is None and p.projection.not_projected
    assert "advice: none (conjecture, solve, guide, train not projected" in plan_text(p)
    # 3 targets + 2 conjectures: verify (the critical phase at 0.001 proofs/s) gets at most 5 tasks
    cfg = known(tmp_path, "projection.lean_proofs_per_s=0.001")
    adv = advise(cfg, 3, published(cfg))
    assert adv is not None and adv.phase == "verify" and adv.after is not None
    assert adv.sets["shards.verify"] <= 3 + math.ceil(3 * 0.5 * 1)


def test_a_carried_optimizer_state_is_written_every_round(tmp_path: Path) -> None:
    """train.optimizer = "carry": each trained role also writes its AdamW state (ZeRO-2, bf16: Adam's two
    fp32 moments and the fp32 master, 12 bytes a parameter, and DeepSpeed's bf16 module copy, 2: 7x the
    bf16 weights' 2), so the known round's train job adds 2 roles x 7 x checkpoint_write_s (20 s)."""
    from sgsbatch.views.projection import optimizer_write_factor

    carry = known(tmp_path, "train.optimizer=carry", "train.zero_stage=2", "train.bf16=true")
    fresh = known(tmp_path, "train.zero_stage=2", "train.bf16=true")
    assert optimizer_write_factor(carry) == pytest.approx(7.0) and optimizer_write_factor(fresh) == 0.0
    t_carry, t_fresh = (project(c, 100, published(c)).phase("train") for c in (carry, fresh))
    assert t_carry is not None and t_fresh is not None and t_carry.task_s is not None and t_fresh.task_s is not None
    assert t_carry.task_s - t_fresh.task_s == pytest.approx(2 * 7 * 20)
