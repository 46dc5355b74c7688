"""What one training call trains on, in what order and on which rank: pure logic, no torch.

Covered: the examples (`Example`) and their file (`save_examples` / `load_examples`: one `.npz`
of flat arrays, so 26k sequences of 8k tokens are ~1 GB read once per rank, not JSON, and held as
numpy views of those arrays, not as Python lists), the plan
of optimizer steps (`plan_steps`: deterministic from the seed; CISPO keeps groups whole), the
per-example loss factors (`loss_scales`), the split of a step over ranks by tokens
(`rank_shares`), and the fingerprint that ties a checkpoint to its call. Not covered: torch,
DeepSpeed and the objectives' arithmetic (backends/objectives.py, backends/trainer.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sgsbatch.run.token_arrays import Ids, Logprobs

# the GRPO family (backends/objectives.py): clipped importance ratio against the sampler's logprobs
GRPO_FAMILY = ("grpo", "dr_grpo", "dapo", "gspo")
OBJECTIVES = ("reinforce", "cispo", *GRPO_FAMILY)
RATIO_OBJECTIVES = ("cispo", *GRPO_FAMILY)  # need each example's sampler_logprobs
SEQUENCE_MEAN = ("grpo", "dr_grpo", "gspo")  # the step loss is the mean of its sequences' terms


@dataclass(frozen=True)
class TrainSettings:
    lr: float = 3e-6
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    batch_size: int = 32  # sequences per optimizer step
    micro_batch_size: int = 1
    zero_stage: int = 2
    bf16: bool = False
    gradient_checkpointing: bool = False
    seed: int = 0
    objective: str = "reinforce"  # one of OBJECTIVES
    cispo_clip_max: float = 4.0
    # the GRPO family: the ratio is clipped to [1 - clip_low, 1 + clip_high]; Dr. GRPO divides by max_tokens
    clip_low: float = 0.2
    clip_high: float = 0.2
    max_tokens: int = 8192
    threads: int | None = None
    # CISPO: the distribution the sampler's logprobs were taken under (logits / T, then top-p)
    sampling_temperature: float = 1.0
    sampling_top_p: float = 1.0
    keep_fp32_master: bool = False  # fp32 weights + bf16 autocast; fp32 kept beside the bf16 export
    # the GRPO family's KL to a reference policy (backends/reference.py): beta (0 = off), the estimator
    # ("k3" or "k1") and the reference's weights (a directory or hub id; "" = none)
    # a linear LR warm-up over the role's first `warmup_steps` optimizer steps of the run (global: `steps_before`
    # are the role's steps in earlier rounds); 0 = constant LR
    warmup_steps: int = 0
    steps_before: int = 0
    kl_beta: float = 0.0
    kl_estimator: str = "k3"
    kl_clamp: float = 0.0  # > 0: each token's KL estimate clamped to [-kl_clamp, kl_clamp] (verl: 10)
    kl_reference: str = ""
    # the ratio's denominator: "sampler" (the sampler's logprobs) or "recompute" (the trainer's own
    # logprobs under the weights it starts from, before its first update: pi_old as verl computes it)
    old_logprobs: str = "sampler"


@dataclass
class Example:
    """One training sequence. Its ids and logprobs are lists or numpy arrays: views of the shards' arrays
    files (run/token_arrays.py) when built from a round's records, of the examples file once loaded."""

    prompt_ids: Ids
    completion_ids: Ids
    weight: float  # REINFORCE weight, or the sample's advantage A (CISPO, the GRPO family)
    group: int | None = None
    sampler_logprobs: Logprobs | None = None
    # the reference policy's logprobs of the completion (the trainer fills them when kl_beta > 0; never
    # in the examples file)
    ref_logprobs: Logprobs | None = None


@dataclass
class TrainResult:
    steps: int
    sequences: int
    target_tokens: int
    mean_loss: float
    # statistics over the completion tokens trained on (0 in results stored before they existed)
    tokens: int = 0
    entropy: float = 0.0  # mean entropy of the policy's next-token distribution, before each step's update
    clip_fraction: float = 0.0  # CISPO: share of tokens whose importance weight was clamped at cispo_clip_max;
    # the GRPO family: share of tokens on the clipped side of the ratio (low + high, as below)
    objective: str = "reinforce"
    clip_low_fraction: float = 0.0  # ratio < 1 - clip_low with A < 0 (TRL's clip_ratio/low_mean)
    clip_high_fraction: float = 0.0  # ratio > 1 + clip_high with A > 0 (TRL's clip_ratio/high_mean)
    sampler_kl: float = 0.0  # per token, KL(sampler || policy) estimated as r - 1 - log r (Schulman's k3)
    seq_ratio_mean: float = 0.0  # over sequences, s = exp(mean_t log r): the geometric mean of the token ratios
    seq_ratio_std: float = 0.0
    ref_kl: float = 0.0  # per token, the KL estimate to the reference policy (solver.kl_estimator) in the loss


