"""Generation backends behind one streaming interface: `transformers` (CPU) and `vllm` (GPU, or vLLM's CPU build).

A generator is an engine with requests in flight: `add(request)` queues a prompt (its own `n`,
seed and sampling settings), `step()` advances the engine and returns the requests that finished
in that step, `abort()` drops everything in flight (a stopped task redoes them after requeue).
The phases keep a window of `generation.max_in_flight` requests in the engine
(phases/sampling.py); `generate()` is the same engine for one list of prompts (warm-up, tests).

Semantics shared by both backends:
- a request's `n` samples depend only on (model, its prompt, n, its seed, sampling settings),
  never on the other requests in flight or on earlier calls: on the transformers backend exactly
  as far as the model's float32 kernels give a row the same numbers in any batch (checked by
  tests/models/test_generation.py for windows of 1, 3 and 16 prompts); on vLLM up to its
  documented batch-dependent numerics (the same seed in a different batch can differ).
- a request's completion budget is `min(max_tokens, max_model_len - prompt length)` (vLLM's
  `max_model_len` counts prompt and completion together; the reference serves with 8192), and on
  the transformers backend also the model's position limit.
- `Sample.token_ids` are the generated ids as sampled, including the terminating eos when
  `finish_reason == "stop"`; `Sample.logprobs` has one entry per token id; `Sample.text` is the
  decoded text without special tokens, decoded by `sample_text` on both backends (vLLM is asked
  for token ids only: `detokenize=False`).
- `logprobs = "raw"` (the default, and the reference's: vLLM's default `raw_logprobs`) records
  each token's log-softmax of the model's plain logits; `"processed"` records it under the
  sampling distribution (logits / T, then top-p renormalised: backends/distribution.py; on vLLM
  `logprobs_mode="processed_logprobs"`, which has that meaning from vLLM 0.10.2). The two agree
  at temperature 1 and top_p 1. Greedy (temperature <= 0) records temperature-1 logprobs.
- The transformers backend batches statically: requests added while a batch decodes join the next
  batch (left padding, attention masks, position ids from the mask, one torch.Generator per
  request). vLLM batches continuously (`LLMEngine.add_request` / `step` / `abort_request`).
- `stats` counts what reached the engine: start-up seconds, prompts, sequences, prompt and
  generated tokens, seconds spent in `step()`.

Not covered here: vLLM on a GPU (its CUDA kernels, memory share, tensor parallelism: tests/gpu); vLLM
itself runs in tests/vllm on its CPU build (the GPU lock's release), in CI.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from sgsbatch.backends.distribution import sampling_logprobs

BACKENDS = ("transformers", "vllm")  # and "simulated": backends/simulated_generation.py, built by phases/sampling.py
LOGPROBS = ("raw", "processed")



@dataclass
class Sample:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" | "length"


@dataclass
class Generation:
    prompt_ids: list[int]
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class Request:
    """One prompt to sample `n` completions of, with its own seed. `key` names it in the engine."""

    key: str
    messages: list[dict[str, str]]
    n: int
    seed: int
    max_tokens: int
    temperature: float
    top_p: float = 1.0


@dataclass
class EngineStats:
    """What reached the engine in this process (a task's generation cost); `startup_s` is set by
    whoever builds the engine and times it (phases/sampling.stream_items)."""

    startup_s: float = 0.0
    prompts: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    generate_s: float = 0.0
    neg_logprob_sum: float = 0.0  # - sum of the recorded logprobs of every generated token
    engine: str = ""  # which engine and version: "vllm 0.32.0 (cpu)", "transformers 5.19.0", "SIMULATED"

    def as_dict(self) -> dict[str, float | str]:
        tps = self.generated_tokens / self.generate_s if self.generate_s > 0 else 0.0
        return {"engine": self.engine, "startup_s": round(self.startup_s, 3), "generate_s": round(self.generate_s, 3),
                "prompts": self.prompts, "sequences": self.sequences, "prompt_tokens": self.prompt_tokens,
                "generated_tokens": self.generated_tokens, "tokens_per_s": round(tps, 3),
                "neg_logprob_sum": round(self.neg_logprob_sum, 6)}


class Generator(Protocol):
    stats: EngineStats

    def add(self, request: Request) -> None:
        """Queue a request; keys must be unique among the requests in flight."""
        ...

    def step(self) -> list[tuple[Request, Generation]]:
        """Advance the engine; the requests that finished in this step (maybe none)."""
        ...

    def abort(self) -> None:
        """Drop every request in flight."""
        ...

    def in_flight(self) -> int:
        """Requests added and not yet returned by `step`."""
        ...

    def close(self) -> None:
        """Release the engine (vLLM: stop its engine-core and worker processes); idempotent."""
        ...

    def generate(self, messages: Sequence[list[dict[str, str]]], n: int, *, seed: int, max_tokens: int,
                 temperature: float, top_p: float = 1.0) -> list[Generation]:
        """All prompts at once; prompt i gets the seed `derive_seed(seed, i)`."""
        ...


def derive_seed(seed: int, index: int) -> int:
    """A 31-bit seed for prompt `index` of a call made with `seed`."""
    digest = hashlib.sha256(f"sgsbatch:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat-templated prompt with the generation prompt appended."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(i) for i in ids]


def sample_text(tokenizer: Any, token_ids: list[int], stopped: bool) -> str:
    """A sample's text, decoded the same way on every backend: the ids without the terminating eos
    (when `stopped`), special tokens skipped. vLLM's own incremental text would differ at a sample cut
    inside a multi-byte character (it holds the partial bytes back; a decode shows U+FFFD)."""
    body = token_ids[:-1] if stopped and token_ids else token_ids
    return str(tokenizer.decode(body, skip_special_tokens=True))


def completion_budget(max_tokens: int, prompt_len: int, max_model_len: int | None) -> int:
    """Tokens a request may generate: `max_tokens`, capped so that prompt + completion fit `max_model_len`."""
    if max_model_len is None:
        return max(0, max_tokens)
    return max(0, min(max_tokens, max_model_len - prompt_len))


class _Engine:
    """`generate` on top of add/step, shared by the backends."""

    stats: EngineStats

    def add(self, request: Request) -> None:
        raise NotImplementedError

    def step(self) -> list[tuple[Request, Generation]]:
        raise NotImplementedError

    def in_flight(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        """Nothing to release for an in-process engine."""

    def generate(self, messages: Sequence[list[dict[str, str]]], n: int, *, seed: int, max_tokens: int,
                 temperature: float, top_p: float = 1.0) -> list[Generation]:
        assert self.in_flight() == 0, "generate() needs an idle engine"
        for i, msgs in enumerate(messages):
            self.add(Request(str(i), msgs, n, derive_seed(seed, i), max_tokens, temperature, top_p))
        out: dict[str, Generation] = {}
        while self.in_flight():
            out.update((req.key, gen) for req, gen in self.step())
        return [out[str(i)] for i in range(len(messages))]


@dataclass
class _Group:
    """One request inside a transformers batch: its rows, budget, generator and progress."""

    request: Request
    prompt_ids: list[int]
    rows: list[int]
    budget: int
    gen: Any  # torch.Generator
    steps: int = 0
    tokens: list[list[int]] = field(default_factory=list)
    logps: list[list[float]] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.steps >= self.budget or all(self.done)


class TransformersGenerator(_Engine):
    """CPU sampling with a `transformers` causal LM in float32, requests batched statically."""

    def __init__(self, model_dir: Path, threads: int | None = None, max_model_len: int | None = None,
                 logprobs: str = "raw") -> None:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.processed_logprobs = _logprobs_mode(logprobs) == "processed_logprobs"
        if threads is not None:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.model.eval()
        self.eos_id = int(self.tokenizer.eos_token_id)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_id)
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))
        self.max_model_len = max_model_len
        self.stats = EngineStats(engine=f"transformers {transformers.__version__}")
        self._queue: list[tuple[Request, list[int]]] = []
        self._batch: _Batch | None = None

    def add(self, request: Request) -> None:
        ids = chat_prompt_ids(self.tokenizer, request.messages)
        self.stats.prompts += 1
        self.stats.sequences += request.n
        self.stats.prompt_tokens += len(ids)
        self._queue.append((request, ids))

    def in_flight(self) -> int:
        return len(self._queue) + (self._batch.open() if self._batch is not None else 0)

    def abort(self) -> None:
        self._queue.clear()
        self._batch = None

    def step(self) -> list[tuple[Request, Generation]]:
        """Decode the current batch until at least one request finishes (a new batch from the queue if none)."""
        import time

        t0 = time.perf_counter()
        try:
            if self._batch is None or not self._batch.open():
                if not self._queue:
                    return []
                self._batch = _Batch(self, self._queue)
                self._queue = []
            return self._batch.advance()
        finally:
            self.stats.generate_s += time.perf_counter() - t0

    def _budget(self, request: Request, prompt_len: int) -> int:
        return min(completion_budget(request.max_tokens, prompt_len, self.max_model_len),
                   max(0, self.max_positions - prompt_len))

    def _finish(self, g: _Group) -> Generation:
        samples = []
        for r in range(len(g.rows)):
            ids = g.tokens[r]
            text = sample_text(self.tokenizer, ids, g.done[r])
            samples.append(Sample(text, ids, g.logps[r], "stop" if g.done[r] else "length"))
            self.stats.generated_tokens += len(ids)
            self.stats.neg_logprob_sum -= sum(g.logps[r])
        return Generation(prompt_ids=g.prompt_ids, samples=samples)


class _Batch:
    """A static batch: every request's rows left-padded to one length, decoded step by step."""

    def __init__(self, owner: TransformersGenerator, queued: list[tuple[Request, list[int]]]) -> None:
        import torch

        self.owner = owner
        self.groups: list[_Group] = []
        rows = 0
        for req, ids in queued:
            n = max(0, req.n)
            g = _Group(req, ids, list(range(rows, rows + n)), owner._budget(req, len(ids)),
                       torch.Generator().manual_seed(req.seed))
            g.tokens, g.logps, g.done = [[] for _ in range(n)], [[] for _ in range(n)], [False] * n
            rows += n
            self.groups.append(g)
        self.returned: set[int] = set()
        self.past: Any = None
        width = max((len(g.prompt_ids) for g in self.groups if g.rows), default=0)
        ids_rows, mask_rows = [], []
        for g in self.groups:
            pad = width - len(g.prompt_ids)
            for _ in g.rows:
                ids_rows.append([owner.pad_id] * pad + g.prompt_ids)
                mask_rows.append([0] * pad + [1] * len(g.prompt_ids))
        self.input_ids = torch.tensor(ids_rows, dtype=torch.long).reshape(rows, width)
        self.mask = torch.tensor(mask_rows, dtype=torch.long).reshape(rows, width)
        self.positions = (self.mask.cumsum(-1) - 1).clamp(min=0)

    def open(self) -> int:
        return len(self.groups) - len(self.returned)

    def _ready(self) -> list[tuple[Request, Generation]]:
        out = []
        for i, g in enumerate(self.groups):
            if i not in self.returned and g.finished:
                self.returned.add(i)
                out.append((g.request, self.owner._finish(g)))
        return out

    def advance(self) -> list[tuple[Request, Generation]]:
        import torch

        ready = self._ready()  # requests with nothing to generate (n = 0, no budget)
        while not ready and self.open():
            with torch.inference_mode():
                res = self.owner.model(input_ids=self.input_ids, attention_mask=self.mask,
                                       position_ids=self.positions, past_key_values=self.past, use_cache=True)
            self.past = res.past_key_values
            logits = res.logits[:, -1, :].float()
            nxt = torch.full((logits.shape[0],), self.owner.pad_id, dtype=torch.long)
            for g in self.groups:
                if g.finished or not g.rows:
                    continue
                chosen, chosen_logp = _pick(logits[g.rows[0]:g.rows[-1] + 1], self.owner.processed_logprobs,
                                            g.request.temperature,
                                            g.request.top_p, g.gen)
                for k in range(len(g.rows)):
                    nxt[g.rows[k]] = chosen[k]
                    if g.done[k]:
                        continue
                    tok = int(chosen[k])
                    g.tokens[k].append(tok)
                    g.logps[k].append(float(chosen_logp[k]))
                    if tok == self.owner.eos_id:
                        g.done[k] = True
                g.steps += 1
            self.input_ids = nxt.view(-1, 1)
            self.positions = self.positions[:, -1:] + 1
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
            ready = self._ready()
        return ready


def _logprobs_mode(logprobs: str) -> str:
    if logprobs not in LOGPROBS:
        raise ValueError(f"unknown logprobs {logprobs!r}; valid: {', '.join(LOGPROBS)}")
    return f"{logprobs}_logprobs"


def _pick(logits: Any, processed: bool, temperature: float, top_p: float, gen: Any) -> tuple[Any, Any]:
    """Sample one token per row; return (ids, the logprob of each id: plain, or `processed`)."""
    import torch

    logp = sampling_logprobs(logits, temperature, top_p)
    if temperature <= 0:
        ids = torch.argmax(logits, dim=-1)
    else:
        ids = torch.multinomial(logp.exp(), 1, generator=gen)[:, 0]
    recorded = logp if processed else torch.log_softmax(logits, dim=-1)
    return ids, recorded.gather(1, ids[:, None])[:, 0]


class VllmGenerator(_Engine):
    """vLLM's engine (GPU, or vLLM's CPU build): continuous batching, prompts as token ids, one seed per request.

    `dtype`, `kv_cache_memory_bytes` (0 = vLLM sizes the cache from `gpu_memory_utilization`, which
    on the CPU build is a fraction of the machine's RAM) and `enforce_eager` go to `vllm.LLM` as given.
    """

    def __init__(
        self,
        model_dir: Path,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        seed: int = 0,
        max_model_len: int | None = None,
        logprobs: str = "raw",
        dtype: str = "auto",
        kv_cache_memory_bytes: int = 0,
        enforce_eager: bool = False,
    ) -> None:
        import vllm

        kw: dict[str, Any] = {
            "model": str(model_dir),
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "dtype": dtype,
            "enforce_eager": enforce_eager,
        }
        if kv_cache_memory_bytes > 0:
            kw["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        if max_model_len is not None:
            kw["max_model_len"] = max_model_len
        if _vllm_device() == "cpu":
            # vLLM 0.32's CPU build crashes its engine ("CPU Generator does not use offset",
            # gpu_model_runner._bookkeeping_sync rewinds a seeded request's generator after a partial
            # prefill, which only CUDA generators support) whenever a prompt is prefilled in chunks:
            # every sgsbatch request is seeded, so prompts are prefilled whole on CPU (found by the
            # Guide's ~2k-token prompts; tests/vllm covers it). GPUs keep vLLM's chunked prefill.
            kw["enable_chunked_prefill"] = False
            if max_model_len is not None:
                kw["max_num_batched_tokens"] = max_model_len
        if _logprobs_mode(logprobs) != "raw_logprobs":  # vLLM's default: older versions work unchanged
            kw["logprobs_mode"] = _logprobs_mode(logprobs)  # vLLM >= 0.10.2 (pyproject's gpu extra)
        with _signals_ignored_by_children():
            self.llm = vllm.LLM(**kw)
        self.engine = self.llm.llm_engine
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.max_model_len = max_model_len
        self.stats = EngineStats(engine=f"vllm {vllm.__version__} ({_vllm_device()})")
        self._requests: dict[str, tuple[Request, list[int]]] = {}
        self._empty: list[tuple[Request, Generation]] = []  # no room for a completion: answered at once

    def add(self, request: Request) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        ids = chat_prompt_ids(self.tokenizer, request.messages)
        self.stats.prompts += 1
        self.stats.sequences += request.n
        self.stats.prompt_tokens += len(ids)
        budget = completion_budget(request.max_tokens, len(ids), self.max_model_len)
        if budget == 0 or request.n <= 0:
            self._empty.append((request, Generation(ids, [Sample("", [], [], "length")] * max(0, request.n))))
            return
        params = SamplingParams(n=request.n, temperature=request.temperature, top_p=request.top_p,
                                max_tokens=budget, seed=request.seed, logprobs=0, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        self.engine.add_request(request.key, {"prompt_token_ids": ids}, params)
        self._requests[request.key] = (request, ids)

    def in_flight(self) -> int:
        return len(self._requests) + len(self._empty)

    def close(self) -> None:
        """Shut the engine core (a process of its own) and its workers down now: a task's worker
        leaves with os._exit (scheduling/worker.py), which runs no atexit hook of vLLM's."""
        core = getattr(self.engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()

    def abort(self) -> None:
        if self._requests:
            self.engine.abort_request(list(self._requests))
        self._requests.clear()
        self._empty.clear()

    def step(self) -> list[tuple[Request, Generation]]:
        import time

        out, self._empty = self._empty, []
        if not self._requests:
            return out
        t0 = time.perf_counter()
        for res in self.engine.step():
            if not res.finished or res.request_id not in self._requests:
                continue
            req, ids = self._requests.pop(res.request_id)
            samples = []
            for comp in cast("list[Any]", res.outputs):  # a generation request: never PoolingOutput
                tok_ids = [int(t) for t in comp.token_ids]
                lps = [float(step[t].logprob) for t, step in zip(tok_ids, comp.logprobs or [], strict=True)]
                stopped = comp.finish_reason != "length"
                samples.append(Sample(sample_text(self.tokenizer, tok_ids, stopped and bool(tok_ids)
                                                  and tok_ids[-1] == self.eos_id), tok_ids, lps,
                                      "stop" if stopped else "length"))
                self.stats.generated_tokens += len(tok_ids)
                self.stats.neg_logprob_sum -= sum(lps)
            out.append((req, Generation(prompt_ids=ids, samples=samples)))
        self.stats.generate_s += time.perf_counter() - t0
        return out


def _vllm_device() -> str:
    """vLLM's platform: "cpu" for vLLM's CPU build, "cuda", ..."""
    from vllm.platforms import current_platform

    return str(current_platform.device_type)


@contextlib.contextmanager
def _signals_ignored_by_children() -> Iterator[None]:
    """SIGUSR2 ignored while vLLM starts its engine-core and worker processes, which inherit that.

    Slurm's warning signal (`--signal=USR2@N`, preemption, `scancel --signal=USR2`) goes to every
    process of the job step: a vLLM child killed by it (SIGUSR2's default action) would turn a clean
    stop after the current item into a crash. The task's own handler is restored for the task.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR2, old)


class Lent:
    """A generator lent to one `stream_items` call and kept open afterwards (tests and benchmarks that
    reuse one engine across calls): fresh stats, as a new engine's, and a `close` that does nothing."""

    def __init__(self, gen: Generator) -> None:
        self.gen = gen
        gen.stats = EngineStats(engine=gen.stats.engine)

    @property
    def stats(self) -> EngineStats:
        return self.gen.stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gen, name)

    def close(self) -> None:
        """Left to the owner of the engine."""


def make_generator(backend: str, model_dir: Path, **kw: Any) -> Generator:
    """The generator for `backend` ("transformers" or "vllm"); extra keywords go to its constructor."""
    if backend == "transformers":
        return TransformersGenerator(model_dir, **kw)
    if backend == "vllm":
        return VllmGenerator(model_dir, **kw)
    raise ValueError(f"unknown generation backend {backend!r}; valid: {', '.join(BACKENDS)}")
