"""Corrupt shard outputs moved aside: kept, named, and what could be read of them recovered.

`quarantine` takes a `CorruptShard` (run/shards.py: a finished output with bytes that cannot be
read) and, in this order: records it in `RUN/quarantine/quarantine.jsonl` (the file, where it went,
the reason, how many records were recovered of how many the shard had), moves the file to
`RUN/quarantine/<its path in the run directory>.<time>` (never deleted), and writes the records
read before the damage back as the shard's output, in the same form (gzip-compressed when it was),
so that the round's other shards and every other round read as before. `rebuild` does it
(ops/rebuild.py); `status` lists what was quarantined (`records`). A command that meets a corrupt
output and cannot go on (`resume` ending a round) records it with `note` in
`RUN/quarantine/found.jsonl`; `status` (which reads no shard output whole) reports each such file
while it is still there unchanged (`unresolved`), with the rebuild that quarantines it.

What is lost is lost: the items after the damage in that shard (their samples, verdicts or
conjectures) are missing from the rebuilt database, and the round's results join what is left
(`round/results.round_results` drops a solve item whose verdicts or problem went with a
quarantined file of its round). Not covered: repairing the damaged bytes; item logs (`.partial`)
and the other files of a shard (markers, arrays).
"""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from typing import Any

from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import (
    CorruptShard,
    Shard,
    append_json_line,
    atomic_write_bytes,
    jsonl_text,
)

DIR = "quarantine"
LOG = "quarantine.jsonl"
FOUND = "found.jsonl"  # corrupt files a command met (resume) and left in place: what `status` reports


def log_path(paths: RunPaths) -> Path:
    return paths.root / DIR / LOG


def records(paths: RunPaths) -> list[dict[str, Any]]:
    """Every quarantine of the run, oldest first: {"time", "file", "moved_to", "reason", "round",
    "records_recovered", "records_expected" (None when the shard did not record its total)}."""
    return read_jsonl(log_path(paths))


def quarantined_in(paths: RunPaths, r: int) -> bool:
    """Whether a file of round r was quarantined (its results may lack what went with it)."""
    return any(x["round"] == r for x in records(paths))


def quarantine(paths: RunPaths, e: CorruptShard) -> dict[str, Any]:
    """Move e.path aside, keep its readable records as the shard's output, log it; returns the log record."""
    rel = e.path.relative_to(paths.root)
    dest = paths.root / DIR / f"{rel}.{time.strftime('%Y%m%d-%H%M%S')}"
    shard = Shard(e.path.parent, int(e.path.name.split(".")[0].split("_")[1]))
    try:
        readable = shard.read()  # every record before the damage (a CorruptShard from read_keys holds fewer)
    except CorruptShard as again:
        readable = again.records
    rec = {"time": time.time(), "file": str(rel), "moved_to": str(dest.relative_to(paths.root)),
           "reason": e.reason, "round": int(rel.parts[1][1:]), "records_recovered": len(readable),
           "records_expected": shard.total()}
    dest.parent.mkdir(parents=True, exist_ok=True)
    append_json_line(log_path(paths), rec)
    os.replace(e.path, dest)
    body = jsonl_text(readable).encode("utf-8")
    atomic_write_bytes(e.path, gzip.compress(body, mtime=0) if e.path.name.endswith(".gz") else body)
    return rec


def describe(rec: dict[str, Any]) -> str:
    """One line for a quarantine record."""
    of = "" if rec.get("records_expected") is None else f" of {rec['records_expected']}"
    return (f"{rec['file']} was corrupt ({rec['reason']}): moved to {rec['moved_to']}; "
            f"{rec['records_recovered']}{of} record(s) recovered, the rest of that shard is lost")


def note(paths: RunPaths, e: CorruptShard) -> None:
    """Record that e.path was found corrupt and left in place (status reports it until it changes)."""
    try:
        st = e.path.stat()
    except OSError:
        return
    (paths.root / DIR).mkdir(parents=True, exist_ok=True)
    append_json_line(paths.root / DIR / FOUND, {"time": time.time(), "file": str(e.path.relative_to(paths.root)),
                                                "reason": e.reason, "size": st.st_size, "mtime": st.st_mtime,
                                                "records_readable": len(e.records)})


def unresolved(paths: RunPaths) -> list[dict[str, Any]]:
    """The files `note` recorded that are still there as they were found (not quarantined, not replaced)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(paths.root / DIR / FOUND):
        try:
            st = (paths.root / rec["file"]).stat()
        except OSError:
            continue
        if (st.st_size, st.st_mtime) == (rec["size"], rec["mtime"]):
            out[rec["file"]] = rec
    return list(out.values())
