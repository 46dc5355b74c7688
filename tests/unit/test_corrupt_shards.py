"""Finished shard outputs read strictly, and quarantined (run/shards.py, run/quarantine.py), on real files.

Covered: a plain output with a damaged middle line and a gzip output cut short each raise
CorruptShard naming the file, with the records before the damage; `quarantine` moves the file
under RUN/quarantine/ byte for byte, writes the readable records back in the same form and logs
it; `note` / `unresolved` forget a file once it changed; the disk-full line names the path and
its free space. Whole runs: tests/integration/test_failures_truth.py.
"""

from __future__ import annotations

import errno
import gzip
from pathlib import Path

import pytest

from sgsbatch.errors import disk_full_message, is_disk_full
from sgsbatch.run import quarantine as Q
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import CorruptShard, Shard, jsonl_text

RECORDS = [{"key": f"k{i}", "text": "x" * 200} for i in range(40)]


def _shard(tmp_path: Path) -> tuple[RunPaths, Shard]:
    paths = RunPaths(tmp_path / "run")
    shard = Shard(paths.phase_dir(0, "solve"), 0)
    shard.finish(RECORDS)
    shard.set_total(len(RECORDS))
    return paths, shard


def test_a_damaged_plain_line_names_the_file_and_keeps_what_came_before(tmp_path: Path) -> None:
    _, shard = _shard(tmp_path)
    lines = shard.output.read_text().splitlines(keepends=True)
    lines[5] = lines[5][:30] + "\x00garbage\n"
    shard.output.write_text("".join(lines))
    with pytest.raises(CorruptShard) as e:
        shard.read()
    assert e.value.path == shard.output and [r["key"] for r in e.value.records] == [f"k{i}" for i in range(5)]
    assert str(shard.output) in str(e.value) and "rebuild run --runs-dir" in str(e.value)


def test_a_cut_gzip_output_is_quarantined_with_its_readable_records(tmp_path: Path) -> None:
    paths, shard = _shard(tmp_path)
    shard.replace_output(RECORDS)
    data = shard.output_gz.read_bytes()
    shard.output_gz.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(CorruptShard) as e:
        shard.read_keys({"k1"})
    damaged = shard.output_gz.read_bytes()
    Q.note(paths, e.value)
    assert [f["file"] for f in Q.unresolved(paths)] == ["rounds/r0000/solve/shard_00000.jsonl.gz"]
    rec = Q.quarantine(paths, e.value)
    assert (paths.root / rec["moved_to"]).read_bytes() == damaged
    assert rec["records_expected"] == 40 and 0 <= rec["records_recovered"] < 40 and rec["round"] == 0
    got = shard.read()  # the shard reads again: what was readable, still gzip
    assert got == RECORDS[: rec["records_recovered"]]
    assert gzip.decompress(shard.output_gz.read_bytes()).decode() == jsonl_text(got)
    assert Q.records(paths) == [rec] and Q.quarantined_in(paths, 0) and not Q.quarantined_in(paths, 1)
    assert Q.unresolved(paths) == []  # the file changed: no longer reported as found corrupt
    assert "0 of 40" in Q.describe({**rec, "records_recovered": 0})


def test_the_disk_full_line_names_the_path_and_its_free_space(tmp_path: Path) -> None:
    e = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    assert is_disk_full(e) and not is_disk_full(OSError(errno.EACCES, "denied"))
    line = disk_full_message(e)
    assert line.startswith("the disk is full: writing ") and str(tmp_path / "x") in line and " free of " in line
    bare = disk_full_message(OSError(errno.EDQUOT, "Disk quota exceeded"), str(tmp_path))
    assert bare.startswith("the disk quota is spent: a write under ") and str(tmp_path) in bare
