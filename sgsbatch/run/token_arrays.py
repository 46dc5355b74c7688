"""Token arrays: a generating shard's prompt ids, token ids and logprobs, in a binary file beside its JSONL.

A generating task (conjecture, solve, guide) keeps, per item, the chat-templated prompt ids and
each sample's token ids and logprobs, so that training uses exactly what was sampled. They live in
the shard's arrays file `shard_N.arrays` (raw little-endian numbers), not in its JSON lines: one
block per item, appended and fsynced *before* the item-log line that points at it (the record's
`arrays_at`, the block's byte offset), so a line never points at missing bytes. A block torn by a
killed writer is referenced by no line; the next block starts after it, at the next multiple of
8 bytes (a requeued task wastes those bytes, it never reads them). The shard's output
(`shard_N.jsonl`, written at the end) points into the same file: the arrays are written once.

A block: the prompt ids (int32, as many as the record's `n_prompt_tokens`), then for each sample
in order (`samples_of`: a record's `samples`, or the record itself for a Guide review) its token
ids (int32, the sample's `n_tokens`) and its logprobs (float32, as many). float32 loses nothing
the engines give (vLLM and the transformers backend compute logprobs in float32) or the trainer
uses (it compares them in float32); the SIMULATED engine's float64 draws are rounded.

Reading (`RecordArrays`): numpy views of a memory map opened on first use, so a reader that needs
only texts and counts (verify, guide, metrics, `rebuild`) never opens the file, and the train job
holds only the arrays it trains on. A record written before this file existed (its ids and
logprobs inline as JSON lists) reads the same way; a compacted record (round/compaction.py) has
neither, and asking for its arrays is a bug. Not covered: what the records mean, compaction.
"""

from __future__ import annotations

import mmap
import os
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ids: TypeAlias = Sequence[int] | npt.NDArray[np.int32]  # a record's lists, or views of an arrays file
    Logprobs: TypeAlias = Sequence[float] | npt.NDArray[np.float32]
else:
    Ids = Logprobs = Any

ALIGN = 8  # a block starts at a multiple of this many bytes (4-byte numbers stay aligned after a torn block)
ITEM = 4  # bytes per number: int32 ids, float32 logprobs
OFFSET = "arrays_at"  # the record field that holds its block's byte offset


def samples_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A generating record's samples in block order: its `samples`, or the record itself (a Guide review)."""
    samples: list[dict[str, Any]] = record.get("samples", [record])
    return samples


@dataclass(frozen=True)
class TokenArrays:
    """One item's arrays as generated: its prompt ids, and per sample its token ids and logprobs."""

    prompt_ids: Ids
    token_ids: Sequence[Ids]
    logprobs: Sequence[Logprobs]

    def block(self) -> bytes:
        """The item's block in the arrays file (see the module docstring)."""
        assert len(self.token_ids) == len(self.logprobs), "token ids and logprobs for every sample"
        parts = [_pack("i", self.prompt_ids)]
        for ids, lps in zip(self.token_ids, self.logprobs, strict=True):
            assert len(ids) == len(lps), "one logprob per token id"
            parts += [_pack("i", ids), _pack("f", lps)]
        return b"".join(parts)

    def check_counts(self, record: dict[str, Any]) -> None:
        """Assert that `record`'s counts (`n_prompt_tokens`, each sample's `n_tokens`) describe this block."""
        assert record["n_prompt_tokens"] == len(self.prompt_ids), "n_prompt_tokens is the prompt's ids"
        assert [s["n_tokens"] for s in samples_of(record)] == [len(x) for x in self.token_ids], \
            "the record's samples (n_tokens) are the generation's, in order"


def _pack(code: str, values: Any) -> bytes:
    a = array(code, values)
    assert a.itemsize == ITEM, f"array({code!r}) has {a.itemsize}-byte items here"
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def append_block(path: Path, block: bytes) -> int:
    """Append `block` to the arrays file at `path` at the next multiple of ALIGN bytes, fsynced; its offset.

    Whatever a killed writer left past the last whole block stays there, unreferenced. One writer
    at a time (the shard's lock, run/lock.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        offset = size + (-size % ALIGN)
        data = memoryview(b"\0" * (offset - size) + block)
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return offset


class ArraysFile:
    """A shard's arrays file for reading: memory-mapped on the first view asked for (never for none)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._map: mmap.mmap | None = None

    def view(self, offset: int, n: int, dtype: str) -> Any:
        """`n` numbers of `dtype` ("<i4" or "<f4") at byte `offset`: a read-only numpy view, not a copy."""
        import numpy as np

        if n == 0:
            return np.empty(0, dtype=dtype)
        end = offset + n * ITEM
        if self._map is None or len(self._map) < end:  # first use, or the file grew since it was mapped
            with self.path.open("rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert end <= len(self._map), f"{self.path}: a record points past its end ({end} > {len(self._map)} bytes)"
        return np.frombuffer(self._map, dtype=dtype, count=n, offset=offset)


class RecordArrays:
    """The arrays of one generating record, read on demand: views into its shard's arrays file, or the
    record's own lists (a run written before the arrays file existed)."""

    def __init__(self, record: dict[str, Any], file: ArraysFile | None) -> None:
        self.record = record
        self.file = file if OFFSET in record else None
        self._starts: list[int] | None = None

    def _start(self, piece: int) -> int:
        """Byte offset of piece 0 (the prompt ids), 2k + 1 (sample k's ids) or 2k + 2 (its logprobs)."""
        if self._starts is None:
            at = self.record[OFFSET] + self.record["n_prompt_tokens"] * ITEM
            self._starts = [self.record[OFFSET]]
            for s in samples_of(self.record):
                self._starts += [at, at + s["n_tokens"] * ITEM]
                at += 2 * s["n_tokens"] * ITEM
        return self._starts[piece]

    def _inline(self, field: str, sample: int | None) -> Any:
        where = self.record if sample is None else samples_of(self.record)[sample]
        assert field in where, (f"item {self.record.get('key')!r} has no {field} (a compacted round keeps only "
                                f"counts: round/compaction.py)")
        return where[field]

    @property
    def prompt_ids(self) -> Ids:
        if self.file is None:
            return self._inline("prompt_ids", None)
        return self.file.view(self._start(0), self.record["n_prompt_tokens"], "<i4")

    def token_ids(self, sample: int) -> Ids:
        if self.file is None:
            return self._inline("token_ids", sample)
        return self.file.view(self._start(2 * sample + 1), samples_of(self.record)[sample]["n_tokens"], "<i4")

    def logprobs(self, sample: int) -> Logprobs:
        if self.file is None:
            return self._inline("logprobs", sample)
        return self.file.view(self._start(2 * sample + 2), samples_of(self.record)[sample]["n_tokens"], "<f4")
