"""Failures that tell the truth (issue 41): a corrupt shard file and a full disk, on real runs.

Covered: a completed 1-round rehearsal of jobs/tiny.toml on the local executor (SIMULATED parts,
seconds) with bytes flipped in a real compacted `shard_*.jsonl.gz`: `rebuild --force` names the
file, quarantines it (moved under quarantine/, not deleted), keeps the other shards' rows and
replaces state.db only once the new one is complete; a rebuild that cannot finish leaves state.db
byte for byte; a run whose round's ending was lost makes `resume` name the file and the repair in
one line, and `status` then says the same. A real 3 MB tmpfs as the runs directory: the run
stalls with `status` naming the disk, its free space and path, and `resume` (a writing command)
and `rebuild --force` (writing commands) end in one line naming the disk instead of an ENOSPC
traceback, the database left as it was. Skipped with the reason where
mounting a tmpfs is not permitted. Not covered: Slurm (the same status and supervisor code runs).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import launch_args, run_env, sgsbatch  # noqa: E402

pytestmark = pytest.mark.slow
SOLVE0 = Path("rounds/r0000/solve/shard_00000.jsonl.gz")


def _launch(runs: Path, name: str, env: dict[str, str], rounds: int = 1) -> subprocess.CompletedProcess[str]:
    return sgsbatch(*launch_args(runs, name, "run.executor=local", f"run.rounds={rounds}"), "--rehearse", "--wait",
                    env=env, timeout=300)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 1-round tiny rehearsal on the local executor, its round compacted (gzip outputs)."""
    import time

    root = tmp_path_factory.mktemp("truth")
    env = run_env()
    proc = _launch(root, "t", env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for _ in range(300):  # the train task compacts the round after the run reads completed
        if (root / "t" / "rounds" / "r0000" / "compacted").exists():
            break
        time.sleep(0.1)
    assert (root / "t" / SOLVE0).exists()
    return root / "t"


def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "t"
    shutil.copytree(finished, run)
    return run


def _flip(path: Path) -> None:
    b = bytearray(path.read_bytes())
    for i in range(len(b) // 2, len(b) // 2 + 8):
        b[i] ^= 0xFF
    path.write_bytes(bytes(b))


def _attempts(run: Path, db: str = "state.db") -> int:
    con = sqlite3.connect(run / db)
    try:
        return int(con.execute("SELECT count(*) FROM attempts").fetchone()[0])
    finally:
        con.close()


def test_rebuild_quarantines_a_corrupt_shard_and_keeps_the_rest(finished: Path, tmp_path: Path,
                                                                 cli_env: dict[str, str]) -> None:
    run = _copy(finished, tmp_path)
    whole = _attempts(run)
    _flip(run / SOLVE0)
    damaged = (run / SOLVE0).read_bytes()
    proc = sgsbatch("rebuild", "t", "--force", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"quarantined: {SOLVE0} was corrupt (zlib" in proc.stdout, proc.stdout
    log = [json.loads(x) for x in (run / "quarantine" / "quarantine.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["file"] == str(SOLVE0) and log[0]["records_expected"] == 6
    assert (run / log[0]["moved_to"]).read_bytes() == damaged  # kept, not deleted
    # the shard now holds what was readable; the other solve shard's rows are all there
    left = _attempts(run)
    assert 0 < left < whole
    assert len(list(run.glob("state.db.bad-*"))) == 1 and not list(run.glob(".state.db.rebuilding-*"))
    st = sgsbatch("status", "t", "--runs-dir", str(tmp_path), env=cli_env)
    assert st.returncode == 0 and "completed (1 of 1 rounds completed)" in st.stdout and "quarantined: " in st.stdout
    again = sgsbatch("status", "t", "--runs-dir", str(tmp_path), "--json", env=cli_env)
    assert json.loads(again.stdout)["damaged"]["quarantined"][0]["file"] == str(SOLVE0)


def test_a_rebuild_that_cannot_finish_leaves_the_database_alone(finished: Path, tmp_path: Path,
                                                                cli_env: dict[str, str]) -> None:
    run = _copy(finished, tmp_path)
    before = (run / "state.db").read_bytes()
    (run / "rounds" / "r0000" / "train" / "shard_00000.done").write_text("{")  # fails the rebuild late
    proc = sgsbatch("rebuild", "t", "--force", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode != 0
    assert (run / "state.db").read_bytes() == before and not list(run.glob("state.db.bad-*"))
    assert not list(run.glob(".state.db.rebuilding-*"))


def test_resume_and_status_name_a_corrupt_shard(finished: Path, tmp_path: Path, cli_env: dict[str, str]) -> None:
    run = _copy(finished, tmp_path)
    con = sqlite3.connect(run / "state.db")  # the round's ending was lost: resume ends it from the shard files
    con.execute("DELETE FROM ingestions")
    con.execute("UPDATE rounds SET state = 'running'")
    con.execute("UPDATE runs SET state = 'running'")
    con.commit()
    con.close()
    _flip(run / SOLVE0)
    proc = sgsbatch("resume", "t", "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{run / SOLVE0} is corrupt (zlib" in proc.stderr
    assert f"sgsbatch rebuild t --runs-dir {tmp_path} --force" in proc.stderr
    st = sgsbatch("status", "t", "--runs-dir", str(tmp_path), env=cli_env)
    assert st.returncode == 0 and "stalled" in st.stdout.splitlines()[0]
    assert f"{run / SOLVE0} is corrupt" in st.stdout.splitlines()[0] and "CORRUPT " in st.stdout
    fixed = sgsbatch("rebuild", "t", "--force", "--runs-dir", str(tmp_path), env=cli_env)
    assert fixed.returncode == 0 and "quarantined: " in fixed.stdout
    assert "is corrupt" not in sgsbatch("status", "t", "--runs-dir", str(tmp_path), env=cli_env).stdout


@pytest.fixture
def tiny_disk(tmp_path: Path) -> object:
    """A 3 MB tmpfs, unmounted afterwards; skipped where mounting is not permitted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a 3 MB tmpfs here ({res.stderr.strip() or res.returncode}): needs root or "
                    f"CAP_SYS_ADMIN")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_named_by_status_and_resume(tiny_disk: Path, cli_env: dict[str, str]) -> None:
    runs = tiny_disk
    proc = _launch(runs, "f", cli_env, rounds=2)
    assert proc.returncode != 0
    st = sgsbatch("status", "f", "--runs-dir", str(runs), "--json", env=cli_env)
    assert st.returncode == 0, st.stderr
    got = json.loads(st.stdout)
    assert (got["state"], got["stall"]) == ("stalled", "disk_full")  # not one `watch` resumes
    assert got["message"].startswith("the disk is full: ") and str(runs / "f") in got["message"]
    assert " free of 3." in got["message"] and got["free_space"]["path"] == str(runs / "f")
    assert got["free_space"]["free_bytes"] < 64e6
    text = sgsbatch("status", "f", "--runs-dir", str(runs), env=cli_env).stdout
    assert "free space: " in text and "local driver is not running" not in text
    res = sgsbatch("resume", "f", "--runs-dir", str(runs), env=cli_env)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "the disk is full" in res.stderr and str(runs / "f") in res.stderr and " free of 3." in res.stderr
    fd = os.open(runs / "filler", os.O_WRONLY | os.O_CREAT)  # full to the last page, whatever the launch left
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    before = (runs / "f" / "state.db").read_bytes()  # a rebuild on the full disk leaves the database alone
    rb = sgsbatch("rebuild", "f", "--force", "--runs-dir", str(runs), env=cli_env)
    assert rb.returncode == 1 and "Traceback" not in rb.stderr and "disk is full" in rb.stderr, rb.stderr
    assert len(rb.stderr.strip().splitlines()) == 1
    assert (runs / "f" / "state.db").read_bytes() == before
    assert not list((runs / "f").glob(".state.db.rebuilding-*")) and not list((runs / "f").glob("state.db.bad-*"))
