"""Generation backends behind one small interface: `transformers` (CPU) and `vllm` (GPU).

Covered: the `Generator` protocol, chat-templating prompts into token ids (shared by every
backend and by training, so the trained sequences are exactly the sampled ones), a CPU
sampler on `transformers` models with per-token logprobs, a thin `vllm` backend, and a
factory.

Semantics shared by both backends:
- prompt i of a call is sampled with its own seed `derive_seed(seed, i)`; its `n` samples
  depend only on (model, messages[i], n, seed, i, sampling settings), never on the other
  prompts of the call or on earlier calls. Callers that need item-level reproducibility
  independent of position pass one prompt per call (or a stable order).
- `Sample.token_ids` are the generated ids as sampled, including the terminating eos when
  `finish_reason == "stop"`; `Sample.logprobs` has one entry per token id; `Sample.text` is the
  decoded text without special tokens.
- The transformers backend records logprobs under the sampling distribution (logits / T,
  then top-p renormalised); temperature <= 0 means greedy with temperature-1 logprobs. The
  vllm backend asks for `logprobs_mode="processed_logprobs"` (vLLM >= 0.10.2) to match, and
  falls back to vLLM's raw logprobs on older versions (identical at T=1, top_p=1).

Not covered: the vllm backend cannot run without a GPU and is tested only for lazy import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BACKENDS = ("transformers", "vllm")


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


class Generator(Protocol):
    def generate(
        self,
        messages: Sequence[list[dict[str, str]]],
        n: int,
        *,
        seed: int,
        max_tokens: int,
        temperature: float,
        top_p: float = 1.0,
    ) -> list[Generation]: ...


def derive_seed(seed: int, index: int) -> int:
    """A 31-bit seed for prompt `index` of a call made with `seed`."""
    digest = hashlib.sha256(f"sgsbatch:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat-templated prompt with the generation prompt appended."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(i) for i in ids]


class TransformersGenerator:
    """CPU sampling with a `transformers` causal LM in float32 (one prompt at a time, n rows)."""

    def __init__(self, model_dir: Path, threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.model.eval()
        self.eos_id = int(self.tokenizer.eos_token_id)
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 1 << 30))

    def generate(
        self,
        messages: Sequence[list[dict[str, str]]],
        n: int,
        *,
        seed: int,
        max_tokens: int,
        temperature: float,
        top_p: float = 1.0,
    ) -> list[Generation]:
        out: list[Generation] = []
        for i, msgs in enumerate(messages):
            prompt_ids = chat_prompt_ids(self.tokenizer, msgs)
            samples = self._sample(prompt_ids, n, derive_seed(seed, i), max_tokens, temperature, top_p)
            out.append(Generation(prompt_ids=prompt_ids, samples=samples))
        return out

    def _sample(
        self, prompt_ids: list[int], n: int, seed: int, max_tokens: int, temperature: float, top_p: float
    ) -> list[Sample]:
        import torch

        if n <= 0:
            return []
        budget = max(0, min(max_tokens, self.max_positions - len(prompt_ids)))
        gen = torch.Generator().manual_seed(seed)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        done = [False] * n
        with torch.inference_mode():
            input_ids = torch.tensor([prompt_ids] * n, dtype=torch.long)
            past: Any = None
            for _ in range(budget):
                res = self.model(input_ids=input_ids, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[:, -1, :].float()
                chosen, chosen_logp = _pick(logits, temperature, top_p, gen)
                for r in range(n):
                    if done[r]:
                        continue
                    tok = int(chosen[r])
                    tokens[r].append(tok)
                    logps[r].append(float(chosen_logp[r]))
                    if tok == self.eos_id:
                        done[r] = True
                if all(done):
                    break
                input_ids = chosen.view(n, 1)
        samples = []
        for r in range(n):
            ids = tokens[r]
            body = ids[:-1] if done[r] else ids
            text = str(self.tokenizer.decode(body, skip_special_tokens=True))
            samples.append(Sample(text, ids, logps[r], "stop" if done[r] else "length"))
        return samples


def _pick(logits: Any, temperature: float, top_p: float, gen: Any) -> tuple[Any, Any]:
    """Sample one token per row; return (ids, logprob of each id under the sampling distribution)."""
    import torch

    if temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)
        ids = torch.argmax(logits, dim=-1)
        return ids, logp.gather(1, ids[:, None])[:, 0]
    logp = torch.log_softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
        cum = sorted_logp.exp().cumsum(dim=-1)
        drop_sorted = (cum - sorted_logp.exp()) >= top_p  # always keeps the top token
        drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)
        logp = torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)
    ids = torch.multinomial(logp.exp(), 1, generator=gen)[:, 0]
    return ids, logp.gather(1, ids[:, None])[:, 0]


class VllmGenerator:
    """GPU sampling with vLLM: one engine, prompts passed as token ids, one seed per prompt."""

    def __init__(
        self,
        model_dir: Path,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        seed: int = 0,
        max_model_len: int | None = None,
    ) -> None:
        import vllm

        kw: dict[str, Any] = {
            "model": str(model_dir),
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
        }
        if max_model_len is not None:
            kw["max_model_len"] = max_model_len
        try:
            self.llm = vllm.LLM(**kw, logprobs_mode="processed_logprobs")
        except TypeError as exc:  # vLLM < 0.10.2 has no logprobs_mode
            if "logprobs_mode" not in str(exc):
                raise
            self.llm = vllm.LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(
        self,
        messages: Sequence[list[dict[str, str]]],
        n: int,
        *,
        seed: int,
        max_tokens: int,
        temperature: float,
        top_p: float = 1.0,
    ) -> list[Generation]:
        from vllm import SamplingParams

        prompt_ids = [chat_prompt_ids(self.tokenizer, m) for m in messages]
        params = [
            SamplingParams(
                n=n,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                seed=derive_seed(seed, i),
                logprobs=0,
                skip_special_tokens=True,
            )
            for i in range(len(prompt_ids))
        ]
        prompts = [{"prompt_token_ids": ids} for ids in prompt_ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for ids, req in zip(prompt_ids, outputs, strict=True):
            samples = []
            for comp in req.outputs:
                tok_ids = [int(t) for t in comp.token_ids]
                lps = [float(step[t].logprob) for t, step in zip(tok_ids, comp.logprobs or [], strict=True)]
                reason = "length" if comp.finish_reason == "length" else "stop"
                samples.append(Sample(comp.text, tok_ids, lps, reason))
            result.append(Generation(prompt_ids=ids, samples=samples))
        return result


def make_generator(backend: str, model_dir: Path, **kw: Any) -> Generator:
    """The generator for `backend` ("transformers" or "vllm"); extra keywords go to its constructor."""
    if backend == "transformers":
        return TransformersGenerator(model_dir, **kw)
    if backend == "vllm":
        return VllmGenerator(model_dir, **kw)
    raise ValueError(f"unknown generation backend {backend!r}; valid: {', '.join(BACKENDS)}")
