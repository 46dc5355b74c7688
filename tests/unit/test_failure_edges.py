"""Failures a new user meets at the edges (issue 41's audit): each is one clean line that names the file or
the round and what to do, exits non-zero and loses nothing.

- `eval --round N` of a completed round whose Solver weights retention deleted: refused (exit 2) naming the
  checkpoint and the rounds whose weights are kept, before anything is sampled (also with --submit); a set
  already evaluated for that round is still shown from its files; one whose summary.json is damaged is named,
  with the `eval ... --force` that evaluates it again (was a JSONDecodeError traceback).
- a run file sgsbatch wrote whole that no longer reads (not JSON, not UTF-8: targets.jsonl, a round's inputs.json,
  a marker): `rebuild --force` fails naming it and leaves state.db as it was (was a JSONDecodeError traceback);
  a damaged `conjectures.jsonl` (a cache of the conjecture shards) is derived again, not half-read (a KeyError
  traceback); a log line that is not UTF-8 is a bad line to the tolerant JSON-lines reader (it raised).
- a full disk: a copy's error names its destination (what was written), not its source (fork named the
  parent's file); a command with --out/--plot names that output and its file system's free space, not the
  runs directory's; a helper thread's full disk (TensorBoard's writer) prints no traceback beside the line.
- an output written on a full disk is written whole or not at all: `metrics --out`, `report --out`, `fit --plot`
  (through run/shards.atomic_write_bytes, whose temp file goes too) keep an earlier file as it was (metrics
  truncated it; report left its .tmp); `export --force` keeps the earlier export until the new one is complete
  (it deleted it first) and leaves no directory of its own behind.
- `export --push-to-hub` of a repo id the Hub refuses is refused (exit 2) before the export is written (it
  wrote the export, then failed with an `hf upload` hint of the bad name); the hint quotes the repo and path.
- a fork of a SIMULATED trunk with the Lean verifier (a change of method from its first own round) labels the
  trunk's proofs and conjectures SIMULATED as they ran, in `proofs` rows and exported rows and the card (every
  row took the run's current label: the inherited SIMULATED proofs read as Lean-checked).
- `status` shows the newest evaluated round's eval/<set>/pass@<k> values (and `status --json` each evaluated
  round's): they were only in the last completed round's metrics, which an evaluation job beside the chain
  never is by the time it ends.
- `plan RUN` and `config show RUN` with $SGSBATCH_SITE exported (README's set-up does) work: only a typed
  --site (or --set) is refused for a run; `plan NAME --set ...` of no jobs file and no run says so (it said
  "NAME is a run").
- `fit` of a tiny run (every point far below scaling.min_generations) advises the lower threshold too, not
  only more rounds (which never reach 100,000 generations at ~100 a round), as commands for this run (not
  `sgsbatch resume RUN`).
- a fork whose inherited round holds a corrupt shard file says so when it is launched (its rebuild quarantined
  the fork's copy, silently: only `status` of the fork showed it).
- `resume` of a run stalled on a full disk (free space under alerts.min_free_mb) is refused naming the disk, its
  free space and path (it said "resubmitted" and the run stalled again at once); --force resubmits anyway.
- `rebuild` restores held-out evaluation's eval/<set>/pass@<k> from eval/rNNNN/<set>/summary.json (a rebuilt
  database had none: status said "round 1 done" without values, metrics and the report had nothing).
- `cancel` on a full disk stops the run's jobs even though the cancellation cannot be recorded, and says so
  (it failed before stopping anything: a run filling its disk could not be stopped); a lock's holder line that
  does not fit on the disk is left unsaid, the lock is held all the same (every command failed to take it).
- a fork's forked_from.json damaged into other JSON (a string, a round that is no number) reads as unreadable,
  like one that is not JSON (status and the report failed with a TypeError or ValueError traceback).
- `eval --submit` of a round whose evaluation job is still queued or running is refused naming the job and how
  to stop it (a second job wrote the same files, and job.json forgot the first, so `cancel` no longer stopped it).
- `verify --set` and `config show --set` (no jobs file) blame a bad key on the --set that gave it, as `launch`
  does (they said "--set: nope: unknown key").
- an output path inside a run directory is refused before any work, by every command with one (`report --out
  runs/t/state.db` replaced the run's database with the page).
- the report lists the run's quarantined shard files as `status` does (it said nothing of them).
Not covered here: evaluating for real (tests/integration/test_eval.py).
"""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlmodel import select

