"""Old rounds' generation records, compacted once no training reads them again.

A generating task records each sample's token ids and logprobs, and each item's prompt ids, so that
the round's train job trains on exactly what was sampled (never re-tokenised text): in the shard's
arrays file (run/token_arrays.py; runs written before it: inline in the JSON records). After that
training they are dead weight: ~1.7k ids and as many logprobs per Solver sample, ~0.6 GB a round of
D_3k in the arrays files (as JSON it was ~4 GB; measured: bench/README.md, bench_rehearsal). Unless
`records.keep_sample_tokens`, once round r's train job has written its completion marker (its
training never runs again) it compacts the rounds no later training reads: round r itself, or with
Expert Iteration (which trains on the stored proofs of the last `solver.ei_rounds` rounds) round
r - ei_rounds + 1. Compacting a round:

* rewrites each finished output of its generating phases (conjecture, solve, guide) without its
  records' `arrays_at` (their counts `n_tokens`, `n_prompt_tokens` stay; a record of a run written
  before the arrays file has its inline `token_ids` and `logprobs` replaced by `n_tokens`, its
  `prompt_ids` by `n_prompt_tokens`; text, extraction, finish reason, review fields and keys
  unchanged), and gzip-compresses it with the round's verify outputs (`shard_N.jsonl.gz`, written
  atomically before the plain file goes; `Shard` reads either): the model's texts stay, ~5x
  smaller, unless `records.keep_text = "verified"`, which keeps the reply text only of verified
  Solver samples (a real run's replies are ~6 KB each: ~240 MB a round before gzip, ~12 GB
  compressed over 200 rounds of D_3k; the statements, extractions, scores and verified proofs stay
  either way);
* deletes the item logs (`.partial.jsonl`) and the arrays files (`.arrays`) of the round's finished
  shards, once their outputs no longer point into them (their records are in the outputs); the
  train job's example files (`train/examples/*.npz`) go once the next round has trained too, so a
  round whose checkpoint is lost can still train again until then;
* writes `rounds/rNNNN/compacted` last, so a compaction cut short is done again.

Everything the database, `rebuild`, the metrics and the report derive stays readable: token counts
go through `token_count`. Not covered: checkpoints (round/checkpoints.py), the database.

Cost: the train job does it after the next round is submitted (off the chain's critical path),
reading and writing the round's records once (~30 s for a full D_3k round of a real run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.paths import RunPaths, tree_bytes
from sgsbatch.run.shards import Shard, atomic_write_text, read_phase, shards, unfinished
from sgsbatch.run.token_arrays import OFFSET
from sgsbatch.verification.verdict import VERIFIED

GENERATING_PHASES = ("conjecture", "solve", "guide")
MARKER = "compacted"


def token_count(sample: dict[str, Any]) -> int:
    """A sample's generated tokens, whether its ids are still there or compacted to a count."""
    ids = sample.get("token_ids")
    if ids is not None:
        return len(ids)
    n: int = sample["n_tokens"]
    return n


def compact_record(rec: dict[str, Any], keep_text: list[bool] | bool = True) -> dict[str, Any]:
    """One item's record without token ids, logprobs and prompt ids (their counts instead), and without
    `arrays_at` (the arrays file goes); idempotent.

    A generating item is either a record with `samples` (conjecture, solve) or one sample itself
    (guide). `keep_text` False (per sample, or for all) also drops the reply's `text` and a Solver
    sample's `proof` (`records.keep_text = "verified"`: the caller keeps them for verified samples).
    """
    out = dict(rec)
    out.pop(OFFSET, None)
    if "prompt_ids" in out:
        out["n_prompt_tokens"] = len(out.pop("prompt_ids"))
    if "samples" in out:
        keep = keep_text if isinstance(keep_text, list) else [keep_text] * len(out["samples"])
        out["samples"] = [_compact_sample(s, k) for s, k in zip(out["samples"], keep, strict=True)]
    else:
        out = _compact_sample(out, bool(keep_text))
    return out


