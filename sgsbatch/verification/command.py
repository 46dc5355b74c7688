"""`sgsbatch verify`: check a JSONL of proofs with the configured verifier, write a JSONL of verdicts.

Input rows: `{"id", "header", "theorem", "proof"}` (Lean sees header + theorem + proof, as in
the verify phase; `statement` is read as `theorem` where `theorem` is absent, so the rows of
`sgsbatch proofs RUN --json` and of the export's `proofs` config are input rows as they are) or
`{"id", "code"}` (a whole file: leading `import`/`open`/`set_option`/comment lines are the header,
the text up to the first `:= by` the statement, the rest the proof). The input is a file or `-`,
standard input. A malformed row gets an `error` verdict with the reason `malformed_row` and never
stops the file:
rows are split on `\n` only (a raw U+2028 inside a JSON string stays in its row), each line is
decoded on its own (invalid UTF-8 makes that row `line-N` malformed, not the file unreadable), and
a string holding a lone surrogate (`"\ud800"`, which no UTF-8 file can hold) makes its row
malformed; its verdict row is written as `line-N`, so a resume skips it too. An input with rows
of which none could be read is refused before anything is written (ValueError naming the input
and the first row's reason): it is the wrong file, not a file of bad proofs; so is an input with no
row at all (empty, or blank lines only): nothing to verify.
Output rows: `{"id", "verdict", "reason", "messages", "time_s"}`, appended and flushed one by
one, so an interrupted run resumes: ids already in the output are skipped, a torn last line is cut
first, and a complete line that is not a verdict row (or `--out` naming the input) is refused
before anything is written. The verifier starts before the output is opened, so a REPL that is not
installed leaves no empty output behind. Covered: reading,
splitting, resuming, progress on stderr (a counter redrawn with \\r on a terminal, plain lines
in a file or pipe). Not covered: the checks themselves (lean.py, pool.py).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import IO, Any

from sgsbatch.config.schema import Config
from sgsbatch.verification.verdict import ERROR, ProofJob, Verdict
from sgsbatch.verification.verifier import make_verifier

MALFORMED = "malformed_row"
BY = ":= by"
_HEADER_LINE = re.compile(r"\s*(?:$|--|import\s|open\s|set_option\s)")


def split_code(code: str) -> tuple[str, str, str]:
    """(header, theorem, proof) of a whole Lean file; ValueError if it has no `:= by`."""
    lines = code.replace("\r\n", "\n").split("\n")
    k = 0
    while k < len(lines) and _HEADER_LINE.match(lines[k]) and not lines[k].lstrip().startswith("/-"):
        k += 1
    header, body = "\n".join(lines[:k]), "\n".join(lines[k:])
    if BY not in body:
        raise ValueError("`code` has no `:= by` after its header")
    statement, proof = body.split(BY, 1)
    return header, statement + BY, proof


def _lone_surrogate(value: Any) -> bool:
    """True if a string anywhere in `value` cannot be written as UTF-8 (a lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def parse_row(line: str | bytes, number: int) -> tuple[str, ProofJob | str]:
    """(id, job) for a good row, (id, why) for a malformed one (id is `line-N` if missing)."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"line-{number}", f"invalid UTF-8 at byte {e.start} of line {number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        return f"line-{number}", f"not JSON: {e}"
    if not isinstance(row, dict):
        return f"line-{number}", "not a JSON object"
    if _lone_surrogate(row):
        return f"line-{number}", f"line {number} holds a lone surrogate escape (e.g. \\ud800): not text"
    rid = row.get("id")
    if not isinstance(rid, str | int) or isinstance(rid, bool):
        return f"line-{number}", "missing `id` (a string or an integer)"
    rid = str(rid)
    if isinstance(row.get("code"), str):
        try:
            header, theorem, proof = split_code(row["code"])
        except ValueError as e:
            return rid, str(e)
        return rid, ProofJob(rid, header, theorem, proof)
    fields = [row.get("header"), row.get("theorem", row.get("statement")), row.get("proof")]
    if not all(isinstance(f, str) for f in fields):
        return rid, "needs string fields `header`, `theorem` (or `statement`), `proof` (or one string `code`)"
    header, theorem, proof = (str(f) for f in fields)
    return rid, ProofJob(rid, header, theorem, proof)


def done_ids(out_path: Path) -> tuple[set[str], int]:
    """Ids already written to `out_path` and the length of its complete lines (an unterminated
    last line is a torn write: it is cut before appending). A complete line that is not a verdict
    row is a ValueError naming the file and the line: appending to it would keep the file invalid."""
    try:
        data = out_path.read_bytes() if out_path.exists() else b""
    except OSError as e:
        raise ValueError(f"cannot read --out {out_path}: {e.strerror or e}") from None
    keep = data.rfind(b"\n") + 1
    ids: set[str] = set()
    for number, line in enumerate(data[:keep].split(b"\n")[:-1], start=1):
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            row = None
        if not (isinstance(row, dict) and "id" in row and "verdict" in row):
            raise ValueError(f"--out {out_path}: line {number} is not a verdict row; remove it (or choose another "
                             f"--out) and run again")
        ids.add(str(row["id"]))
    return ids, keep


def _write(out: IO[str], rid: str, verdict: Verdict, secs: float) -> None:
    row: dict[str, Any] = {"id": rid, "verdict": verdict.verdict, "reason": verdict.reason,
                           "messages": verdict.messages, "time_s": round(secs, 4)}
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()


STDIN = Path("-")


def _read_input(input_path: Path, out_path: Path) -> bytes:
    """The input's bytes: standard input for `-`; ValueError for a missing file or one that is `--out`."""
    if input_path == STDIN:
        return sys.stdin.buffer.read()
    if not input_path.is_file():
        raise ValueError(f"no such input file: {input_path}")
    if out_path.resolve() == input_path.resolve():
        raise ValueError(f"--out {out_path} is the input file; write the verdicts to another file")
    try:
        return input_path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {input_path}: {e.strerror or e}") from None


def verify_file(input_path: Path, out_path: Path, cfg: Config, progress: bool, processes: int = 1) -> dict[str, int]:
    """Check every row of `input_path` (`-`: standard input) not yet in `out_path`; returns counts per verdict."""
    data = _read_input(input_path, out_path)
    done, keep = done_ids(out_path)
    jobs, bad = _rows(data, done, "standard input" if input_path == STDIN else str(input_path))
    ticker = _Ticker(len(jobs) + len(bad), progress)
    verifier = make_verifier(cfg, processes=processes) if jobs else None  # a missing REPL: nothing written
    try:
        out = _open_output(out_path, keep)
    except BaseException:
        if verifier is not None:
            verifier.close()
        raise
    with out:
        for rid, why in bad:
            verdict = Verdict(ERROR, MALFORMED, [why])
            _write(out, rid, verdict, 0.0)
            ticker.tick(verdict)
        if verifier is not None:
            try:
                for job, verdict, secs in verifier.verify_stream(jobs):
                    _write(out, job.key, verdict, secs)
                    ticker.tick(verdict)
            finally:
                verifier.close()
    if progress and skipped_message(len(done)):
        sys.stderr.write(skipped_message(len(done)) + "\n")
    return ticker.counts


def _rows(data: bytes, done: set[str], name: str) -> tuple[list[ProofJob], list[tuple[str, str]]]:
    """The rows of `data` not in `done`: the jobs, and (id, why) of the malformed ones (a repeated id is
    malformed, renamed `ID#line-N`); a ValueError when there is no row, or none that reads."""
    jobs: list[ProofJob] = []
    bad: list[tuple[str, str]] = []
    seen: set[str] = set()
    rows = readable = 0
    first_reason = ""
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.removesuffix(b"\r")
        if not line.strip():
            continue
        rid, parsed = parse_row(line, number)
        rows += 1
        if isinstance(parsed, str):
            first_reason = first_reason or f"line {number}: {parsed}"
        else:
            readable += 1
        if rid in done:
            continue
        if rid in seen:
            parsed = f"duplicate id {rid!r}"
            rid = f"{rid}#line-{number}"
        seen.add(rid)
        if isinstance(parsed, str):
            bad.append((rid, parsed))
        else:
            jobs.append(parsed)
    if not rows:
        raise ValueError(f"{name}: nothing to verify: it holds no rows (empty, or blank lines only); give a JSONL "
                         "file of {id, header, theorem, proof} or {id, code} rows; nothing was written")
    if not readable:
        lines = f"{rows} non-empty line" + ("s" if rows != 1 else "")
        raise ValueError(f"{name}: no row could be read ({lines}; {first_reason}); each row must be a JSON "
                         "object {id, header, theorem, proof} (`statement` for `theorem` also reads, as "
                         "`sgsbatch proofs RUN --json` writes it) or {id, code}; nothing was written")
    return jobs, bad


class _Ticker:
    """Counts per verdict, and the progress line: a counter redrawn in place (\\r) on a terminal; plain lines,
    every 10%, elsewhere."""

    def __init__(self, total: int, progress: bool) -> None:
        self.total, self.progress, self.finished, self.t0 = total, progress, 0, time.monotonic()
        self.counts: dict[str, int] = {}
        self.tty = sys.stderr.isatty()

    def tick(self, verdict: Verdict) -> None:
        self.finished += 1
        self.counts[verdict.verdict] = self.counts.get(verdict.verdict, 0) + 1
        finished, total = self.finished, self.total
        if self.progress and (finished == total or finished % max(1, total // (100 if self.tty else 10)) == 0):
            rate = finished / max(time.monotonic() - self.t0, 1e-9)
            summary = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
            line = f"verify: {finished}/{total} ({rate:.1f}/s) {summary}"
            sys.stderr.write(f"\r{line}  " + ("\n" if finished == total else "") if self.tty else line + "\n")
            sys.stderr.flush()


def _open_output(out_path: Path, keep: int) -> IO[str]:
    """`out_path` for appending, its torn tail (bytes past `keep`) cut first; OSError -> ValueError."""
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out = out_path.open("a", encoding="utf-8")
        if out.tell() > keep:  # a torn last line from a killed run
            out.truncate(keep)
        return out
    except OSError as e:
        raise ValueError(f"cannot write --out {out_path}: {e.strerror or e}") from None


def skipped_message(n: int) -> str:
    return f"verify: {n} ids already in the output were skipped" if n else ""