from sgsbatch.cli import main
from sgsbatch.cli.command_line import clean_errors
from sgsbatch.errors import DamagedFile, disk_full_message
from sgsbatch.round.results import conjecture_problems, round_inputs, run_targets
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.shards import Shard
from sgsbatch.state.schema import Round
from tests.runlib import recorded_run


def _run(args: list[str]) -> Result:
    res = CliRunner().invoke(main, args)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args!r} raised {res.exception!r}") from res.exception
    return res


def _complete_round(h, r: int) -> None:  # type: ignore[no-untyped-def]
    with h.db.write() as s:
        row = s.exec(select(Round).where(Round.run_id == h.run_id, Round.index == r)).one()
        row.state = "completed"
        s.add(row)


def test_eval_of_a_round_whose_weights_are_gone_names_the_checkpoint_and_the_kept_rounds(tmp_path: Path) -> None:
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps({"id": "h0", "header": "import Mathlib\n", "theorem": "theorem h0 : True := by"}) + "\n")
    h = recorded_run(tmp_path, "t", sets=[f"eval.sets.mini={held}"])
    _complete_round(h, 0)
    r = ["eval", "t", "--runs-dir", str(tmp_path), "--round", "0"]
    for extra in ([], ["--submit"], ["--set", "mini", "--json"]):
        res = _run([*r, *extra])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output
        assert f"--round 0: the Solver's weights after round 0 are missing or incomplete at " \
               f"{h.paths.checkpoint(0, 'solver')}" in res.stderr and "(none is kept)" in res.stderr, res.stderr
        assert not h.paths.eval_round_dir(0).exists(), "nothing written, nothing submitted"
    kept = h.paths.checkpoint(1, "solver")  # a later round's weights, complete: named as the one to evaluate
    kept.mkdir(parents=True)
    (kept / "SGSBATCH_COMPLETE").write_text("")
    assert "evaluate a round whose checkpoint is kept: --round 1" in _run(r).stderr
    where = h.paths.eval_dir(0, "mini")  # evaluated before retention deleted the weights: shown from its files
    where.mkdir(parents=True)
    (where / "summary.json").write_text(json.dumps({"set": "mini", "round": 0, "problems": 1, "samples": 8,
                                                    "pass_at_k": {"1": 0.5}, "simulated": "verifier", "solved": 1}))
    h.paths.eval_done(0, "mini").write_text("1\n")
    res = _run(r)
    assert res.exit_code == 0 and "pass@1 0.500" in res.stdout and "(stored; --force samples again)" in res.stdout
    assert _run([*r, "--force"]).exit_code == 2, "sampling again needs the weights"


def test_a_damaged_run_file_is_named_and_rebuild_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    h.db.close()
    before = h.paths.db.read_bytes()
    good = h.paths.targets.read_bytes()
    for damage in (b"\x00\x01garbage{{\n", b'{"id": "t0"}\n', good[:10] + b"\xff\xfe" + good[10:]):
        h.paths.targets.write_bytes(damage)
        res = _run(["rebuild", "t", "--runs-dir", str(tmp_path), "--force"])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert res.stderr.startswith(f"Error: {h.paths.targets} is damaged (") and "restore it from a backup" in res.stderr
        assert h.paths.db.read_bytes() == before and not list(h.paths.root.glob(".state.db.rebuilding-*"))
    h.paths.targets.write_bytes(good)
    h.paths.round_inputs(0).write_text('{"round": 0, "solve_tar')
    with pytest.raises(DamagedFile, match=str(h.paths.round_inputs(0))):
        round_inputs(h.paths, 0)
    cache = h.paths.round_dir(0) / "conjectures.jsonl"
    for i in range(h.cfg.shard_count("conjecture")):
        Shard(h.paths.phase_dir(0, "conjecture"), i).finish([])
    derived = conjecture_problems(h.cfg, h.paths, 0, run_targets(h.paths))
    cache.write_text('{"problem_id": "c0-1", "header": "x"}\n{"problem_id": "c0-2", "hea')
    assert conjecture_problems(h.cfg, h.paths, 0, run_targets(h.paths)) == derived  # derived again
    assert read_jsonl(cache) == [json.loads(line) for line in cache.read_text().splitlines()], "rewritten whole"


