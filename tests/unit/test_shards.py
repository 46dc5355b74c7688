"""Shard files: item logs survive a torn write, the marker comes last, failures are counted."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.run.shards import Shard, failed_reason, line_key, read_phase, unfinished


def test_item_log_skips_a_torn_last_line_and_repairs_it(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 3)
    sh.append_item({"key": "a", "v": 1})
    with sh.partial.open("a") as f:
        f.write('{"key": "b", "v"')  # killed mid-write
    assert list(sh.done_items()) == ["a"]
    sh.append_item({"key": "b", "v": 2})
    assert sh.done_items() == {"a": {"key": "a", "v": 1}, "b": {"key": "b", "v": 2}}


def test_marker_is_written_after_the_output(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 0)
    assert not sh.is_done() and unfinished(tmp_path, 1) == [0]
    sh.finish([{"key": "x"}], {"items": 1})
    assert sh.is_done() and sh.output.exists() and unfinished(tmp_path, 1) == []
    assert sh.marker.stat().st_mtime_ns >= sh.output.stat().st_mtime_ns
    assert read_phase(tmp_path, 1) == [{"key": "x"}]
    assert sh.meta()["items"] == 1


def test_failures_are_counted_and_cleared(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 1)
    assert sh.failure_count() == 0
    assert sh.record_failure("boom") == 1
    assert sh.record_failure("boom again") == 2
    sh.mark_failed("gave up")
    assert sh.failed_reason() == "gave up"
    assert failed_reason(tmp_path, 3) == "gave up" and unfinished(tmp_path, 3) == [0, 1, 2]
    sh.clear_failures()
    assert sh.failure_count() == 0 and sh.failed_reason() is None and failed_reason(tmp_path, 3) is None
    # the history stays: what `resume` did is one more line, and counting starts after it
    history = sh.failure_history()
    assert [x.get("reason") for x in history[:2]] == ["boom", "boom again"]
    assert history[2]["cleared"] is True and history[2]["failed"] == "gave up"
    assert sh.record_failure("after resume", attempt=4) == 1 and sh.failure_history()[-1]["attempt"] == 4


def test_read_keys_parses_only_the_wanted_records(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 0)
    recs = [{"key": "p1", "is_target": True, "samples": [{"proof": 'x "key": "p2"'}]},
            {"key": 'q"uo\\te', "samples": []}, {"key": "p2", "samples": [{"proof": "ok"}]},
            {"key": "ünï", "samples": []}, {"nokey": 1}]
    sh.finish(recs)
    assert line_key(sh.output.read_text().splitlines()[0]) == "p1"
    assert sh.read_keys({"p2", 'q"uo\\te', "ünï", "absent"}) == {r["key"]: r for r in recs[1:4]}
    assert sh.read_keys(set()) == {}
