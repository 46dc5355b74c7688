"""Sampling in a phase task: a role's generator, and a window of requests streamed through it.

`stream_items` is how every generating phase (conjecture, solve, guide) runs its shard: the items
not finished by an earlier attempt are sorted by prompt length (shortest first, then key: long and
short prompts do not stall each other, and the order is deterministic), and up to
`generation.max_in_flight` of them are kept in the engine at once; each item whose request
finishes is turned into its record and appended to the shard's item log at once, then the window
is refilled; its prompt ids and each sample's token ids and logprobs go to the shard's arrays file
first (run/token_arrays.py), its record keeps their counts (`n_prompt_tokens`, `n_tokens`). On a
stop request the requests in flight are aborted and `Interrupted` is raised:
only they are lost, and a requeued task skips every finished item. Every item's request carries
its own seed (`derive_seed(task.seed(key), 0)`, as when items were sampled one per call), so an
item's samples do not depend on the window, the shard's other items or where a task resumed.
The shard's completion marker records what reached the engine (EngineStats).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sgsbatch.backends.generation import BACKENDS, Generation, Generator, Lent, Request, Sample, derive_seed
from sgsbatch.config.schema import Config, GenerationConfig
from sgsbatch.logic.extraction import Extraction
from sgsbatch.phases.task import Interrupted, Task
from sgsbatch.round.checkpoints import weights_for
from sgsbatch.run.checkpoint import MARKER, is_complete, publish_dir, staging_dir
from sgsbatch.run.progress import ProgressLine
from sgsbatch.run.token_arrays import TokenArrays

T = TypeVar("T")


def local_weights(weights: Path, scratch: str) -> Path:
    """`weights` copied into node-local `scratch` (env variables expanded) once per node, or as is.

    A hub id or a missing directory is returned unchanged; `scratch = ""` turns copying off. The copy
    is published with the checkpoint protocol (run/checkpoint.py) under a name derived from the
    source path and its completion marker, so tasks on one node share it and a half copy is never used.
    """
    root = os.path.expandvars(scratch) if scratch else ""
    if not root or "$" in root or not weights.is_dir():
        return weights
    tag = hashlib.sha256(f"{weights.resolve()}:{(weights / MARKER).read_text() if is_complete(weights) else ''}"
                         .encode()).hexdigest()[:16]
    dst = Path(root) / "sgsbatch-weights" / f"{weights.name}-{tag}"
    if not is_complete(dst):
        tmp = staging_dir(dst)
        shutil.rmtree(tmp)
        shutil.copytree(weights, tmp, ignore=shutil.ignore_patterns(MARKER))
        publish_dir(tmp, dst, {"copied_from": str(weights)})
    return dst


def role_generator(cfg: Config, role: str, r: int, phase: str, weights: Callable[[], Path], threads: int) -> Generator:
    """The generator `role` samples with in round r, in a job of `phase`: SIMULATED (no weights loaded,
    backends/simulated_generation.py) for the simulated backend, else the configured engine over
    `weights()` (called only then). Heavy imports happen here."""
    if cfg.generation.backend == "simulated":
        from sgsbatch.backends.simulated_generation import SimulatedGenerator, settings_from
        from sgsbatch.logic.prompts import load_prompts

        return SimulatedGenerator(settings_from(cfg, role, r, cfg.phase_resources(phase).gpus),
                                  load_prompts(cfg.prompts).guide_tags, rehearsal=cfg.run.rehearsal)
    return engine_for(cfg, weights(), threads)


def generator_for(task: Task, role: str) -> Generator:
    """The generator of `role` with the weights of this round (heavy imports happen here): the task's own,
    or in a colocated rollout job its resident engine given those weights."""
    cfg = task.cfg

    def weights() -> Path:
        return local_weights(Path(weights_for(cfg, task.paths, role, task.round)), cfg.phase_resources(task.phase).scratch)

    if task.engine is not None:
        engine = task.engine.lend(cfg, role, task.round, task.phase, weights, task.threads())
    else:
        engine = role_generator(cfg, role, task.round, task.phase, weights, task.threads())
    task.shard.mark_ready()
    return engine


class ResidentEngine:
    """One engine kept across the rollout steps of a colocated job (scheduling/colocated.py): built on the
    first step's weights, then given each later step's in place (`update_weights`: vLLM's workers reload the
    files and its prefix cache is reset; the transformers model loads the state dict) instead of starting
    again, and lent to each solve shard (`Lent`: a shard's `close` leaves it running; its stats are the
    shard's, `startup_s` the update's time). Built again only if `generation.*` changed (an amendment).
    The simulated backend loads no weights: a new SIMULATED generator each step, as the chain builds."""

    def __init__(self) -> None:
        self.gen: Any = None
        self.weights: Path | None = None
        self.settings: GenerationConfig | None = None  # what the engine was built with
        self.updates: list[float] = []  # seconds of each in-place update, in order
        self.asleep = self.discarded = False  # vLLM's sleep mode while the job trains (level 2 discards the weights)

    def lend(self, cfg: Config, role: str, r: int, phase: str, weights: Callable[[], Path], threads: int) -> Generator:
        if cfg.generation.backend == "simulated":
            return role_generator(cfg, role, r, phase, weights, threads)
        path = weights()
        if self.gen is not None and self.settings != cfg.generation:
            self.close()
        if self.gen is None:
            self.gen, self.settings = engine_for(cfg, path, threads, sleep_mode=True), cfg.generation
        else:
            if self.asleep:
                self.gen.wake_up()
                self.asleep = False
            if path != self.weights or self.discarded:
                self.updates.append(self.gen.update_weights(path))
        self.weights, self.discarded = path, False
        return Lent(self.gen)

    def release(self) -> None:
        """Before the job trains: on GPUs vLLM sleeps at `generation.sleep_level` (its memory goes to the
        trainer; the next `lend` wakes it and loads the new weights); elsewhere nothing changes."""
        sleep = getattr(self.gen, "sleep", None)
        level = self.settings.sleep_level if self.settings is not None else 0
        if sleep is not None and sleep(level):
            self.asleep, self.discarded = True, level == 2

    def close(self) -> None:
        if self.gen is not None:
            self.gen.close()
        self.gen = self.weights = self.settings = None
        self.asleep = self.discarded = False


def engine_for(cfg: Config, weights: Path, threads: int, sleep_mode: bool = False) -> Generator:
    """The configured engine (generation.*) over `weights`: what every generating task and the
    canary (canary/generation.py) build. `threads`: the transformers backend's CPU threads; `sleep_mode`:
    vLLM's, for a colocated rollout job's engine (`ResidentEngine.release`)."""
    g = cfg.generation
    if g.backend == "transformers":
        return make_generator("transformers", weights, threads=threads, max_model_len=g.max_model_len,
                              logprobs=g.logprobs)
    return make_generator("vllm", weights, tensor_parallel_size=g.tensor_parallel_size,
                          gpu_memory_utilization=g.gpu_memory_utilization, seed=cfg.run.seed,
                          max_model_len=g.max_model_len, logprobs=g.logprobs, dtype=g.dtype,
                          kv_cache_memory_bytes=g.kv_cache_memory_bytes, enforce_eager=g.enforce_eager,
                          sleep_mode=sleep_mode and g.sleep_level > 0)


def request_for(task: Task, key: str, messages: list[dict[str, str]], n: int, *, max_tokens: int,
                temperature: float) -> Request:
    """The request of one item: n samples, seeded by the item's key."""
    return Request(key, messages, n, derive_seed(task.seed(key), 0), max_tokens, temperature,
                   task.cfg.generation.top_p)