def test_a_log_line_that_is_not_utf8_is_a_bad_line(tmp_path: Path) -> None:
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b'{"a": 1}\n{"a": "\xff\xfe"}\n\n{"a": 2}\n')
    assert read_jsonl(log) == [{"a": 1}]
    assert read_jsonl(log, past_bad_lines=True) == [{"a": 1}, {"a": 2}]


def test_a_full_disk_names_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = tmp_path / "parent" / "targets.jsonl", tmp_path / "child" / "targets.jsonl"
    line = disk_full_message(OSError(errno.ENOSPC, "No space left on device", str(src), None, str(dst)))
    assert line.startswith(f"the disk is full: writing {dst} failed") and str(src) not in line
    h = recorded_run(tmp_path / "runs", "t")
    out = tmp_path / "elsewhere" / "t.html"

    def full(*_args: object, **_kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() says it: no file name

    monkeypatch.setattr("sgsbatch.views.report.write_report", full)
    res = _run(["report", "t", "--runs-dir", str(h.paths.root.parent), "--out", str(out)])
    assert res.exit_code == 1 and res.stderr.startswith(f"Error: the disk is full: writing {out} failed"), res.stderr

    hooks = []

    @clean_errors
    def writes_in_a_thread() -> None:
        hooks.append(threading.excepthook)

        def tensorboard_writer() -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        t = threading.Thread(target=tensorboard_writer)
        t.start()
        t.join()
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "tb" / "events"))

    with pytest.raises(SystemExit) as e:
        writes_in_a_thread()
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" not in err and err.startswith("Error: the disk is full: writing "), err
    full_disk = OSError(errno.ENOSPC, "No space left on device")
    hooks[0](threading.ExceptHookArgs((OSError, full_disk, None, None)))  # the hook the command ran under
    assert capsys.readouterr().err == ""
    hooks[0](threading.ExceptHookArgs((ValueError, ValueError("a bug"), None, None)))
    assert "ValueError: a bug" in capsys.readouterr().err, "any other thread error is printed as before"


def test_an_output_that_does_not_fit_leaves_the_earlier_one_as_it_was(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from sgsbatch.ops import export as E

    h = recorded_run(tmp_path / "runs", "t")
    r = ["--runs-dir", str(h.paths.root.parent)]
    out = tmp_path / "out"
    assert _run(["export", "t", *r, "--out", str(out / "ds")]).exit_code == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "m.csv").write_text("mine\n")

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    real_write = E.write_export

    def half_then_full(where: Path, *args: object) -> None:
        real_write(where, *args)  # type: ignore[arg-type]
        full()

    monkeypatch.setattr(os, "fsync", full)  # every atomic write meets the full disk after writing its bytes
    monkeypatch.setattr(E, "write_export", half_then_full)
    for args in (["metrics", "t", *r, "--out", str(out / "m.csv")], ["export", "t", *r, "--out", str(out / "ds"),
                                                                        "--force"]):
        res = _run(args)
        assert res.exit_code == 1 and "the disk is full: writing " in res.stderr, res.output
    assert (out / "m.csv").read_text() == "mine\n"
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "m.csv"} == before
    assert sorted(p.name for p in out.iterdir()) == ["ds", "m.csv"], "no temp file or directory left"


