"""Loading a role's generator inside a phase task, sampling, and turning samples into shard records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sgsbatch.backends.generation import Generator, Sample, make_generator
from sgsbatch.extraction import Extraction
from sgsbatch.phases.task import Task
from sgsbatch.round.checkpoints import weights_for


def generator_for(task: Task, role: str) -> Generator:
    """The generator of `role` with the weights of this round (heavy imports happen here)."""
    cfg = task.cfg
    weights = Path(weights_for(cfg, task.paths, role, task.round))
    if cfg.generation.backend == "transformers":
        return make_generator("transformers", weights, threads=task.threads())
    return make_generator("vllm", weights, tensor_parallel_size=cfg.generation.tensor_parallel_size,
                          gpu_memory_utilization=cfg.generation.gpu_memory_utilization, seed=cfg.run.seed)


def sample_record(s: Sample) -> dict[str, Any]:
    return {"text": s.text, "token_ids": s.token_ids, "logprobs": s.logprobs, "finish_reason": s.finish_reason}


def sample_and_extract(task: Task, gen: Generator, messages: list[dict[str, str]], key: str, n: int, *,
                       max_tokens: int, temperature: float, extract: Callable[[str], Extraction],
                       field: str) -> tuple[list[int], list[dict[str, Any]]]:
    """n samples for one prompt (seeded by the item's key), each with its extraction under `field`."""
    (out,) = gen.generate([messages], n, seed=task.seed(key), max_tokens=max_tokens, temperature=temperature,
                          top_p=task.cfg.generation.top_p)
    samples = []
    for s in out.samples:
        ex = extract(s.text)
        samples.append({**sample_record(s), "ok": ex.ok, field: ex.value, "reason": ex.reason})
    return out.prompt_ids, samples
