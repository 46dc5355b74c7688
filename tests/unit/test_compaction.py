"""round/compaction.py on hand-written shard files: what a compacted record keeps, which rounds go.

Covered: a record loses token ids, logprobs and prompt ids for their counts and keeps everything
else; compaction is idempotent; `token_count` reads both forms; only finished shards are touched,
item logs and example files go, the marker is written; which round ending round r compacts
(Expert Iteration keeps its window); a run checks one marker a round once caught up;
`records.keep_sample_tokens` turns it off. A whole run compacted and rebuilt:
tests/integration/test_compacted_run.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sgsbatch.config.schema import Config
from sgsbatch.round import compaction as C
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard


def _cfg(**solver: object) -> Config:
    base = Config()
    cfg = dataclasses.replace(base, solver=dataclasses.replace(base.solver, **solver),
                              run=dataclasses.replace(base.run, rounds=10))
    return dataclasses.replace(cfg, shards=dataclasses.replace(cfg.shards, conjecture=1, solve=2, guide=1, verify=0))


SOLVE_ITEM = {"key": "p1", "problem_id": "p1", "is_target": True, "prompt_ids": [1, 2, 3],
              "samples": [{"text": "a", "token_ids": [5, 6], "logprobs": [-0.1, -0.2], "finish_reason": "stop",
                           "ok": True, "proof": "simp", "reason": None},
                          {"text": "b", "token_ids": [], "logprobs": [], "finish_reason": "length",
                           "ok": False, "proof": None, "reason": "no_code_block"}]}
GUIDE_ITEM = {"key": "c0-x", "conjecture_id": "c0-x", "text": "r", "token_ids": [9, 9, 9], "logprobs": [-1.0] * 3,
              "finish_reason": "stop", "ok": True, "reason": None, "relevance": 1.0, "redundant": 0.0,
              "complexity": 0.5}


def test_a_compacted_record_keeps_everything_but_the_ids() -> None:
    out = C.compact_record(SOLVE_ITEM)
    assert out["n_prompt_tokens"] == 3 and "prompt_ids" not in out
    assert [C.token_count(s) for s in out["samples"]] == [2, 0]
    for before, after in zip(SOLVE_ITEM["samples"], out["samples"], strict=True):  # type: ignore[call-overload]
        assert {k: v for k, v in before.items() if k not in ("token_ids", "logprobs")} == \
            {k: v for k, v in after.items() if k != "n_tokens"}
    assert C.compact_record(out) == out  # idempotent
    g = C.compact_record(GUIDE_ITEM)
    assert C.token_count(g) == 3 and "token_ids" not in g and "logprobs" not in g and g["relevance"] == 1.0
    assert [C.token_count(s) for s in SOLVE_ITEM["samples"]] == [2, 0]  # type: ignore[index]
    lean = C.compact_record(SOLVE_ITEM, [True, False])  # records.keep_text = "verified": sample 0 verified
    assert lean["samples"][0]["text"] == "a" and lean["samples"][0]["proof"] == "simp"
    assert "text" not in lean["samples"][1] and "proof" not in lean["samples"][1]
    assert lean["samples"][1]["reason"] == "no_code_block" and C.token_count(lean["samples"][1]) == 0
    assert "text" not in C.compact_record(GUIDE_ITEM, False) and C.compact_record(GUIDE_ITEM, False)["relevance"] == 1.0


def _round(paths: RunPaths, r: int, cfg: Config, done: bool = True) -> None:
    for phase in cfg.phases_of_round(r):
        if phase == "train":
            ex = paths.phase_dir(r, "train") / "examples"
            ex.mkdir(parents=True)
            (ex / "solver.npz").write_bytes(b"x" * 100)
            if done:
                Shard(paths.phase_dir(r, "train"), 0).finish([{"key": "solver"}])
            continue
        for i in range(cfg.shard_count(phase)):
            sh = Shard(paths.phase_dir(r, phase), i)
            rec = {"solve": SOLVE_ITEM, "conjecture": SOLVE_ITEM, "guide": GUIDE_ITEM}.get(phase, {"key": "k", "v": 1})
            sh.append_item(dict(rec))
            if done or i == 0:
                sh.finish([dict(rec)])


def test_compact_round_rewrites_finished_outputs_and_drops_logs(tmp_path: Path) -> None:
    cfg, paths = _cfg(), RunPaths(tmp_path)
    _round(paths, 1, cfg, done=False)  # solve shard 1 unfinished
    freed = C.compact_round(cfg, paths, 1)
    assert freed > 0 and C.is_compacted(paths, 1)
    done, running = Shard(paths.phase_dir(1, "solve"), 0), Shard(paths.phase_dir(1, "solve"), 1)
    assert "token_ids" not in json.dumps(done.read()) and not done.partial.exists()
    assert done.output_gz.exists() and not done.output.exists()  # compressed, read the same way
    assert done.read_keys({"p1"})["p1"]["samples"][0]["n_tokens"] == 2
    assert read_jsonl(running.partial)[0]["prompt_ids"] == [1, 2, 3]  # unfinished: untouched
    assert "token_ids" not in json.dumps(Shard(paths.phase_dir(1, "guide"), 0).read())
    assert Shard(paths.phase_dir(1, "verify"), 0).read() == [{"key": "k", "v": 1}]
    assert C.compact_round(cfg, paths, 1) == 0  # again: nothing left to free
    assert not Shard(paths.phase_dir(1, "verify"), 0).partial.exists()
    assert list((paths.phase_dir(1, "train") / "examples").glob("*.npz"))  # kept: see compact_after


def test_which_rounds_an_ending_compacts(tmp_path: Path) -> None:
    assert C.rounds_to_compact(_cfg(), 4) == 4
    assert C.rounds_to_compact(_cfg(objective="ei", ei_rounds=3), 4) == 2  # round 5 trains on rounds 3-5
    assert C.rounds_to_compact(_cfg(objective="ei", ei_rounds=3), 1) == -1
    cfg, paths = _cfg(), RunPaths(tmp_path)
    for r in range(4):
        _round(paths, r, cfg, done=r != 2)  # round 2's train job has no marker
    def examples(r: int) -> bool:
        return bool(list((paths.phase_dir(r, "train") / "examples").glob("*.npz")))

    assert C.compact_after(cfg, paths, 1) == [1, 0]
    # round 1's example files stay until round 2 has trained: a lost round 1 checkpoint can train again
    assert not examples(0) and examples(1)
    assert C.compact_after(cfg, paths, 2) == []  # round 2 left whole: its training may run again
    assert not C.is_compacted(paths, 2) and not examples(1) and examples(2)
    assert C.compact_after(cfg, paths, 3) == [3]  # stops at round 1's marker
    assert C.compact_after(cfg, paths, 3) == []
    assert examples(2) and examples(3)  # round 2 was never compacted (no marker): nothing of it goes
    keep = dataclasses.replace(cfg, records=dataclasses.replace(cfg.records, keep_sample_tokens=True))
    _round(paths, 4, cfg)
    assert C.compact_after(keep, paths, 4) == [] and not C.is_compacted(paths, 4)
    assert "token_ids" in json.dumps(Shard(paths.phase_dir(4, "solve"), 0).read())
