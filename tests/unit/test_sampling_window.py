"""The generating phases' window (phases/sampling.stream_items), driven by a recording test double.

`RecordingGenerator` is a test double of a generation engine (no model): a request finishes after
a number of steps fixed by its key, its samples are a function of its seed, and it records how
many requests were in flight at every step and what the shard's item log held at every `add`.
Covered: the window stays full while items remain, each finished item is in the item log before
the window is refilled, prompts go in shortest first, an interruption mid-window aborts the
requests in flight and a resumed task ends with records identical to an uninterrupted one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from sgsbatch.backends.generation import EngineStats, Generation, Request, Sample
from sgsbatch.config.loading import load_config
from sgsbatch.phases.sampling import request_for, sample_record, stream_items
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.run.jsonl import read_jsonl
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import Shard
from sgsbatch.run.token_arrays import ArraysFile, RecordArrays

REPO = Path(__file__).resolve().parents[2]


class RecordingGenerator:
    """Test double of a generation engine: deterministic fake samples, everything recorded."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.stats = EngineStats()
        self.flying: dict[str, tuple[Request, int]] = {}  # key -> (request, steps left)
        self.returned = 0
        self.in_flight_per_step: list[tuple[int, int]] = []  # (in flight, returned before this step)
        self.log_at_add: list[tuple[int, int]] = []  # (items in the log, requests returned) at each add
        self.added: list[str] = []
        self.aborted: list[str] = []
        self.closed = False

    def add(self, request: Request) -> None:
        assert request.key not in self.flying
        self.log_at_add.append((len(read_jsonl(self.shard.partial)), self.returned))
        self.added.append(request.key)
        steps = 1 + int(hashlib.sha256(request.key.encode()).hexdigest(), 16) % 4
        self.flying[request.key] = (request, steps)
        self.stats.prompts += 1

    def step(self) -> list[tuple[Request, Generation]]:
        self.in_flight_per_step.append((len(self.flying), self.returned))
        out = []
        for key, (req, left) in list(self.flying.items()):
            if left > 1:
                self.flying[key] = (req, left - 1)
                continue
            del self.flying[key]
            samples = [Sample(f"s{req.seed % 1000}-{k}", [req.seed % 97, k], [-0.5, -0.25], "stop") for k in range(req.n)]
            out.append((req, Generation([1, 2, len(req.messages[0]["content"])], samples)))
        self.returned += len(out)
        return out

    def abort(self) -> None:
        self.aborted = sorted(self.flying)
        self.flying.clear()

    def in_flight(self) -> int:
        return len(self.flying)

    def close(self) -> None:
        self.closed = True

    def generate(self, *a: Any, **k: Any) -> list[Generation]:
        raise AssertionError("phases stream; they never call generate()")


def _task(tmp_path: Path, width: int, stop_after: int | None = None) -> tuple[Task, list[int]]:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"generation.max_in_flight={width}", "shards.solve=1"])
    paths = RunPaths(tmp_path / "run")
    calls = [0]

    def should_stop() -> bool:
        calls[0] += 1
        return stop_after is not None and calls[0] > stop_after

    return Task(cfg, paths, 0, "solve", Shard(paths.phase_dir(0, "solve"), 0), should_stop), calls


ITEMS = [f"item{i:02d}" + "x" * ((i * 7) % 5) for i in range(11)]  # prompt sizes differ


def _run(task: Task, gens: list[RecordingGenerator]) -> None:
    def request(it: str) -> Request:
        return request_for(task, it, [{"role": "user", "content": it}], 2, max_tokens=8, temperature=1.0)

    def record(it: str, out: Generation) -> dict[str, Any]:
        return {"item": it, "samples": [sample_record(s) for s in out.samples]}

    def make() -> RecordingGenerator:
        gens.append(RecordingGenerator(task.shard))
        return gens[-1]

    stream_items(task, ITEMS, request, record, make)


