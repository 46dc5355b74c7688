"""Log-probs the trainer computes once, before its first update: the old policy's and the reference's.

- `train.old_logprobs = "recompute"` (TrainSettings.old_logprobs): pi_old is the policy the call starts
  from (the round's starting weights), as verl computes `old_log_prob` with its actor before the
  update and DeepSeekMath's pi_theta_old; the ratio's denominator is then the trainer's own logprob,
  not the sampler's (vLLM's numerics differ from the trainer's, so with "sampler" the ratio is not 1
  at the first step). "sampler" (the default) keeps `Example.sampler_logprobs` (the SGS reference's CISPO).
- `solver.kl_beta > 0` (TrainSettings.kl_beta, kl_reference): the reference policy is the run's
  initial Solver weights, frozen; its logprobs do not change, so they are computed once per call by a
  copy loaded in the train job (the same dtype, eval mode, no gradient), which is freed before the
  policy is loaded: the weights are never held twice. When the reference is the weights the call starts
  from (round 0) and old log-probs are recomputed, one pass gives both.

Both are taken under the distribution the ratio uses (`example_loss`: temperature and top-p with
`generation.logprobs = "processed"`, else the plain log-softmax), in float32, only for the examples
this rank runs (`rank_examples`). Preemption: a resumed call scores again from the same weights on
disk (the round's starting weights and the initial weights are not changed by training), before it
loads its checkpoint, so it uses the same numbers. Not covered: a reference other than a weights
directory or hub id; a reference sharded across ranks (each rank loads it whole).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sgsbatch.backends.batches import GRPO_FAMILY, RATIO_OBJECTIVES, Example, TrainSettings, rank_shares
from sgsbatch.run.token_arrays import Ids


def completion_logits(model: Any, prompt_ids: Ids, completion_ids: Ids) -> tuple[Any, Any]:
    """(float32 logits predicting each completion token, the completion token ids as a column)."""
    import numpy as np
    import torch

    both = np.concatenate([np.asarray(prompt_ids, dtype=np.int64), np.asarray(completion_ids, dtype=np.int64)])
    ids = torch.from_numpy(both)[None].to(model.device)
    logits = model(input_ids=ids, use_cache=False).logits[0, len(prompt_ids) - 1 : -1].float()
    return logits, ids[0, len(prompt_ids) :, None]


def autocast_for(settings: TrainSettings, device: Any) -> Any:
    """bf16 autocast when fp32 masters train in bf16 (train.keep_fp32_master), else nothing."""
    import torch

    if settings.keep_fp32_master and settings.bf16:
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def needs_old(settings: TrainSettings) -> bool:
    return settings.old_logprobs == "recompute" and settings.objective in RATIO_OBJECTIVES


def needs_ref(settings: TrainSettings) -> bool:
    return settings.kl_beta > 0 and settings.objective in GRPO_FAMILY


def rank_examples(examples: Sequence[Example], steps: Sequence[Sequence[int]], settings: TrainSettings, rank: int,
                  world: int) -> list[int]:
    """The indices of the examples this rank runs in some step (batches.rank_shares), ascending."""
    mine: set[int] = set()
    for step in steps:
        mine.update(rank_shares(examples, step, settings.objective, world, settings.kl_beta)[rank])
    return sorted(mine)


def score(model: Any, examples: Sequence[Example], indices: Sequence[int], settings: TrainSettings) -> dict[int, Any]:
    """Per completion token, log p under the ratio's distribution (float32 numpy), for each of `indices`."""
    import torch

    from sgsbatch.backends.distribution import sampling_logprobs

    sampling = (settings.sampling_temperature, settings.sampling_top_p)
    was_training = model.training
    model.eval()
    out: dict[int, Any] = {}
    try:
        with torch.no_grad(), autocast_for(settings, model.device):
            for i in indices:
                logits, target = completion_logits(model, examples[i].prompt_ids, examples[i].completion_ids)
                full = sampling_logprobs(logits, *sampling) if sampling != (1.0, 1.0) else torch.log_softmax(logits, -1)
                out[i] = full.gather(1, target)[:, 0].cpu().numpy()
    finally:
        model.train(was_training)
    return out


def reference_scores(reference: Path, examples: Sequence[Example], indices: Sequence[int], settings: TrainSettings,
                     device: Any) -> dict[int, Any]:
    """The logprobs of the reference policy at `reference` (a weights directory): load it (the training
    dtype, eval mode), score, free it."""
    from sgsbatch.backends.weights import load_for_training

    model = load_for_training(reference, settings, device)
    model.requires_grad_(False)
    try:
        return score(model, examples, indices, settings)
    finally:
        del model
        gc.collect()
        if str(device).startswith("cuda"):
            import torch

            torch.cuda.empty_cache()


def same_weights(a: Path, b: Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def with_scores(examples: Sequence[Example], old: dict[int, Any] | None, ref: dict[int, Any] | None) -> list[Example]:
    """`examples` with the recomputed old logprobs as `sampler_logprobs` and the reference's as `ref_logprobs`
    (for the indices scored; the others, which this rank never runs, unchanged)."""
    out = list(examples)
    for i in set(old or {}) | set(ref or {}):
        changes: dict[str, Any] = {}
        if old is not None:
            changes["sampler_logprobs"] = old[i]
        if ref is not None:
            changes["ref_logprobs"] = ref[i]
        out[i] = dataclasses.replace(examples[i], **changes)
    return out