def test_push_to_hub_of_a_bad_repo_id_is_refused_before_the_export(tmp_path: Path) -> None:
    from sgsbatch.ops.export import hub_failure_message

    recorded_run(tmp_path / "runs", "t")
    out = tmp_path / "ds"
    for repo in ("bad repo!!", "a/b/c", "-me/x"):
        res = _run(["export", "t", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--push-to-hub", repo])
        assert res.exit_code == 2 and res.stderr.startswith(f"Error: --push-to-hub {repo!r}: not a Hugging Face "
                                                            f"repo id ("), res.output
        assert not out.exists()
    line = hub_failure_message("me/x", tmp_path / "my exports" / "ds", OSError("Connection refused"))
    assert f"`hf upload me/x '{tmp_path / 'my exports' / 'ds'}' --repo-type dataset`" in line


def test_a_forks_inherited_rounds_keep_their_simulated_label(tmp_path: Path) -> None:
    from sgsbatch.ops.export import dataset_card, export_rows
    from sgsbatch.run import amendments
    from sgsbatch.state.schema import StoredProof
    from sgsbatch.views.proofs import found_proofs

    h = recorded_run(tmp_path, "t", sets=["verification.backend=lean"])  # the fork's own config: Lean
    amendments.path_of(h.paths).write_text(json.dumps(  # as ops/fork.py records it: from its first own round, 1
        {"at": 0.0, "key": "verification.backend", "old": "simulated", "new": "lean", "kind": amendments.METHOD,
         "from_round": 1, "round": 1, "command": "sgsbatch launch --from trunk --round 1"}) + "\n")
    assert not h.cfg.simulated and h.at(0).simulated_label() == "verifier"
    with h.db.write() as s:
        s.add(StoredProof(run_id=h.run_id, problem_id="t0", slot=0, round=0, proof="trivial"))
        s.add(StoredProof(run_id=h.run_id, problem_id="t1", slot=0, round=1, proof="trivial"))
    assert [(p["round"], p["simulated"]) for p in found_proofs(h)] == [(0, "verifier"), (1, "")]
    res = _run(["proofs", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0 and res.stdout.count("[SIMULATED verifier]") == 1, res.stdout
    rows = export_rows(h)
    assert [p["simulated"] for p in rows["proofs"]] == ["verifier", ""]
    card = dataset_card(h, rows)
    assert "**SIMULATED**: the rounds this run inherited" in card and "(verifier)" in card


def test_status_shows_the_newest_evaluations_values(tmp_path: Path) -> None:
    from sgsbatch.cli.console import status_text
    from sgsbatch.ops.evaluate import record_metrics
    from sgsbatch.views.status import run_status

    h = recorded_run(tmp_path, "t", sets=["eval.sets={mini = 'x.jsonl'}"])
    for r in (0, 1):
        h.paths.eval_dir(r, "mini").mkdir(parents=True)
        h.paths.eval_done(r, "mini").write_text("1\n")
        record_metrics(h, r, {"eval/mini/pass@1": 0.25 + r / 4, "eval/mini/pass@8": 0.5 + r / 4})
    st = run_status(h).to_json()
    assert [e["metrics"] for e in st["evaluations"]] == [{"eval/mini/pass@1": 0.25, "eval/mini/pass@8": 0.5},
                                                         {"eval/mini/pass@1": 0.5, "eval/mini/pass@8": 0.75}]
    assert "  held-out evaluation: round 0 done, round 1 done (eval/mini/pass@1 = 0.5, eval/mini/pass@8 = 0.75)\n" \
        in status_text(st)


def test_a_run_is_planned_and_shown_with_the_site_file_exported(tmp_path: Path) -> None:
    recorded_run(tmp_path, "t")
    site = tmp_path / "site.toml"
    site.write_text('[slurm.defaults]\npartition = "batch"\n')
    r = ["--runs-dir", str(tmp_path)]
    for args in (["plan", "t", *r], ["config", "show", "t", *r]):
        res = CliRunner().invoke(main, args, env={"SGSBATCH_SITE": str(site)})
        assert res.exit_code == 0, res.output
        typed = _run([*args, "--site", str(site)])
        assert typed.exit_code == 2 and "apply to a jobs file" in typed.stderr, typed.output
    res = _run(["plan", "nope", *r, "--set", "run.rounds=3"])
    assert res.exit_code == 2 and "nope is neither a jobs file nor a launched run: no run named 'nope'" in res.stderr


def test_fit_of_a_tiny_run_advises_the_threshold_as_commands_for_it(tmp_path: Path) -> None:
    from sgsbatch.ops.evaluate import record_metrics
    from sgsbatch.views.fit import GENERATIONS, SOLVE_RATE

    h = recorded_run(tmp_path, "t")
    for r in range(2):
        record_metrics(h, r, {GENERATIONS: 100.0 * (r + 1), SOLVE_RATE: 0.5 + r / 10})
    res = _run(["fit", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "so more rounds are needed (`sgsbatch resume t --runs-dir" in res.stderr, res.stderr
    assert f"then fit them below the threshold: `sgsbatch fit t --runs-dir {tmp_path} --min-generations 0` (the last " \
           "point is at 200 generations)" in res.stderr and " RUN" not in res.stderr, res.stderr


def test_a_fork_says_which_inherited_file_it_quarantined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.config.loading import load_config
    from sgsbatch.ops import fork as F
    from sgsbatch.ops import rebuild as R
    from tests.runlib import TINY

    parent = recorded_run(tmp_path, "p")
    child = load_config(TINY, [f"run.runs_dir={tmp_path}", "run.name=c", "run.executor=local", "run.rounds=2"])
    real = R.rebuild
    bad = {"time": 0.0, "file": "rounds/r0000/solve/shard_00000.jsonl.gz", "moved_to": "quarantine/rounds/r0000/solve/"
           "shard_00000.jsonl.gz.1", "reason": "BadGzipFile: Not a gzipped file", "round": 0, "records_recovered": 0,
           "records_expected": 8}

    def rebuild(*args: object, **kw: object) -> R.RebuildReport:
        rep = real(*args, **kw)  # type: ignore[arg-type]
        rep.quarantined.append(bad)  # as if the inherited shard file had been met corrupt
        return rep

    monkeypatch.setattr(R, "rebuild", rebuild)
    monkeypatch.setattr("sgsbatch.ops.control.start", lambda h: None)
    f = F.Fork(child, parent.paths, 1, [], [], {"parent": "p", "parent_dir": str(parent.paths.root), "round": 1})
    _, mat = F.fork(f, "local")
    assert any(n.startswith("inherited from run p: rounds/r0000/solve/shard_00000.jsonl.gz was corrupt (BadGzipFile")
               and "0 of 8 record(s) recovered" in n and "run p's file is unchanged" in n for n in mat.notes), mat.notes


def test_resume_on_a_full_disk_says_the_disk_instead_of_resubmitting(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.views import status as status_mod

    h = recorded_run(tmp_path, "t")  # running, no driver: a stall resume repairs, but on a full disk
    monkeypatch.setattr(status_mod, "free_space", lambda paths: {"path": str(paths.root), "free_bytes": 4096,
                                                                  "total_bytes": 3_000_000})
    res = _run(["resume", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert res.stderr.startswith("Error: run t is not resumed: the disk is full: 4.1 KB free of 3.0 MB on the file "
                                 f"system holding {h.paths.root}") and "(--force resubmits it anyway)" in res.stderr
    assert h.row().message != "resumed", "nothing resubmitted"


def test_rebuild_restores_the_evaluations_metrics(tmp_path: Path) -> None:
    import sqlite3

    h = recorded_run(tmp_path, "t", sets=["eval.sets={mini = 'x.jsonl', other = 'y.jsonl'}"])
    h.db.close()
    for name, done in (("mini", True), ("other", False)):  # other: no marker, an evaluation that did not finish
        where = h.paths.eval_dir(0, name)
        where.mkdir(parents=True)
        (where / "summary.json").write_text(json.dumps({"pass_at_k": {"1": 0.25, "8": 0.5}}))
        if done:
            h.paths.eval_done(0, name).write_text("1\n")
    res = _run(["rebuild", "t", "--runs-dir", str(tmp_path), "--force"])
    assert res.exit_code == 0, res.output
    con = sqlite3.connect(h.paths.db)
    try:
        got = dict(con.execute("SELECT name, value FROM metrics WHERE round = 0 AND name LIKE 'eval/%'").fetchall())
    finally:
        con.close()
    assert got == {"eval/mini/pass@1": 0.25, "eval/mini/pass@8": 0.5}


def test_cancel_on_a_full_disk_stops_the_jobs_and_says_what_was_not_recorded(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from sgsbatch.ops import control
    from sgsbatch.run.handle import RunHandle
    from sgsbatch.run.lock import LockHeld, OwnerLock

    h = recorded_run(tmp_path, "t")
    stopped: list[str] = []

    class Executor:
        def stop(self, handle: RunHandle) -> None:
            stopped.append("jobs")

    def full(*_args: object, **_kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(control, "executor_for", lambda handle: Executor())
    monkeypatch.setattr(control, "cancel_pending", lambda handle: stopped.append("evaluations"))
    monkeypatch.setattr(RunHandle, "set_state", full)
    monkeypatch.setattr(os, "pwrite", full)  # the control lock's holder line does not fit either
    res = _run(["cancel", "t", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 1 and stopped == ["jobs", "evaluations"], res.output
    assert res.stderr.startswith("Error: run t: its jobs are stopped, but the cancellation could not be recorded: "
                                 "the disk is full: ") and str(h.paths.root) in res.stderr, res.stderr
    with OwnerLock(tmp_path / "x.lock").acquire(), pytest.raises(LockHeld):
        OwnerLock(tmp_path / "x.lock").acquire()


def test_eval_of_a_set_whose_stored_summary_is_damaged_names_it_and_the_way_out(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t", sets=["eval.sets={mini = 'x.jsonl'}"])
    _complete_round(h, 0)
    where = h.paths.eval_dir(0, "mini")
    where.mkdir(parents=True)
    h.paths.eval_done(0, "mini").write_text("1\n")
    for damage in ("{\"pass_at_k\": {\"1\": 0.5", "[]", '{"set": "mini"}'):
        (where / "summary.json").write_text(damage)
        res = _run(["eval", "t", "--runs-dir", str(tmp_path), "--round", "0"])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert res.stderr.startswith(f"Error: {where / 'summary.json'} is damaged (") and \
            f"evaluate the set again with `sgsbatch eval t --runs-dir {tmp_path} --round 0 --set mini --force`" \
            in res.stderr, res.stderr


@pytest.mark.parametrize("text", ['"str"', '{"parent": "p", "parent_dir": "/x", "round": "abc"}', '[1]',
                                  '{"parent": "p", "round": 1}'])
def test_a_damaged_fork_record_reads_as_unreadable(tmp_path: Path, text: str) -> None:
    from sgsbatch.run import lineage

    h = recorded_run(tmp_path, "t")
    (h.paths.root / lineage.FILE).write_text(text)
    assert lineage.read(h.paths) is None
    assert _run(["status", "t", "--runs-dir", str(tmp_path)]).exit_code == 0
    (h.paths.root / lineage.FILE).write_text('{"parent": "p", "parent_dir": "/x", "round": 1}')
    assert "forked from p at round 1 (its round 0 inherited; /x)" in _run(["status", "t", "--runs-dir",
                                                                           str(tmp_path)]).stdout


def test_eval_submit_refuses_a_second_job_for_a_round_being_evaluated(tmp_path: Path) -> None:
    import subprocess
    import sys

    from sgsbatch.scheduling.eval_jobs import live_job

    h = recorded_run(tmp_path, "t", sets=["eval.sets={mini = 'x.jsonl'}"])
    _complete_round(h, 0)
    ck = h.paths.checkpoint(0, "solver")
    ck.mkdir(parents=True)
    (ck / "SGSBATCH_COMPLETE").write_text("")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "eval", str(h.paths.root)],
                           start_new_session=True)
    try:
        h.paths.eval_round_dir(0).mkdir(parents=True)
        h.paths.eval_job(0).write_text(json.dumps({"job_id": f"pid {job.pid}", "executor": "local", "round": 0,
                                                   "set": None}))
        res = _run(["eval", "t", "--runs-dir", str(tmp_path), "--round", "0", "--submit"])
        assert res.exit_code == 2 and f"round 0's evaluation of run t is already submitted (pid {job.pid}) and not " \
            f"done" in res.stderr and f"kill -TERM -- -{job.pid}" in res.stderr, res.output
        assert json.loads(h.paths.eval_job(0).read_text())["job_id"] == f"pid {job.pid}", "the first job's id kept"
    finally:
        job.kill()
        job.wait()
    assert live_job(h, 0) is None, "a job that ended no longer blocks a new one"


def test_verify_and_config_show_blame_the_set_that_gave_a_bad_key(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "code": "theorem a : True := by trivial"}\n')
    verify = ["verify", str(rows), "--out", str(tmp_path / "v.jsonl")]
    for args, bad in ((verify, "nope.x=1"), (["config", "show"], "nope.x=1"),
                      ([*verify, "--set", "verification.backend=simulated"], "verification.timeout_s=-1")):
        res = _run([*args, "--set", "run.rounds=3", "--set", bad])
        assert res.exit_code == 2 and res.stderr.startswith(f"Error: --set {bad}: "), res.output
    assert not (tmp_path / "v.jsonl").exists()


def test_an_output_inside_a_run_directory_is_refused(tmp_path: Path) -> None:
    h = recorded_run(tmp_path, "t")
    h.db.close()
    before = h.paths.db.read_bytes()
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "code": "theorem a : True := by trivial"}\n')
    r = ["--runs-dir", str(tmp_path)]
    cases = {"report": ["report", "t", *r, "--out"], "metrics": ["metrics", "t", *r, "--out"],
             "fit": ["fit", "t", *r, "--plot"], "export": ["export", "t", *r, "--force", "--out"],
             "verify": ["verify", str(rows), "--set", "verification.backend=simulated", "--out"]}
    for name, args in cases.items():
        files = (h.paths.db, h.paths.config) if name != "export" else ()  # export's --out is a directory
        for out in (*files, h.paths.root / "new.html", h.paths.round_dir(0) / "x"):
            res = _run([*args, str(out)])
            assert res.exit_code == 2 and f"{out} is inside the run directory {h.paths.root}, whose files it could " \
                "replace" in res.stderr, (name, res.output)
    res = _run([*cases["export"], str(h.paths.root)])
    assert res.exit_code == 2 and f"{h.paths.root} is the run directory" in res.stderr
    assert h.paths.db.read_bytes() == before and not (h.paths.root / "new.html").exists()
    assert _run(["metrics", "t", *r, "--out", str(tmp_path / "m.csv")]).exit_code == 0, "beside it: fine"


def test_the_report_lists_quarantined_files_as_status_does(tmp_path: Path) -> None:
    import html

    from sgsbatch.cli.console import status_text
    from sgsbatch.run import quarantine as Q
    from sgsbatch.run.shards import append_json_line
    from sgsbatch.views.status import run_status

    h = recorded_run(tmp_path, "t")
    rec = {"time": 0.0, "file": "rounds/r0000/solve/shard_00000.jsonl.gz", "reason": "BadGzipFile: Not a gzipped file",
           "moved_to": "quarantine/rounds/r0000/solve/shard_00000.jsonl.gz.1", "round": 0, "records_recovered": 2,
           "records_expected": 8}
    Q.log_path(h.paths).parent.mkdir(parents=True)
    append_json_line(Q.log_path(h.paths), rec)
    line = f"quarantined: {Q.describe(rec)}"
    assert line in status_text(run_status(h).to_json())
    res = _run(["report", "t", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "t.html")])
    assert res.exit_code == 0, res.output
    assert html.escape(line) in (tmp_path / "t.html").read_text()
