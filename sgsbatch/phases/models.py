"""Loading a role's generator inside a phase task, and turning samples into shard records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgsbatch.backends.generation import Generator, Sample, make_generator
from sgsbatch.phases.task import Task
from sgsbatch.weights import weights_for


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