def step_lr(settings: TrainSettings, step: int) -> float:
    """The LR of the round's optimizer step `step` (1-based): lr, or during the warm-up
    lr x (steps_before + step) / warmup_steps (linear from lr / warmup_steps at the run's first step)."""
    if settings.warmup_steps <= 0:
        return settings.lr
    return settings.lr * min(1.0, (settings.steps_before + step) / settings.warmup_steps)


def plan_steps(examples: Sequence[Example], settings: TrainSettings) -> list[list[int]]:
    """Example indices of each optimizer step, in order (deterministic from settings.seed).

    reinforce: shuffled examples in chunks of batch_size. cispo and the GRPO family: shuffled whole
    groups packed greedily up to batch_size sequences (a group larger than batch_size is a step on
    its own).
    """
    if settings.objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {settings.objective!r}; valid: {', '.join(OBJECTIVES)}")
    rng = random.Random(settings.seed)
    if settings.objective == "reinforce":
        order = list(range(len(examples)))
        rng.shuffle(order)
        bs = settings.batch_size
        return [order[i : i + bs] for i in range(0, len(order), bs)]
    groups = group_indices(examples)
    rng.shuffle(groups)
    steps: list[list[int]] = []
    current: list[int] = []
    for g in groups:
        if current and len(current) + len(g) > settings.batch_size:
            steps.append(current)
            current = []
        current = current + g
    if current:
        steps.append(current)
    return steps


def group_indices(examples: Sequence[Example]) -> list[list[int]]:
    """Indices grouped by `Example.group` in first-seen order; group None = a group of its own."""
    by_key: dict[Any, list[int]] = {}
    for i, ex in enumerate(examples):
        key = ("solo", i) if ex.group is None else ("group", ex.group)
        by_key.setdefault(key, []).append(i)
    return list(by_key.values())