def test_the_window_stays_full_and_items_are_logged_before_refill(tmp_path: Path) -> None:
    task, _ = _task(tmp_path, 3)
    gens: list[RecordingGenerator] = []
    _run(task, gens)
    (g,) = gens
    assert sorted(g.added) == sorted(ITEMS) and len(g.added) == len(ITEMS)
    # every step sees a full window while items remain: min(width, items not yet finished)
    assert [n for n, _ in g.in_flight_per_step] == [min(3, len(ITEMS) - r) for _, r in g.in_flight_per_step]
    assert max(n for n, _ in g.in_flight_per_step) == 3
    # every refill happens after each finished item was appended to the item log
    assert all(logged == returned for logged, returned in g.log_at_add)
    assert any(returned > 0 for _, returned in g.log_at_add)
    # shortest prompts first, then key
    assert g.added == sorted(ITEMS, key=lambda s: (len(s), s))
    out = task.shard.read()
    assert [r["key"] for r in out] == ITEMS  # the output keeps the shard's item order
    meta = task.shard.meta()
    assert meta["items"] == 11 and meta["max_in_flight"] == 3 and meta["prompts"] == 11
    assert meta["startup_s"] >= 0.0  # timed around building the engine, by the window itself
    assert g.closed, "the engine is released when the shard ends (vLLM: its engine-core processes)"


def _contents(shard: Shard) -> list[dict[str, Any]]:
    """The shard's output records with their arrays read back in place of where they lie in the arrays file."""
    out = []
    for rec in shard.read():
        a = RecordArrays(rec, ArraysFile(shard.arrays))
        arrays = [a.prompt_ids.tolist()] + [[a.token_ids(k).tolist(), a.logprobs(k).tolist()]
                                            for k in range(len(rec["samples"]))]
        out.append({**{k: v for k, v in rec.items() if k != "arrays_at"}, "arrays": arrays})
    return out


def test_an_interrupted_window_resumes_to_identical_records(tmp_path: Path) -> None:
    ref_task, _ = _task(tmp_path / "ref", 4)
    _run(ref_task, [])
    reference = ref_task.shard.read()

    task, _ = _task(tmp_path / "cut", 4, stop_after=3)
    gens: list[RecordingGenerator] = []
    with pytest.raises(Interrupted, match="requests in flight dropped"):
        _run(task, gens)
    first = gens[0]
    partial = read_jsonl(task.shard.partial)
    assert first.aborted and first.closed and not task.shard.is_done()  # released on the interrupt too
    assert {r["key"] for r in partial}.isdisjoint(first.aborted)
    assert 0 < len(partial) < len(ITEMS)

    again, _ = _task(tmp_path / "cut", 4)
    _run(again, gens)
    assert set(gens[1].added) == set(ITEMS) - {r["key"] for r in partial}  # finished items are not redone
    assert _contents(again.shard) == _contents(ref_task.shard)
    assert [r["key"] for r in reference] == ITEMS


def test_the_same_item_gets_the_same_request_in_any_window(tmp_path: Path) -> None:
    a, _ = _task(tmp_path / "a", 1)
    b, _ = _task(tmp_path / "b", 7)
    ra = request_for(a, "item03", [{"role": "user", "content": "x"}], 4, max_tokens=8, temperature=1.0)
    rb = request_for(b, "item03", [{"role": "user", "content": "x"}], 4, max_tokens=8, temperature=1.0)
    assert ra == rb
    ga: list[RecordingGenerator] = []
    gb: list[RecordingGenerator] = []
    _run(a, ga)
    _run(b, gb)
    assert _contents(a.shard) == _contents(b.shard)
    assert max(n for n, _ in ga[0].in_flight_per_step) == 1


def test_weights_are_copied_to_node_local_scratch_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.phases.sampling import local_weights
    from sgsbatch.run.checkpoint import MARKER, is_complete, publish_dir, staging_dir

    src = tmp_path / "shared" / "solver"
    tmp = staging_dir(src)
    (tmp / "model.safetensors").write_bytes(b"w" * 100)
    publish_dir(tmp, src, {"kind": "trained"})
    monkeypatch.setenv("NODE_SCRATCH", str(tmp_path / "node"))
    dst = local_weights(src, "$NODE_SCRATCH")
    assert dst.parent == tmp_path / "node" / "sgsbatch-weights" and is_complete(dst)
    assert (dst / "model.safetensors").read_bytes() == b"w" * 100 and (dst / MARKER).exists()
    (dst / "model.safetensors").write_bytes(b"kept")  # a second task on the node reuses the copy
    assert local_weights(src, "$NODE_SCRATCH") == dst and (dst / "model.safetensors").read_bytes() == b"kept"
    assert local_weights(src, "") == src  # off
    monkeypatch.delenv("NODE_SCRATCH")
    assert local_weights(src, "$NODE_SCRATCH") == src  # unset variable: load in place
    assert local_weights(Path("deepseek-ai/DeepSeek-Prover-V2-7B"), str(tmp_path / "node")) == Path(
        "deepseek-ai/DeepSeek-Prover-V2-7B")  # a hub id is not a directory