def sample_record(s: Sample) -> dict[str, Any]:
    """A sample's JSON fields (its ids and logprobs go to the arrays file: `token_arrays`)."""
    return {"text": s.text, "n_tokens": len(s.token_ids), "finish_reason": s.finish_reason}


def token_arrays(out: Generation) -> TokenArrays:
    """A generation's prompt ids and each sample's token ids and logprobs, in block order."""
    return TokenArrays(out.prompt_ids, [s.token_ids for s in out.samples], [s.logprobs for s in out.samples])


def extracted_samples(out: Generation, extract: Callable[[str], Extraction], field: str) -> list[dict[str, Any]]:
    """Each sample's record with its extraction under `field` (ok, value, reason; `dropped`: the
    lines a conjecture's preamble lost, when there are any)."""
    samples = []
    for s in out.samples:
        ex = extract(s.text)
        record = {**sample_record(s), "ok": ex.ok, field: ex.value, "reason": ex.reason}
        if ex.dropped:
            record["dropped"] = list(ex.dropped)
        samples.append(record)
    return samples


def in_window(gen: Generator, requests: Iterable[Request], width: int, should_stop: Callable[[], bool] = lambda: False,
              label: str = "") -> Iterator[tuple[Request, Generation]]:
    """Each request's generation as it finishes, `width` requests kept in `gen` at once (refilled before every
    engine step). `should_stop()` is asked before every step: then the requests in flight are aborted and
    `Interrupted` names `label` and how many were dropped."""
    pending = deque(requests)
    flying = 0
    while pending or flying:
        while pending and flying < width:
            gen.add(pending.popleft())
            flying += 1
        if should_stop():
            gen.abort()
            raise Interrupted(f"{label}: stop requested; {flying} requests in flight dropped")
        for req, out in gen.step():
            flying -= 1
            yield req, out


