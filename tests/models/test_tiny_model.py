"""The tiny-random model's size as the disk projection counts it (models/tiny.tiny_param_count)."""

from __future__ import annotations

from pathlib import Path

from sgsbatch.models.tiny import tiny_param_count


def test_the_tiny_param_count_is_the_built_models(tiny_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert sum(p.numel() for p in model.parameters()) == tiny_param_count()
    assert tiny_param_count(hidden_size=32, num_layers=1) < tiny_param_count()
