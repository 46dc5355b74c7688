"""A role's weights on disk: resolving them, carrying them over, loading them to train, exporting them.

Covered: a local directory or a hub id's snapshot in the Hugging Face cache (`resolve_weights`),
publishing untrained weights as a round's checkpoint with hard links (`carry_weights`), the
`TrainResult` stored with a published checkpoint (`stored_result`), loading straight in the
training dtype (`load_for_training`: bf16, or the fp32 copy kept by `train.keep_fp32_master`) and
exporting HF weights + tokenizer atomically (`export_weights`, with `fp32/` beside the bf16 weights
when fp32 masters are kept). Not covered: training (backends/trainer.py).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sgsbatch.backends.batches import TrainResult, TrainSettings
from sgsbatch.run.checkpoint import is_complete, publish_dir, read_marker, staging_dir

RESULT = "train_result.json"
FP32_DIR = "fp32"  # with train.keep_fp32_master: the trainer's fp32 weights beside the bf16 export



def resolve_weights(model: str | Path) -> Path:
    """A local directory holding `model`: itself, or a hub id's snapshot in the Hugging Face cache."""
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import snapshot_download

    try:
        try:
            return Path(snapshot_download(str(model), local_files_only=True))
        except Exception:  # not cached yet: fetch it (compute nodes may well be offline)
            return Path(snapshot_download(str(model)))
    except Exception as e:  # offline, unknown id
        raise FileNotFoundError(f"weights {model!r}: not a directory, and not in the Hugging Face cache "
                                f"({e}); download them first (hf download {model})") from e


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # same filesystem: no bytes copied, and safe from retention of the source
    except OSError:
        shutil.copy2(src, dst)


def carry_weights(model: str | Path, out_dir: Path, result: TrainResult) -> None:
    """Publish `model`'s weights unchanged as `out_dir` (a role with nothing to train this round)."""
    src = resolve_weights(model)
    tmp = staging_dir(out_dir)
    shutil.rmtree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("SGSBATCH_COMPLETE", ".*"), copy_function=_link_or_copy)
    (tmp / RESULT).unlink(missing_ok=True)  # a hard link to the source's result: never write through it
    (tmp / RESULT).write_text(json.dumps(asdict(result)) + "\n")
    publish_dir(tmp, out_dir, {"kind": "carried", "source": str(model), "result": asdict(result)})


def stored_result(out_dir: Path) -> TrainResult | None:
    if not is_complete(out_dir):
        return None
    marker = read_marker(out_dir)
    if "result" not in marker:
        raise FileExistsError(f"{out_dir} exists and holds no training result")
    return TrainResult(**marker["result"])


def load_for_training(model_dir: Path, settings: TrainSettings, device: Any) -> Any:
    """The weights straight in the dtype they train in (bf16 unless fp32 masters are kept)."""
    import torch
    from transformers import AutoModelForCausalLM

    source = model_dir
    if settings.keep_fp32_master and (model_dir / FP32_DIR).is_dir():
        source = model_dir / FP32_DIR
    dtype = torch.bfloat16 if settings.bf16 and not settings.keep_fp32_master else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=dtype, low_cpu_mem_usage=True)
    return model.to(device)


def export_weights(module: Any, model_dir: Path, out_dir: Path, result: TrainResult, settings: TrainSettings) -> None:
    import torch
    from transformers import AutoTokenizer

    tmp = staging_dir(out_dir)
    if settings.keep_fp32_master:
        module.save_pretrained(tmp / FP32_DIR)
        module = module.to(torch.bfloat16)
    module.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(tmp)
    (tmp / RESULT).write_text(json.dumps(asdict(result)) + "\n")
    publish_dir(tmp, out_dir, {"kind": "trained", "result": asdict(result)})