def _prompt_size(req: Request) -> int:
    return sum(len(m["content"]) for m in req.messages)


def stream_items(
    task: Task,
    items: Sequence[T],
    request_of: Callable[[T], Request],
    record_of: Callable[[T, Generation], dict[str, Any]],
    make: Callable[[], Generator],
) -> None:
    """Run this shard's items through a generator, `generation.max_in_flight` requests at a time.

    `request_of(item)` gives the item's request (its key is the item's key); `record_of(item, out)`
    its record once generated, whose samples (`token_arrays.samples_of`) are `out`'s in order, each
    from `sample_record`. `make()` builds the generator, only if some item is left.
    """
    if task.shard.is_done():
        return
    mine = task.mine(items)
    requests = {id(it): request_of(it) for it in mine}
    done = task.shard.done_items()
    todo = sorted((it for it in mine if requests[id(it)].key not in done),
                  key=lambda it: (_prompt_size(requests[id(it)]), requests[id(it)].key))
    meta: dict[str, Any] = {"items": len(mine)}
    task.shard.set_total(len(mine))
    progress = ProgressLine(f"r{task.round} {task.phase} shard {task.shard.index}", len(mine), len(mine) - len(todo),
                            task.cfg.alerts.progress_every_s)
    if todo:
        t0 = time.perf_counter()
        gen = make()
        gen.stats.startup_s = time.perf_counter() - t0  # weights choice, scratch copy and engine start
        width = task.cfg.generation.max_in_flight
        item_of = {requests[id(it)].key: it for it in todo}
        try:
            for req, out in in_window(gen, (requests[id(it)] for it in todo), width, task.should_stop,
                                      f"round {task.round} {task.phase} shard {task.shard.index}"):
                rec = {**record_of(item_of[req.key], out), "key": req.key, "n_prompt_tokens": len(out.prompt_ids)}
                done[req.key] = task.shard.append_item(rec, token_arrays(out))
                progress.step()
        finally:
            gen.close()
        meta.update(gen.stats.as_dict(), max_in_flight=width)
    task.shard.finish([done[requests[id(it)].key] for it in mine], meta)


def make_generator(backend: str, model_dir: Path, **kw: Any) -> Generator:
    """The generator for `backend` ("transformers" or "vllm"); extra keywords go to its constructor."""
    if backend == "transformers":
        from sgsbatch.backends.transformers_engine import (
            TransformersGenerator,  # heavy imports only when used
        )

        return TransformersGenerator(model_dir, **kw)
    if backend == "vllm":
        from sgsbatch.backends.vllm_engine import VllmGenerator

        return VllmGenerator(model_dir, **kw)
    raise ValueError(f"unknown generation backend {backend!r}; valid: {', '.join(BACKENDS)}")
