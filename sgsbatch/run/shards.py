"""Shard files: how array tasks hand results on without touching the database.

A task for shard i of a phase appends each finished item to `shard_0000i.partial.jsonl`
(one line per item, fsynced), so a requeued task skips what it already did. When all items
are done it writes `shard_0000i.jsonl` atomically (temp file + rename) and then the completion
marker `shard_0000i.done`, always last. A torn last line of the item log (the task was killed
mid-write) is ignored. Crashes are recorded in `.failures` (survives requeues, and `resume` too:
it appends a line that starts the count again instead of deleting the history); a task that ran out
of retries leaves a `.failed` marker holding the reason. Each start of the shard's worker is an
attempt with a log of its own (run/attempts.py). A generating shard's token ids and logprobs are in
`shard_0000i.arrays`, appended before the item-log line that points at it, shared by the item log
and the output (run/token_arrays.py; `read_phase_arrays` reads records with them). Not covered:
what the items mean.

A finished output that cannot be read whole (gzip, zlib or UTF-8 errors, a line that is not JSON, a
cut-short file: bytes flipped or lost on disk) raises `CorruptShard`, naming the file and holding
the records read before the damage; `rebuild` quarantines it (run/quarantine.py).
"""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sgsbatch.config.schema import ROLLOUT_JOB
from sgsbatch.errors import DamagedFile, RunError
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.token_arrays import OFFSET, ArraysFile, RecordArrays, TokenArrays, append_block

if TYPE_CHECKING:
    from sgsbatch.run.paths import RunPaths


class CorruptShard(RunError):
    """A finished shard output that cannot be read whole: `path`, `reason`, and `records`, those read
    before the damage (all of them when a filter was given: `Shard.readable` reads them again)."""

    def __init__(self, path: Path, reason: str, records: list[dict[str, Any]]) -> None:
        self.path, self.reason, self.records = path, reason, records
        root = path.parents[3]  # RUN/rounds/rNNNN/<phase>/shard_N.jsonl[.gz]
        from sgsbatch.run.paths import RunPaths, command

        super().__init__(f"{path} is corrupt ({reason}); {len(records)} record(s) before the damage are readable. "
                         f"`{command('rebuild', RunPaths(root), '--force')}` moves it to {root / 'quarantine'} (kept, "
                         f"not deleted), keeps its readable records and rebuilds the database from the run directory")


_CORRUPT = (OSError, EOFError, zlib.error, ValueError)  # BadGzipFile is an OSError; JSON and UTF-8 errors ValueErrors


def read_output(path: Path, compressed: bool, keys: set[str] | None = None) -> list[dict[str, Any]]:
    """A finished output's records (those whose key is in `keys`, parsing only their lines), strictly:
    the file was written whole and atomically, so any unreadable byte raises CorruptShard. A missing
    plain file reads as no records (as it always did: a shard may finish with none)."""
    if not compressed and not path.exists():
        return []
    out: list[dict[str, Any]] = []
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if compressed else path.open("r", encoding="utf-8")) as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    raise ValueError(f"line {n} is cut short")
                if keys is not None and line_key(line) not in keys:
                    continue
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError(f"line {n} is not a JSON object")
                out.append(rec)
    except _CORRUPT as e:
        kind = "zlib" if isinstance(e, zlib.error) else type(e).__name__
        raise CorruptShard(path, f"{kind}: {e}", out) from None
    return out


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temp file left holding the space
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")


def append_json_line(path: Path, record: dict[str, Any]) -> None:
    """Append `record` as one fsynced JSON line, first cutting a torn last line left by a killed writer
    (so the new line starts clean): item logs and the search journal (phases/search.py)."""
    line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with path.open("rb") as f:
                f.seek(size - 1)
                torn = f.read(1) != b"\n"
            if torn:
                os.ftruncate(fd, path.read_bytes().rfind(b"\n") + 1)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> Any:
    """A JSON file sgsbatch wrote whole; one that is not JSON (or not UTF-8) any more is a DamagedFile naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError
        raise DamagedFile(path, f"{type(e).__name__}: {e}") from None


def jsonl_text(records: Iterable[dict[str, Any]]) -> str:
    """Records as the shard files hold them: one sorted-key JSON object a line (`line_key` relies on it)."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)


