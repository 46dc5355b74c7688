"""The `transformers` generation engine: CPU sampling with a causal LM in float32, requests batched
statically (backends/generation.py: the interface and the semantics both engines share)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgsbatch.backends.distribution import sampling_logprobs
from sgsbatch.backends.generation import (
    EngineStats,
    Generation,
    Request,
    Sample,
    _Engine,
    chat_prompt_ids,
    completion_budget,
    logprobs_mode,
    sample_text,
)


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

        self.processed_logprobs = logprobs_mode(logprobs) == "processed_logprobs"
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

    def update_weights(self, model_dir: Path) -> float:
        """Load `model_dir`'s weights (a checkpoint of the same architecture) into this model in place, as
        VllmGenerator.update_weights does for vLLM (a colocated rollout job's step). The engine must be idle.
        Returns the seconds taken."""
        import time

        import torch
        from transformers import AutoModelForCausalLM

        if self.in_flight():
            raise RuntimeError(f"update_weights needs an idle engine; {self.in_flight()} requests in flight")
        t0 = time.perf_counter()
        fresh = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.model.load_state_dict(fresh.state_dict())
        return time.perf_counter() - t0

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
