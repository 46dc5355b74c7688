"""Writing a generating shard's records in either format, for tests that build run directories by hand.

`finish_records` takes records with their ids and logprobs inline (`prompt_ids`; each sample's
`token_ids`, `logprobs`: the format of runs written before the arrays file) and writes them as a
generating task does today (counts in the JSON, arrays in `shard_N.arrays`, run/token_arrays.py),
or with `inline=True` as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sgsbatch.run.shards import Shard
from sgsbatch.run.token_arrays import TokenArrays, samples_of

FORMATS = ("arrays", "inline")  # pytest parameters: today's format, and runs written before


def split_arrays(record: dict[str, Any]) -> tuple[dict[str, Any], TokenArrays]:
    """An inline record as today's JSON record (counts only) and its arrays."""
    samples = samples_of(record)
    arrays = TokenArrays(record.get("prompt_ids", []), [s["token_ids"] for s in samples],
                         [s["logprobs"] for s in samples])

    def counted(s: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in s.items() if k not in ("token_ids", "logprobs")}, "n_tokens": len(s["token_ids"])}

    out = {k: v for k, v in record.items() if k != "prompt_ids"}
    out["n_prompt_tokens"] = len(arrays.prompt_ids)
    if "samples" in record:
        out["samples"] = [counted(s) for s in samples]
    else:
        out = counted(out)
    return out, arrays


def finish_records(shard: Shard, records: Iterable[dict[str, Any]], inline: bool = False) -> None:
    """Append each record to the shard's item log (arrays first), then finish it, as `stream_items` does."""
    if inline:
        shard.finish(records)
        return
    shard.finish([shard.append_item(*split_arrays(rec)) for rec in records])