_DECODER = json.JSONDecoder()
_KEY = '"key": '


def line_key(line: str) -> str | None:
    """The `key` of a record line as `Shard.finish` writes it (sorted keys, so the record's own "key" is
    the first one on the line unless an earlier field holds an object with a "key": none does), or None."""
    i = line.find(_KEY)
    if i < 0:
        return None
    try:
        key, _ = _DECODER.raw_decode(line, i + len(_KEY))
    except json.JSONDecodeError:
        return None
    return key if isinstance(key, str) else None


class Shard:
    """The files of one shard (one array task) of one phase of one round."""

    def __init__(self, phase_dir: Path, index: int) -> None:
        self.dir = phase_dir
        self.index = index
        stem = f"shard_{index:05d}"
        self.output = phase_dir / f"{stem}.jsonl"
        self.output_gz = phase_dir / f"{stem}.jsonl.gz"  # a compacted round's output (round/compaction.py)
        self.marker = phase_dir / f"{stem}.done"
        self.partial = phase_dir / f"{stem}.partial.jsonl"
        self.arrays = phase_dir / f"{stem}.arrays"  # token ids and logprobs of item log and output (token_arrays.py)
        self.failures = phase_dir / f"{stem}.failures"
        self.failed_marker = phase_dir / f"{stem}.failed"
        self.attempts_file = phase_dir / f"{stem}.attempts.jsonl"  # every start and end of its worker
        self.attempt_log = phase_dir / f"{stem}.attempt.log"  # the latest attempt's worker output
        self.pid_file = phase_dir / f"{stem}.pid"
        self.lock_file = phase_dir / f"{stem}.lock"  # the owning worker's flock (run/lock.py)
        self.started_file = phase_dir / f"{stem}.started"
        self.ready_file = phase_dir / f"{stem}.ready"  # its start-up (engine load, REPL start) ended
        self.time_limits = phase_dir / f"{stem}.timelimits"
        self.total_file = phase_dir / f"{stem}.total"

    def set_total(self, items: int) -> None:
        """Record how many items this shard has in all (what `status` divides its item log by)."""
        if not self.total_file.exists():
            atomic_write_text(self.total_file, str(items))

    def total(self) -> int | None:
        try:
            return int(self.total_file.read_text())
        except (OSError, ValueError):
            return None

    def items_logged(self) -> int:
        """Items in the item log, by counting lines (cheap: no JSON parsed)."""
        try:
            with self.partial.open("rb") as f:
                return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        except FileNotFoundError:
            return 0

    def mark_started(self) -> None:
        """Record when the task first started (kept across retries and requeues)."""
        if not self.started_file.exists():
            atomic_write_json(self.started_file, {"time": time.time()})

    def started(self) -> float | None:
        return float(read_json(self.started_file)["time"]) if self.started_file.exists() else None

    def mark_ready(self) -> None:
        """Record when the task's start-up (engine load, verifier start) first ended (views/critical_path.py)."""
        if not self.ready_file.exists():
            atomic_write_json(self.ready_file, {"time": time.time()})

    def ready(self) -> float | None:
        return float(read_json(self.ready_file)["time"]) if self.ready_file.exists() else None

    def is_done(self) -> bool:
        return self.marker.exists()

    def done_items(self) -> dict[str, dict[str, Any]]:
        """Items already finished by an earlier attempt of this task, by key."""
        return {rec["key"]: rec for rec in read_jsonl(self.partial)}

    def items_after(self, offset: int, keys: set[str], max_bytes: int = 64 << 20) -> tuple[list[dict[str, Any]], int]:
        """The item log's records whose key is in `keys` among its complete lines from byte `offset`
        on (parsing only theirs), and the offset after the last line read: what a reader following
        a running task's item log (a streaming verify task) takes each time it looks. It stops before
        a line without its newline (being written, or torn and about to be cut by the next append)
        and before a line that does not parse (a network file system may show a write's bytes late).
        It reads about `max_bytes` at a time (more only for a longer line): a reader that comes late
        catches up over several calls."""
        try:
            with self.partial.open("rb") as f:
                f.seek(offset)
                data = f.read(max_bytes)
                while b"\n" not in data and (more := f.read(max_bytes)):
                    data += more
        except FileNotFoundError:
            return [], offset
        out: list[dict[str, Any]] = []
        pos = 0
        while (end := data.find(b"\n", pos)) >= 0:
            line = data[pos:end + 1].decode("utf-8", "replace")
            if line_key(line) in keys:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    break
                out.append(rec)
            pos = end + 1
        return out, offset + pos

    def append_item(self, record: dict[str, Any], arrays: TokenArrays | None = None) -> dict[str, Any]:
        """Append one finished item to the item log (one fsynced line); returns the record as written.

        `arrays` (a generating item's ids and logprobs) go to the arrays file first, fsynced, and the
        line records where (`arrays_at`): a line never points at bytes that are not there."""
        assert "key" in record, "item records carry a 'key'"
        self.dir.mkdir(parents=True, exist_ok=True)
        if arrays is not None:
            arrays.check_counts(record)
            record = {**record, OFFSET: append_block(self.arrays, arrays.block())}
        append_json_line(self.partial, record)
        return record

    def finish(self, records: Iterable[dict[str, Any]], meta: dict[str, Any] | None = None) -> None:
        body = jsonl_text(records)
        atomic_write_text(self.output, body)
        atomic_write_json(self.marker, {"time": time.time(), **(meta or {})})

    def is_compressed(self) -> bool:
        """True once compaction replaced the output with `shard_N.jsonl.gz` (and the plain file is gone)."""
        return not self.output.exists() and self.output_gz.exists()

    def output_file(self) -> Path:
        """The output as it is on disk: `shard_N.jsonl`, or once its round was compacted `shard_N.jsonl.gz`."""
        return self.output_gz if self.is_compressed() else self.output

    def read(self) -> list[dict[str, Any]]:
        """Every record of the finished output; CorruptShard if a byte of it cannot be read."""
        assert self.is_done(), f"{self.output} read before its completion marker"
        return read_output(self.output_file(), self.is_compressed())

    def replace_output(self, records: Iterable[dict[str, Any]]) -> None:
        """Write the finished output again, gzip-compressed (`output_gz`, atomically), then drop the plain
        file: what compaction does to an old round (a reader finds one or the other, the same records)."""
        assert self.is_done(), f"{self.output} replaced before its completion marker"
        body = jsonl_text(records)
        atomic_write_bytes(self.output_gz, gzip.compress(body.encode("utf-8"), mtime=0))
        self.output.unlink(missing_ok=True)

    def read_keys(self, keys: set[str]) -> dict[str, dict[str, Any]]:
        """The output's records whose key is in `keys`, by key, parsing only their lines (a verify task
        reads 1/k of a solve shard; in runs written before the arrays file, its lines carry every sample's
        token ids)."""
        assert self.is_done(), f"{self.output} read before its completion marker"
        out: dict[str, dict[str, Any]] = {}
        for rec in read_output(self.output_file(), self.is_compressed(), keys):
            assert rec["key"] in keys, f"{self.output}: line_key misread {rec['key']!r}"
            out[rec["key"]] = rec
        return out

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = read_json(self.marker)
        return out

    def failure_history(self) -> list[dict[str, Any]]:
        """Every line of the failure log, oldest first: crashes ({"time", "reason", "attempt"}) and the
        points where `resume` started the count again ({"time", "cleared": true, "failed": reason|None})."""
        return read_jsonl(self.failures)

    def failure_count(self) -> int:
        """Crashes since the count last started again (what `run.max_task_retries` limits)."""
        history = self.failure_history()
        cleared = max((i for i, rec in enumerate(history) if rec.get("cleared")), default=-1)
        return len(history) - cleared - 1

    def record_failure(self, reason: str, attempt: int | None = None) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.failures.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), "reason": reason[-2000:], "attempt": attempt}) + "\n")
        return self.failure_count()

    def mark_failed(self, reason: str) -> None:
        atomic_write_json(self.failed_marker, {"time": time.time(), "reason": reason[-4000:]})

    def failed_reason(self) -> str | None:
        if not self.failed_marker.exists():
            return None
        reason: str = read_json(self.failed_marker)["reason"]
        return reason

    def record_time_limit(self, progress: dict[str, Any]) -> bool:
        """Record a stop at the time limit with a signature of the progress made so far; True if
        the previous stop at the time limit had the same signature (no progress in between)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        earlier = read_jsonl(self.time_limits)
        with self.time_limits.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), "progress": progress}, sort_keys=True) + "\n")
        return bool(earlier) and earlier[-1].get("progress") == progress

    def progress(self) -> dict[str, Any]:
        """What this task has achieved so far: items in its item log, its completion marker, and
        (training: the phase's subdirectories) each checkpoint's step and each marker file.
        Other shards' files are not this task's progress."""
        steps = {}
        for f in sorted(self.dir.glob("*/**/progress.json")):
            try:
                steps[str(f.relative_to(self.dir))] = json.loads(f.read_text()).get("steps")
            except (OSError, ValueError):
                continue
        markers = sorted(str(f.relative_to(self.dir)) for f in self.dir.glob("*/**/*")
                         if f.name.endswith(".done") or f.name in ("prepared.json", "export.json"))
        return {"items": len(self.done_items()), "done": self.marker.exists(), "steps": steps, "markers": markers}

    def clear_failures(self) -> None:
        """What `resume` does to an unfinished shard: its crash count starts again (a line in the failure
        log; the history stays) and its `.failed` marker goes; its stops at the time limit are
        forgotten only if they failed it (a person raised the limit since), so a resume after a mere
        broken chain still counts towards the no-progress rule."""
        failed = self.failed_reason()
        if failed is not None:
            self.time_limits.unlink(missing_ok=True)
        if failed is not None or self.failure_count():
            with self.failures.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"time": time.time(), "cleared": True, "failed": failed}) + "\n")
        self.failed_marker.unlink(missing_ok=True)


def shards(phase_dir: Path, count: int) -> list[Shard]:
    return [Shard(phase_dir, i) for i in range(count)]


def unfinished(phase_dir: Path, count: int) -> list[int]:
    """Indices of the phase's shards without a completion marker (the one definition of "unfinished")."""
    return [s.index for s in shards(phase_dir, count) if not s.is_done()]


def failed_reason(phase_dir: Path, count: int) -> str | None:
    """The reason of the phase's first shard that ran out of retries, or None."""
    for s in shards(phase_dir, count):
        reason = s.failed_reason()
        if reason:
            return reason
    return None


def phase_span(phase_dir: Path, count: int, end: float | None = None) -> tuple[float, float | None] | None:
    """(first task start, last completion marker's time or `end`; None while no task has finished),
    or None before any task started: the phase's real start and end, from its shard files."""
    ss = shards(phase_dir, count)
    starts = [t for t in (s.started() for s in ss) if t is not None]
    if not starts:
        return None
    ends = [float(s.meta()["time"]) for s in ss if s.is_done()] if end is None else [end]
    return min(starts), (max(ends) if ends else None)


def phase_wall_s(phase_dir: Path, count: int, end: float | None = None) -> float | None:
    """Seconds from the phase's first task start to its last completion marker (or `end`)."""
    span = phase_span(phase_dir, count, end)
    return span[1] - span[0] if span is not None and span[1] is not None else None


def read_phase(phase_dir: Path, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in shards(phase_dir, count):
        out.extend(s.read())
    return out


def read_phase_arrays(phase_dir: Path, count: int) -> list[tuple[dict[str, Any], RecordArrays]]:
    """`read_phase` with each record's token arrays, read when first asked for (run/token_arrays.py)."""
    out: list[tuple[dict[str, Any], RecordArrays]] = []
    for s in shards(phase_dir, count):
        file = ArraysFile(s.arrays)
        out.extend((rec, RecordArrays(rec, file)) for rec in s.read())
    return out


def rollout_shard_of(paths: RunPaths, r: int) -> tuple[int, Shard] | None:
    """The colocated rollout job (scheduling/colocated.py) that covers round r: the round k <= r it started at,
    the newest with one, and its shard (None: no rollout job started by then). Its failure is round r's."""
    for k in range(r, -1, -1):
        d = paths.phase_dir(k, ROLLOUT_JOB)
        if d.exists():
            return k, Shard(d, 0)
    return None
