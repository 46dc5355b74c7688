"""run/token_arrays.py and its users: a generating shard's ids and logprobs in `shard_N.arrays`.

Covered: a record and its arrays written and read back (item log and output point into the one
file, the JSON lines hold counts only); a torn block and a torn item-log line left by a killed
writer (neither read, the next item lands after them, aligned); a requeued window resuming over
both; records of runs written before (inline lists) read the same, in a shard of their own or
beside records of today's format; a compacted record has no arrays to give; compaction of a
round in today's format (output without offsets, arrays file gone, counts kept); `rebuild` of a
run in either format, compacted or not, giving the same rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from sgsbatch.ops.rebuild import rebuild
from sgsbatch.phases.task import Interrupted
from sgsbatch.round import compaction as C
from sgsbatch.round.examples import solver_examples
from sgsbatch.round.results import round_results
from sgsbatch.run.handle import open_run_dir
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.shards import Shard, read_phase_arrays
from sgsbatch.run.token_arrays import ALIGN, ArraysFile, RecordArrays, TokenArrays
from sgsbatch.state.schema import Attempt, Conjecture, Metric, ReviewRow
from tests.shardlib import FORMATS, split_arrays
from tests.unit.test_round import CONJ0, REVIEWS0, SOLVE0, _round0, _run, _write_round
from tests.unit.test_sampling_window import ITEMS, _contents, _task
from tests.unit.test_sampling_window import _run as _stream

SOLVE = {"key": "p1", "problem_id": "p1", "prompt_ids": [7, 8, 9],
         "samples": [{"text": "a", "token_ids": [5, 6], "logprobs": [-0.5, -0.25], "finish_reason": "stop", "ok": True},
                     {"text": "b", "token_ids": [], "logprobs": [], "finish_reason": "length", "ok": False},
                     {"text": "c", "token_ids": [2**31 - 1, 0, 3], "logprobs": [-1.5, -0.0, -3.0],
                      "finish_reason": "stop", "ok": True}]}
GUIDE = {"key": "c0-x", "conjecture_id": "c0-x", "prompt_ids": [4], "text": "r", "token_ids": [9, 9],
         "logprobs": [-1.0, -2.0], "finish_reason": "stop", "ok": True}


def _lists(rec: dict[str, Any], file: ArraysFile | None) -> list[Any]:
    a = RecordArrays(rec, file)
    n = len(rec["samples"]) if "samples" in rec else 1
    return [list(a.prompt_ids)] + [[list(a.token_ids(k)), list(a.logprobs(k))] for k in range(n)]


def _want(rec: dict[str, Any]) -> list[Any]:
    samples = rec.get("samples", [rec])
    return [rec["prompt_ids"]] + [[s["token_ids"], s["logprobs"]] for s in samples]


def test_records_and_arrays_round_trip_through_item_log_and_output(tmp_path: Path) -> None:
    sh = Shard(tmp_path / "solve", 0)
    written = [sh.append_item(*split_arrays(rec)) for rec in (SOLVE, GUIDE)]
    assert [w["arrays_at"] for w in written] == [0, 56]  # 3 ids + 2 x 2 + 0 + 2 x 3 numbers = 52 bytes, aligned to 56
    assert sh.arrays.stat().st_size == 56 + 4 * (1 + 2 * 2)
    line = sh.partial.read_text().splitlines()[0]
    assert "token_ids" not in line and "logprobs" not in line and "prompt_ids" not in line
    logged = sh.done_items()
    assert logged["p1"] == written[0] and logged["p1"]["n_prompt_tokens"] == 3
    assert [s["n_tokens"] for s in logged["p1"]["samples"]] == [2, 0, 3] and logged["c0-x"]["n_tokens"] == 2
    file = ArraysFile(sh.arrays)
    assert _lists(logged["p1"], file) == _want(SOLVE) and _lists(logged["c0-x"], file) == _want(GUIDE)
    sh.finish(written)
    (item, arrays), (review, review_arrays) = read_phase_arrays(tmp_path / "solve", 1)
    assert item == written[0] and arrays.token_ids(2).dtype.str == "<i4" and arrays.logprobs(0).dtype.str == "<f4"
    assert _lists(item, ArraysFile(sh.arrays)) == _want(SOLVE)
    assert [list(review_arrays.prompt_ids), list(review_arrays.token_ids(0))] == [[4], [9, 9]]
    assert sh.read_keys({"c0-x"}) == {"c0-x": written[1]}


def test_float32_logprobs_and_int32_ids(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 0)
    rec = sh.append_item({"key": "k", "n_prompt_tokens": 1, "samples": [{"n_tokens": 1}]},
                         TokenArrays([1], [[3]], [[-0.1]]))
    got = RecordArrays(rec, ArraysFile(sh.arrays)).logprobs(0)
    assert float(got[0]) == pytest.approx(-0.1, rel=1e-7) and float(got[0]) != -0.1  # float32, not float64
    with pytest.raises(AssertionError, match="n_tokens"):  # the record's counts must describe its block
        sh.append_item({"key": "j", "n_prompt_tokens": 1, "samples": [{"n_tokens": 2}]},
                       TokenArrays([1], [[3]], [[-0.1]]))


def test_a_torn_block_and_a_torn_line_are_never_read(tmp_path: Path) -> None:
    """A killed writer leaves a partial block (no line points at it), or a whole block whose line was
    torn; the next attempt's item starts after them, at a multiple of ALIGN, and reads right."""
    sh = Shard(tmp_path, 0)
    first = sh.append_item(*split_arrays(SOLVE))
    with sh.arrays.open("ab") as f:
        f.write(b"\x01\x02\x03")  # a torn block
    rec, arrays = split_arrays(GUIDE)
    line = json.dumps({**rec, "arrays_at": 999}, sort_keys=True)
    with sh.partial.open("a") as f:
        f.write(line[: len(line) // 2])  # a torn line
    assert list(sh.done_items()) == ["p1"]
    second = sh.append_item(rec, arrays)
    assert second["arrays_at"] % ALIGN == 0 and second["arrays_at"] > first["arrays_at"] + 52 + 3
    assert [r["key"] for r in read_jsonl(sh.partial)] == ["p1", "c0-x"]  # the torn line was cut
    file = ArraysFile(sh.arrays)
    assert _lists(sh.done_items()["p1"], file) == _want(SOLVE) and _lists(second, file) == _want(GUIDE)


def test_a_requeued_window_resumes_over_torn_tails_to_the_same_contents(tmp_path: Path) -> None:
    ref, _ = _task(tmp_path / "ref", 3)
    _stream(ref, [])
    task, _ = _task(tmp_path / "cut", 3, stop_after=4)
    with pytest.raises(Interrupted):
        _stream(task, [])
    logged = read_jsonl(task.shard.partial)
    assert 0 < len(logged) < len(ITEMS)
    with task.shard.arrays.open("ab") as f:  # killed while writing the next item's block
        f.write(b"\xff" * 13)
    again, _ = _task(tmp_path / "cut", 3)
    _stream(again, [])
    assert _contents(again.shard) == _contents(ref.shard)
    assert again.shard.arrays.stat().st_size > ref.shard.arrays.stat().st_size  # the torn bytes stay, unread


def test_records_written_before_read_the_same_and_compacted_ones_have_none(tmp_path: Path) -> None:
    assert _lists(SOLVE, None) == _want(SOLVE) and _lists(GUIDE, ArraysFile(tmp_path / "absent")) == _want(GUIDE)
    compacted = C.compact_record(SOLVE)
    with pytest.raises(AssertionError, match="compacted"):
        RecordArrays(compacted, ArraysFile(tmp_path / "absent")).token_ids(0)
    today, _ = split_arrays(SOLVE)
    assert C.compact_record({**today, "arrays_at": 8}) == compacted  # both formats compact to the same record
    assert [C.token_count(s) for s in today["samples"]] == [2, 0, 3]


def test_a_shard_half_written_before_reads_record_by_record(tmp_path: Path) -> None:
    """A task requeued onto newer code (with `run.allow_env_drift`) finds inline lines in its item log and
    appends arrays after them: the format is told per record."""
    sh = Shard(tmp_path / "solve", 0)
    sh.append_item(dict(SOLVE))  # inline, as the older code appended it
    sh.append_item(*split_arrays(GUIDE))
    sh.finish(list(sh.done_items().values()))
    (old, old_arrays), (new, new_arrays) = read_phase_arrays(tmp_path / "solve", 1)
    assert "arrays_at" not in old and "arrays_at" in new
    assert _lists(old, old_arrays.file) == _want(SOLVE) and _lists(new, new_arrays.file) == _want(GUIDE)


def test_an_empty_item_needs_no_bytes(tmp_path: Path) -> None:
    sh = Shard(tmp_path, 0)
    rec = sh.append_item({"key": "k", "n_prompt_tokens": 0, "samples": []}, TokenArrays([], [], []))
    assert sh.arrays.stat().st_size == 0 and list(RecordArrays(rec, ArraysFile(sh.arrays)).prompt_ids) == []


def test_compacting_a_round_in_todays_format(tmp_path: Path) -> None:
    h = _round0(tmp_path)
    def counts() -> dict[str, Any]:
        return {k: (v.verified, [C.token_count(s) for s in v.samples]) for k, v in round_results(h.cfg, h.paths, 0).items()}

    before = counts()
    solve = Shard(h.paths.phase_dir(0, "solve"), 0)
    assert solve.arrays.exists() and solve.partial.exists()
    C.compact_round(h.cfg, h.paths, 0)
    for phase in ("conjecture", "solve", "guide"):
        sh = Shard(h.paths.phase_dir(0, phase), 0)
        assert not sh.arrays.exists() and not sh.partial.exists() and sh.is_compressed()
        assert "arrays_at" not in json.dumps(sh.read())
    assert counts() == before
    res = round_results(h.cfg, h.paths, 0)
    with pytest.raises(AssertionError, match="compacted"):
        solver_examples(h.cfg, h.paths, res)  # nothing left to train on, and it says so


def _rows(h: Any) -> list[Any]:
    with h.db.read() as s:
        attempts = sorted((a.round, a.problem_id, a.sample, a.verdict, a.tokens, a.proof, a.finish_reason, a.extracted)
                          for a in s.exec(select(Attempt)))
        reviews = sorted((r.conjecture_id, r.score, r.tokens) for r in s.exec(select(ReviewRow)))
        conjectures = sorted((c.target_id, c.sample, c.status, c.tokens) for c in s.exec(select(Conjecture)))
        metrics = sorted((m.round, m.name, m.value) for m in s.exec(select(Metric)) if not m.name.startswith("wall_s/"))
    return [attempts, reviews, conjectures, metrics]


@pytest.mark.parametrize("compacted", [False, True])
def test_rebuild_reads_either_format_to_the_same_rows(tmp_path: Path, compacted: bool) -> None:
    rows = []
    for fmt in FORMATS:
        h = _run(tmp_path / fmt)
        _write_round(h, 0, CONJ0, SOLVE0, REVIEWS0, fmt)
        Shard(h.paths.phase_dir(0, "train"), 0).finish([{"key": "solver", "role": "solver", "steps": 2,
                                                        "sequences": 5, "mean_loss": 0.5, "target_tokens": 10}])
        if compacted:
            C.compact_round(h.cfg, h.paths, 0)
        os.remove(h.paths.db)
        report = rebuild(h.paths)
        assert (report.rounds_completed, report.attempts) == (1, 32)
        rows.append(_rows(open_run_dir(h.paths, h.cfg)))
    assert rows[0] == rows[1] and len(rows[0][0]) == 32 and len(rows[0][1]) == 3
