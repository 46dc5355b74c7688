"""Forking a run (`launch --from RUN --round N`, ops/fork.py) on the local executor: a 2-round tiny parent,
a 3-round child from its round 1 with another solver.lr.

Covered: the child's round 0 is the parent's (attempts, conjectures, reviews, stored proofs, metrics,
trained steps), its rounds 1 and 2 ran with the new value (the train job's recorded LR), the change is a
change of method from round 1, the parent's directory is untouched (every file's size and mtime) even
when the child's retention deletes its own copy of a checkpoint, files are hard links, status, the
report and a rebuild of the child know the parent; refusals: --round out of range, a data.* or models.*
difference, the parent's name, run.rounds not beyond N, --from without --round, weights the parent's retention
deleted; a dry run creates nothing.
Not covered here: Slurm (tests/slurm/test_fork_slurm.py), a parent on another file system (copies).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, outcome, run_env, sgsbatch, status  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 2-round tiny run on the local executor (the trunk)."""
    root = tmp_path_factory.mktemp("fork")
    proc = sgsbatch(*launch_args(root, "trunk", "run.executor=local", "run.rounds=2"), "--wait", env=run_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "trunk"


def _files(run: Path) -> dict[str, tuple[int, int, int]]:
    """Every file of a run directory: (size, mtime in ns, inode)."""
    out = {}
    for dirpath, _, names in os.walk(run):
        for n in names:
            st = os.lstat(Path(dirpath) / n)
            out[str((Path(dirpath) / n).relative_to(run))] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _round0(run: Path) -> dict[str, Any]:
    got = outcome(run)
    rows = {k: [x for x in v if x[0] == 0] for k, v in got.items() if k in ("attempts", "conjectures", "reviews",
                                                                           "steps")}
    rows["store"] = [x for x in got["store"] if x[2] == 0]
    con = sqlite3.connect(run / "state.db")
    try:
        rows["metrics"] = sorted(x for x in con.execute("SELECT name, value FROM metrics WHERE round = 0")
                                 if x[0] not in ("wall_s/train", "wall_s/round"))  # the ending's own time
    finally:
        con.close()
    return rows


def _lrs(run: Path, r: int) -> set[float]:
    lines = (run / "rounds" / f"r{r:04d}" / "train" / "steps.jsonl").read_text().splitlines()
    return {json.loads(x)["lr"] for x in lines if json.loads(x)["role"] == "solver"}


def test_fork_inherits_round_0_and_runs_its_own_rounds(parent: Path, tmp_path: Path) -> None:
    runs = parent.parent
    before = _files(parent)
    proc = sgsbatch(*launch_args(runs, "branch", "run.executor=local", "run.rounds=3", "solver.lr=0.002",
                                 "checkpoints.keep_last=1"), "--from", "trunk", "--round", "1", "--wait", env=run_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fork of run trunk at round 1" in proc.stdout and "solver.lr: 0.001 -> 0.002" in proc.stdout
    child = runs / "branch"
    # the parent is never written: same files, sizes and mtimes (its state.db opened read-only)
    assert _files(parent) == before
    # the child's round 0 is the parent's, row for row
    assert _round0(child) == _round0(parent)
    assert _round0(child)["attempts"]
    st = status(runs, "branch")
    assert st["state"] == "completed" and st["rounds_completed"] == 3, st
    assert st["forked_from"]["parent"] == "trunk" and st["forked_from"]["round"] == 1
    assert st["forked_from"]["parent_dir"] == str(parent)
    # its own rounds trained with the new value; the parent's round 1 with the old one
    assert _lrs(child, 1) == _lrs(child, 2) == {0.002} and _lrs(parent, 1) == {0.001}
    con = sqlite3.connect(child / "state.db")
    am = con.execute("SELECT key, old, new, kind, from_round FROM amendments").fetchall()
    con.close()
    assert am == [("solver.lr", "0.001", "0.002", "method", 1)]
    # hard links, never symlinks; the child's retention deleted its own r0000 only
    for rel in ("checkpoints/init/solver/model.safetensors", "rounds/r0000/solve/shard_00000.jsonl.gz",
                "rounds/r0000/inputs.json"):
        a, b = os.lstat(parent / rel), os.lstat(child / rel)
        assert not (child / rel).is_symlink() and a.st_ino == b.st_ino and b.st_nlink > 1, rel
    assert not (child / "checkpoints" / "r0000").exists() and (parent / "checkpoints" / "r0000" / "solver").is_dir()
    assert not (child / "rounds" / "r0000" / "solve" / "shard_00000.lock").exists()
    text = sgsbatch("status", "branch", "--runs-dir", str(runs), env=run_env())
    assert "forked from trunk at round 1 (its round 0 inherited" in text.stdout, text.stdout
    report = sgsbatch("report", "branch", "--runs-dir", str(runs), "--out", str(tmp_path / "r.html"), env=run_env())
    assert report.returncode == 0, report.stderr
    assert "Forked from trunk at round 1" in (tmp_path / "r.html").read_text()
    # a rebuilt child is the same child: the same rows, the parent still known
    want = outcome(child)
    (child / "state.db").unlink()
    rb = sgsbatch("rebuild", "branch", "--runs-dir", str(runs), env=run_env())
    assert rb.returncode == 0, rb.stderr
    assert outcome(child) == want and _round0(child) == _round0(parent)
    assert status(runs, "branch")["forked_from"]["parent"] == "trunk"
    assert _files(parent) == before


def _refused(runs: Path, *args: str) -> str:
    proc = sgsbatch(*launch_args(runs, "other", "run.executor=local", *args[:-2]), "--from", args[-2], "--round",
                    args[-1], env=run_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not (runs / "other").exists()
    return proc.stderr


def test_fork_refusals_name_the_keys_and_what_to_do(parent: Path) -> None:
    runs = parent.parent
    before = _files(parent)
    for n in ("0", "3"):
        err = _refused(runs, "run.rounds=4", "trunk", n)
        assert f"--round {n}: run trunk has 2 completed round(s)" in err and "1..2" in err, err
    err = _refused(runs, "run.rounds=3", "data.limit=5", "trunk", "1")
    assert "data.limit" in err and "--set data.limit=" in err, err
    err = _refused(runs, "run.rounds=3", "models.solver=openai-community/gpt2", "trunk", "1")
    assert "models.solver" in err and "round 0's" in err, err
    err = _refused(runs, "run.rounds=2", "trunk", "2")
    assert "run.rounds" in err and "--set run.rounds=3" in err, err
    err = _refused(runs, "run.rounds=3", "nosuchrun", "1")
    assert "no run named 'nosuchrun'" in err, err
    same = sgsbatch(*launch_args(runs, "trunk", "run.executor=local", "run.rounds=3"), "--from", "trunk",
                    "--round", "1", env=run_env())
    assert same.returncode == 2 and "its parent's name 'trunk'" in same.stderr and "run.name=trunk-fork" in same.stderr
    alone = sgsbatch(*launch_args(runs, "other"), "--from", "trunk", env=run_env())
    assert alone.returncode == 2 and "--round N go together" in alone.stderr, alone.stderr
    dry = sgsbatch(*launch_args(runs, "other", "run.executor=local", "run.rounds=3", "solver.band_high=0.75"),
                   "--from", "trunk", "--round", "2", "--dry-run", env=run_env())
    assert dry.returncode == 0, dry.stderr
    assert "inherits its rounds 0..1" in dry.stdout and "solver.band_high" in dry.stdout and "nothing created" in dry.stdout
    assert not (runs / "other").exists()
    assert _files(parent) == before


def test_fork_refuses_weights_the_parent_deleted(parent: Path, tmp_path: Path) -> None:
    """A parent whose retention deleted its round-0 weights: a fork at round 1 is refused naming round 2,
    whose weights were kept; one at round 2 is fine (dry run). RUN as a path to another runs directory."""
    trunk = tmp_path / "pruned"
    shutil.copytree(parent, trunk)
    shutil.rmtree(trunk / "checkpoints" / "r0000")
    proc = sgsbatch(*launch_args(tmp_path, "other", "run.executor=local", "run.rounds=3"), "--from", str(trunk),
                    "--round", "1", env=run_env())
    assert proc.returncode == 2 and "weights after round 0 are gone" in proc.stderr, proc.stderr
    assert "--round 2" in proc.stderr and not (tmp_path / "other").exists()
    dry = sgsbatch(*launch_args(tmp_path, "other", "run.executor=local", "run.rounds=3"), "--from", str(trunk),
                   "--round", "2", "--dry-run", env=run_env())
    assert dry.returncode == 0 and "no change of method" in dry.stdout, dry.stdout + dry.stderr