def loss_scales(examples: Sequence[Example], step: Sequence[int], objective: str,
                batch_size: int = 0) -> dict[int, float]:
    """Per-example factor c_x so that the step loss = sum_x c_x * term_x (term_x: backends/objectives.py).

    reinforce: weight / the step's completion tokens (term sum_t NLL); cispo: A / the group's tokens /
    the groups of a full step, `batch_size` // G (term sum_t w_t NLL): the reference's fixed
    `groups_per_batch` (sgs/training/custom_trainers.py GroupedImportanceSampledWeightedTrainer,
    train_local.py: batch_size // group_size), so a short last step weighs its groups as a full step
    does (never fewer than the step's own groups; `batch_size` 0: the step's groups); grpo, dr_grpo,
    gspo: 1 / the step's sequences (the mean over sequences; A is inside the term); dapo: 1 / the
    step's completion tokens (token-level).
    """
    if objective in SEQUENCE_MEAN:
        return {i: 1.0 / len(step) for i in step}
    if objective in ("reinforce", "dapo"):
        total = sum(len(examples[i].completion_ids) for i in step)
        return {i: (examples[i].weight if objective == "reinforce" else 1.0) / max(total, 1) for i in step}
    groups = group_indices([examples[i] for i in step])
    per_batch = max(len(groups), batch_size // len(groups[0]) if batch_size and groups else 0)
    scales: dict[int, float] = {}
    for g in groups:
        members = [step[j] for j in g]
        tokens = sum(len(examples[i].completion_ids) for i in members)
        for i in members:
            scales[i] = examples[i].weight / max(tokens, 1) / per_batch
    return scales


def rank_shares(examples: Sequence[Example], step: Sequence[int], objective: str, world: int,
                kl_beta: float = 0.0) -> list[list[int]]:
    """The step's example indices per rank, balanced by tokens (prompt + completion).

    Units (examples; whole groups for CISPO) go largest first to the rank with the fewest tokens
    so far (ties: the lower rank); each rank's share keeps the step's order. A rank's share may
    be empty (it then runs dummy micro-batches to keep the collectives in step). An example that
    `contributes` nothing is in no share (it still counts in `loss_scales`' normaliser).
    """
    if objective == "cispo":
        units = [[step[j] for j in g] for g in group_indices([examples[i] for i in step])]
    else:
        units = [[i] for i in step if contributes(examples[i], objective, kl_beta)]

    def tokens(unit: list[int]) -> int:
        return sum(len(examples[i].prompt_ids) + len(examples[i].completion_ids) for i in unit)

    load = [0] * world
    owner: dict[int, int] = {}
    for u in sorted(range(len(units)), key=lambda k: (-tokens(units[k]), k)):
        r = min(range(world), key=lambda x: (load[x], x))
        load[r] += tokens(units[u])
        for i in units[u]:
            owner[i] = r
    return [[i for i in step if owner.get(i) == r] for r in range(world)]


def contributes(example: Example, objective: str, kl_beta: float = 0.0) -> bool:
    """False when the example's loss and gradient are exactly zero, so no rank runs it: advantage 0
    under the GRPO family without a KL term (-min(r * 0, clip(r) * 0) = 0), e.g. every sample of a group
    whose rewards are all equal. With kl_beta > 0 every example contributes (its KL term)."""
    return not (objective in GRPO_FAMILY and example.weight == 0.0 and kl_beta == 0.0)


def fingerprint(model_dir: Path, examples: Sequence[Example], settings: TrainSettings) -> str:
    """Identifies a training call, so a checkpoint is only resumed by the same call."""
    h = hashlib.sha256()
    h.update(str(Path(model_dir).resolve()).encode())
    h.update(json.dumps(asdict(settings), sort_keys=True).encode())
    for ex in examples:  # `asdict(ex)` of lists, whatever holds the numbers: the same hash for the same values
        h.update(json.dumps({"prompt_ids": _plain(ex.prompt_ids), "completion_ids": _plain(ex.completion_ids),
                             "weight": ex.weight, "group": ex.group,
                             "sampler_logprobs": None if ex.sampler_logprobs is None else _plain(ex.sampler_logprobs)
                             }).encode())
    return h.hexdigest()


def _plain(values: Any) -> list[Any]:
    """Numbers as a list of Python ints or floats (a numpy array's `tolist`)."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


# ----------------------------------------------------------------------------- the examples file


def save_examples(path: Path, examples: Sequence[Example]) -> None:
    """Write `examples` to `path` (.npz) atomically; `load_examples` gives them back equal.

    Ids are stored as int32 and logprobs as float32 where every value is exactly that (ids below
    2^31; logprobs an engine computed in float32), else as int64 / float64: half the memory for the
    train job's ranks, the same numbers."""
    import numpy as np

    def exact(seq: Any, narrow: Any) -> bool:
        a = np.asarray(seq)
        if a.dtype == narrow or a.size == 0:
            return True
        if narrow == np.int32:
            return bool(a.min() >= -(2**31) and a.max() < 2**31)
        return bool(np.array_equal(a.astype(narrow).astype(a.dtype), a))

    def flat(seqs: list[Any], wide: Any, narrow: Any) -> tuple[Any, Any]:
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        values = np.empty(int(lengths.sum()), dtype=narrow if all(exact(s, narrow) for s in seqs) else wide)
        at = 0
        for seq, n in zip(seqs, lengths.tolist(), strict=True):  # filled in place: no second copy of it all
            values[at : at + n] = seq
            at += n
        return values, lengths

    prompts, p_len = flat([ex.prompt_ids for ex in examples], np.int64, np.int32)
    comps, c_len = flat([ex.completion_ids for ex in examples], np.int64, np.int32)
    has_lp = np.array([ex.sampler_logprobs is not None for ex in examples], dtype=bool)
    lps, lp_len = flat([[] if ex.sampler_logprobs is None else ex.sampler_logprobs for ex in examples],
                       np.float64, np.float32)
    groups = np.array([-1 if ex.group is None else ex.group for ex in examples], dtype=np.int64)
    if any(ex.group is not None and ex.group < 0 for ex in examples):
        raise ValueError("example groups must be >= 0 (or None)")
    weights = np.array([ex.weight for ex in examples], dtype=np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        np.savez(f, prompts=prompts, p_len=p_len, comps=comps, c_len=c_len, has_lp=has_lp, lps=lps,
                 lp_len=lp_len, groups=groups, weights=weights)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_examples(path: Path) -> list[Example]:
    """The examples `save_examples` wrote, equal to them; ids and logprobs are views of the file's arrays."""
    import numpy as np

    with np.load(path) as z:
        def split(values: Any, lengths: Any) -> list[Any]:
            ends = np.cumsum(lengths)
            return [values[e - n : e] for e, n in zip(ends, lengths, strict=True)]

        prompts, comps, lps = split(z["prompts"], z["p_len"]), split(z["comps"], z["c_len"]), split(z["lps"], z["lp_len"])
        return [Example(prompts[i], comps[i], float(z["weights"][i]),
                        None if z["groups"][i] < 0 else int(z["groups"][i]),
                        lps[i] if z["has_lp"][i] else None) for i in range(len(prompts))]
