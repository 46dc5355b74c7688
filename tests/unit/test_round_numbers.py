"""One convention for round numbers wherever a person reads or types one (docs/operating.md): the round
as stored, 0-based (`rounds/r0002`, job names, `--round`), counts written as counts. A stalled run of
3 rounds whose round 2 has a shard out of retries: its status line, the stall reason, the `logs --round`
hint (run for real) and the `resume` hint all name round 2; `watch`'s line and the timing agree.
Not covered: `resume` itself (it starts the run's driver; its line is `control.resume_locked`'s)."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner
from sqlmodel import select

from sgsbatch.cli import console, main
from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.round.lifecycle import prepare_round
from sgsbatch.run.handle import create_run
from sgsbatch.run.shards import Shard
from sgsbatch.state.schema import Round, RunState
from sgsbatch.views.status import run_status

REPO = Path(__file__).resolve().parents[2]


def test_a_stalled_runs_line_reason_and_hints_name_the_same_round(tmp_path: Path) -> None:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=rn", "run.executor=local",
                                                    "run.rounds=3"])
    h = create_run(cfg, [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : True := by") for i in range(3)], "local")
    with h.db.write() as s:  # rounds 0 and 1 completed
        have = {r.index: r for r in s.exec(select(Round).where(Round.run_id == h.run_id)).all()}
        for i in (0, 1):
            row = have.get(i) or Round(run_id=h.run_id, index=i)
            row.state = "completed"
            s.add(row)
    prepare_round(h, 2)
    h.set_state(RunState.running)
    phase = h.cfg.phases_of_round(2)[0]
    Shard(h.paths.phase_dir(2, phase), 1).mark_failed(f"round 2 {phase} shard 1 failed 3 times; last: boom")

    st = run_status(h, live=False)
    assert (st.state, st.round, st.rounds_completed, st.phase) == ("stalled", 2, 2, phase)
    line = click.unstyle(console.status_line(st.to_json()))
    assert line.startswith(f"rn: stalled round 2 {phase} (2 of 3 rounds completed)"), line
    assert not re.search(r"round \d+ of \d+", line)  # never "round N of M"
    logs_hint = re.search(r"`(sgsbatch logs [^`]*)`", st.message)
    assert logs_hint and f"--round 2 --phase {phase}" in logs_hint.group(1), st.message
    assert "`sgsbatch resume rn" in st.message and "resubmits round 2's unfinished shards" in st.message
    named = {int(n) for n in re.findall(r"round (\d+)", line)} | {int(n) for n in re.findall(r"--round (\d+)", line)}
    assert named == {2}, line  # the line, the reason and both hints: round 2 only

    out = CliRunner().invoke(main, logs_hint.group(1).split()[1:])  # the hint, as a person would paste it
    assert f"round 2 {phase} shard 1" in out.output, out.output

    status = CliRunner().invoke(main, ["status", "rn", "--runs-dir", str(tmp_path)])
    assert status.exit_code == 0 and status.output.startswith(f"rn: stalled round 2 {phase} (2 of 3"), status.output


def test_counts_are_counts_and_the_running_round_is_its_index() -> None:
    assert console.rounds_text(2, 2, 3) == "round 2 (2 of 3 rounds completed)"
    assert console.rounds_text(2, 3, 3, completed=True) == "(3 of 3 rounds completed)"
    t = {"started_at": 0.0, "elapsed_s": 60.0, "current_round": 2, "current_s": 30.0}
    assert "round 2 running for 30s" in console.timing_text(t, "running")
    assert console.metrics_text({"x": 1.0}, 1)[0].startswith("  metrics of round 1 ")
