"""A run's frozen config.toml edited after launch is refused with what changed and how to go on;
`resume --set` changes the keys that may change (run.rounds extends a run, even a completed one).
The runs that `resume` then starts are exercised in tests/integration (not here)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.cli import main
from sgsbatch.ops.amend import amend
from sgsbatch.run.handle import open_run
from sgsbatch.state.schema import Phase, Round, Run, RunState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import recorded_run as make_run  # noqa: E402


def test_edited_config_is_refused_with_the_change_and_the_way_on(tmp_path: Path) -> None:
    h = make_run(tmp_path, "dr")
    text = h.paths.config.read_text()
    h.paths.config.write_text(text + "\n# a comment changes nothing\n")
    assert CliRunner().invoke(main, ["status", "dr", "--runs-dir", str(tmp_path)]).exit_code == 0
    h.paths.config.write_text(text.replace("rounds = 2", "rounds = 5"))
    for args in (["status", "dr"], ["resume", "dr"], ["cancel", "dr"]):
        res = CliRunner().invoke(main, [*args, "--runs-dir", str(tmp_path)])
        assert res.exit_code == 1, res.output
        assert "was edited after launch (run.rounds: 2 -> 5)" in res.stderr
        assert "--restore-config --force" in res.stderr and "--set run.rounds=5`" in res.stderr  # the edit, as a command
    edited = text.replace("rounds = 2", "rounds = 5").replace('solver = "tiny-random"', 'solver = "other"')
    h.paths.config.write_text(re.sub(r"(?m)^timeout_s = ", "timeout_s = 1", edited, count=1))
    err = CliRunner().invoke(main, ["status", "dr", "--runs-dir", str(tmp_path)]).stderr
    assert "--set run.rounds=5`" in err and "verification.timeout_s change the method" in err
    assert "models.solver (names the weights" in err and "cannot change on a live run" in err
    assert "unreadable" in CliRunner().invoke(main, ["status", "--runs-dir", str(tmp_path)]).stdout


def test_resume_set_refuses_other_keys_and_shrinking(tmp_path: Path) -> None:
    make_run(tmp_path, "am")
    for sets, words in ((["solver.lr=1e-3"], "--set solver.lr=1e-3: solver.lr: cannot change after launch"),
                        (["run.rounds=1"], "--set run.rounds=1: run.rounds: can only grow"),
                        (["run.rounds=0"], "--set run.rounds=0: run.rounds: must be")):
        res = CliRunner().invoke(main, ["resume", "am", "--runs-dir", str(tmp_path), *[x for s in sets for x in ("--set", s)]])
        assert res.exit_code == 2 and res.stderr.startswith(f"Error: {words}"), res.output


def test_extending_a_completed_run(tmp_path: Path) -> None:
    h = make_run(tmp_path, "ex")
    with h.db.write() as s:
        for rnd in s.exec(select(Round).where(Round.run_id == h.run_id)).all():
            rnd.state = "completed"
            s.add(rnd)
        s.add(Round(run_id=h.run_id, index=1, state="completed"))
        run = s.get(Run, h.run_id)
        assert run is not None
        run.state = RunState.completed
        s.add(run)
    h2, changes = amend(h, ["run.rounds=4"])
    assert changes == ["run.rounds: 2 -> 4"] and h2.cfg.run.rounds == 4
    again = open_run(tmp_path, "ex")  # no drift: the file and the database agree
    row = again.row()
    assert (row.rounds, row.state) == (4, RunState.running)
    with again.db.read() as s:
        assert s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == 2)).one().state == "pending"
        assert s.exec(select(Phase).where(Phase.run_id == h.run_id, Phase.round == 2)).all()
    res = CliRunner().invoke(main, ["status", "ex", "--runs-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0 and '"rounds": 4' in res.stdout
