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

The engines: backends/transformers_engine.py and backends/vllm_engine.py (this module holds the interface and
the helpers both use); phases/sampling.make_generator makes one by name.
Not covered here: vLLM on a GPU (its CUDA kernels, memory share, tensor parallelism: tests/gpu); vLLM
itself runs in tests/vllm on its CPU build (the GPU lock's release), in CI.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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


def logprobs_mode(logprobs: str) -> str:
    if logprobs not in LOGPROBS:
        raise ValueError(f"unknown logprobs {logprobs!r}; valid: {', '.join(LOGPROBS)}")
    return f"{logprobs}_logprobs"


class Lent:
    """A generator lent to one `stream_items` call and kept open afterwards (a colocated rollout job's resident
    engine, tests and benchmarks that reuse one engine across calls): fresh stats, as a new engine's, and a
    `close` that does nothing."""

    def __init__(self, gen: Generator) -> None:
        self.gen = gen
        gen.stats = EngineStats(engine=gen.stats.engine)

    @property
    def stats(self) -> EngineStats:
        return self.gen.stats

    @stats.setter
    def stats(self, value: EngineStats) -> None:
        self.gen.stats = value

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gen, name)

    def close(self) -> None:
        """Left to the owner of the engine."""