def _compact_sample(s: dict[str, Any], keep_text: bool) -> dict[str, Any]:
    drop = ("token_ids", "logprobs") + (() if keep_text else ("text", "proof"))
    out = {k: v for k, v in s.items() if k not in drop}
    if "token_ids" in s:
        out["n_tokens"] = len(s["token_ids"])
    return out


def marker(paths: RunPaths, r: int) -> Path:
    return paths.round_dir(r) / MARKER


def is_compacted(paths: RunPaths, r: int) -> bool:
    return marker(paths, r).exists()


def compact_round(cfg: Config, paths: RunPaths, r: int) -> int:
    """Compact round r (see the module docstring); returns the bytes freed. Only for a round whose
    training is finished: its unfinished shards are left as they are."""
    before = tree_bytes(paths.round_dir(r))
    verified: dict[str, list[bool]] | None = None  # per solve item, which samples keep their text
    verify_dir, n_verify = paths.phase_dir(r, "verify"), shards_at(cfg, paths, r, "verify")
    if cfg.records.keep_text == "verified" and not unfinished(verify_dir, n_verify):
        verified = {v["key"]: [x["verdict"] == VERIFIED for x in v["verdicts"]]
                    for v in read_phase(verify_dir, n_verify)}
    for phase in cfg.phases_of_round(r):
        if phase == "train":
            continue  # its example files go one round later (`compact_after`)
        for sh in shards(paths.phase_dir(r, phase), shards_at(cfg, paths, r, phase)):
            if not sh.is_done():
                continue
            if phase in GENERATING_PHASES or phase == "verify":
                _compact_output(sh, phase, verified)
            sh.partial.unlink(missing_ok=True)
            sh.arrays.unlink(missing_ok=True)  # only now: the output no longer points into it
    atomic_write_text(marker(paths, r), "")
    return max(0, before - tree_bytes(paths.round_dir(r)))


def _compact_output(sh: Shard, phase: str, verified: dict[str, list[bool]] | None) -> None:
    if sh.is_compressed():
        return  # compacted before
    if verified is None or phase == "verify":
        sh.replace_output([compact_record(x) for x in sh.read()])
    elif phase == "solve":
        sh.replace_output([compact_record(x, verified.get(x["key"], False)) for x in sh.read()])
    else:  # conjecture, guide: statements and review scores stay, the replies go
        sh.replace_output([compact_record(x, False) for x in sh.read()])


def rounds_to_compact(cfg: Config, r: int) -> int:
    """The newest round no training reads once round r's train job has finished (-1: none yet):
    round r itself, or with Expert Iteration the newest round outside the `ei_rounds` window that
    round r + 1 trains on (the window stays whole at the end of a run too: `resume --set
    run.rounds=N` may go on)."""
    return r - cfg.solver.window_rounds() + 1


def compact_after(cfg: Config, paths: RunPaths, r: int) -> list[int]:
    """After round r's train job wrote its completion marker: compact every finished round up to
    `rounds_to_compact` not compacted yet, newest first, stopping at the first one already compacted
    (a long run checks one marker a round; a compaction cut short is caught up by the next round's).
    A round whose train job has no completion marker is left whole: its training may run again."""
    if cfg.records.keep_sample_tokens:
        return []
    done = []
    k = rounds_to_compact(cfg, r)
    while k >= 0 and not is_compacted(paths, k):
        if Shard(paths.phase_dir(k, "train"), 0).is_done():
            compact_round(cfg, paths, k)
            done.append(k)
        k -= 1
    for q in {r - 1, *done}:  # example files of compacted rounds, once the next round has trained
        if 0 <= q < r and is_compacted(paths, q):
            drop_examples(paths, q)
    return done


def drop_examples(paths: RunPaths, r: int) -> None:
    """Delete round r's training example files (`train/examples/*.npz`). They are kept one round
    longer than the records: with them, a round whose checkpoint was lost trains again (`resume`)
    while the next round has not trained on top of it."""
    for f in sorted((paths.phase_dir(r, "train") / "examples").glob("*.npz")):
        f.unlink()
