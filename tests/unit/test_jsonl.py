"""run/jsonl.read_jsonl: the one reader of the run's JSON-lines logs. A line cut short (no newline), not
JSON or not an object ends the read of an append-only log, or is skipped with `past_bad_lines`."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.run.jsonl import read_jsonl


def test_a_torn_or_bad_line_ends_the_read_or_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    assert read_jsonl(log) == [] and read_jsonl(log, past_bad_lines=True) == []  # no file yet
    log.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3, "cut\n[4]\n{"a": 5}\n{"a": 6}')
    assert read_jsonl(log) == [{"a": 1}, {"a": 2}]  # a blank line is no record; the torn one ends the read
    # past bad lines: the torn record and the non-object are skipped, and so is the last line without its
    # newline (its writer may still be writing it, even when it parses)
    assert read_jsonl(log, past_bad_lines=True) == [{"a": 1}, {"a": 2}, {"a": 5}]


def test_an_append_after_a_torn_line_is_read_past_it(tmp_path: Path) -> None:
    """A writer killed mid-line, then another appending: the fragment joins the next record on one line."""
    log = tmp_path / "journal.jsonl"
    log.write_text('{"job": "1"}\n{"job": "2", "ta' + '{"job": "3"}\n{"job": "4"}\n')
    assert read_jsonl(log) == [{"job": "1"}]
    assert read_jsonl(log, past_bad_lines=True) == [{"job": "1"}, {"job": "4"}]
