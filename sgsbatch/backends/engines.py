"""The generation engine for a backend name (`generation.backend`): backends/transformers_engine.py or
backends/vllm_engine.py, each imported only when made (vLLM and torch are heavy). The SIMULATED engine
is made by phases/sampling.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sgsbatch.backends.generation import BACKENDS, Generator


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
