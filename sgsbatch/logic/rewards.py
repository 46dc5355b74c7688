r"""Rewards and training weights: Solver (REINFORCE-1/2), Conjecturer, CISPO and GRPO-family groups.

Covered: the length penalty, the `try` tactic rule, per-proof Solver weights, per-round
Conjecturer rewards (with the "no guide" ablation), CISPO group rewards and advantages, and the
GRPO family's rewards (DAPO's overlong shaping), group advantages and DAPO's dynamic sampling.
Not covered: the losses that consume these numbers, band selection (`logic/selection.py`) and guide
scores (`logic/review.py`).

The `try` rule matches the tactic token, not the substring: `try` must not be preceded by an
identifier character, `.`, `'`, `!` or `?`, and must not be followed by an identifier character
or `'`; comments are ignored. So `try norm_num`, `<;> try simp`, `(try linarith)`, `first | try
rfl` and `try?` are hits; `symmetry`, `geometry`, `entry`, `retry_lemma`, `h_try`, `try_this`,
`Foo.try` and `-- try nlinarith` are not.

Order, as the reference's `prepare_prover_train_data` (sgs/pipeline/step2_train.py:508-565):
REINFORCE-1/2 and Expert Iteration train only on verified in-band proofs; one using `try` is
dropped first (the reference `continue`s before the length penalty is looked at); otherwise an
over-long one gets the (negative) length penalty; otherwise 1. CISPO keeps every rollout of a
group: 1 verified / 0 failed, 0 for `try`, and then the length penalty replaces the reward of
any over-long rollout, failed ones included.

The reference matches `try` as a substring (`"try" in proof_str`, step2_train.py:548); the token
rule here is the spec's fix (`symmetry`, `geometry` are not `try`). Which comments are skipped
(`solver.try_comments`): "reference" (the default) strips them as the reference does
(step2_train.py:529-530: `re.sub(r"/-[\s\S]*?-/", "", proof_str)` then `re.sub(r"--.*", "",
proof_str)`), so a nested block comment leaves its outer ` ... -/` as code and a `/-` inside a
`--` comment hides the code up to the next `-/`; "lean" reads them as Lean does (nested block
comments, a `/-` inside a `--` comment is comment text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from sgsbatch.logic.extraction import strip_lean_comments

TryComments = Literal["reference", "lean"]
TRY_COMMENT_RULES: tuple[str, ...] = ("reference", "lean")
_TRY_RE = re.compile(r"(?<![\w.'!?])try(?![\w'])")
_REFERENCE_BLOCK_COMMENT = re.compile(r"/-[\s\S]*?-/")  # step2_train.py:529
_REFERENCE_LINE_COMMENT = re.compile(r"--.*")  # step2_train.py:530


def strip_comments_as_reference(proof: str) -> str:
    """`proof` with comments removed as the reference does: non-greedy `/- -/` first, then `--`."""
    return _REFERENCE_LINE_COMMENT.sub("", _REFERENCE_BLOCK_COMMENT.sub("", proof))


def uses_try(proof: str, comments: TryComments = "reference") -> bool:
    """Whether `proof` uses the `try` tactic (as a token, outside comments read by the `comments` rule)."""
    if comments == "reference":
        code = strip_comments_as_reference(proof)
    elif comments == "lean":
        code = strip_lean_comments(proof)
    else:
        raise ValueError(f"uses_try: comments must be one of {', '.join(TRY_COMMENT_RULES)}, got {comments!r}")
    return _TRY_RE.search(code) is not None


def length_penalty(length: int, max_tokens: int = 8192, length_penalty_start: float = 0.8) -> float | None:
    """`-(L - start*Lmax) / ((1 - start)*Lmax)` floored at -1, or None when `L <= start*Lmax`."""
    if max_tokens <= 0:
        raise ValueError(f"length_penalty: max_tokens must be positive, got {max_tokens}")
    if not 0.0 <= length_penalty_start < 1.0:
        raise ValueError(
            f"length_penalty: length_penalty_start must be in [0, 1), got {length_penalty_start}"
        )
    if length < 0:
        raise ValueError(f"length_penalty: negative length {length}")
    start = length_penalty_start * max_tokens
    if length <= start:
        return None
    return max(-1.0, -(length - start) / ((1.0 - length_penalty_start) * max_tokens))


def solver_weight(
    proof: str,
    verified: bool,
    in_band: bool,
    length: int,
    *,
    max_tokens: int = 8192,
    length_penalty_start: float = 0.8,
    zero_try: bool = True,
    try_comments: TryComments = "reference",
) -> float | None:
    """REINFORCE-1/2 (and Expert Iteration) weight of one Solver sample; None when it is not trained on.

    `length` is the generation's token count. Failed or out-of-band samples are dropped (None), and
    so is a proof using `try` (with `zero_try`; comments read by `try_comments`), before its length
    is looked at; an over-long proof gets the length penalty; any other gets 1.
    """
    if not verified or not in_band:
        return None
    if zero_try and uses_try(proof, try_comments):
        return None
    penalty = length_penalty(length, max_tokens, length_penalty_start)
    return 1.0 if penalty is None else penalty


def min_max_normalise(values: Mapping[str, float]) -> dict[str, float]:
    """Scale to [0, 1] by `(v - min) / (max - min)`; all equal (or a single value) -> all 1.

    "All equal" is exact float equality, as the reference (`if max_reward == min_reward`).
    """
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if low == high:
        return dict.fromkeys(values, 1.0)
    return {k: (v - low) / (high - low) for k, v in values.items()}


def conjecturer_rewards(
    in_band: Iterable[str],
    rates: Mapping[str, float],
    guide_scores: Mapping[str, float] | None = None,
    lengths: Mapping[str, int] | None = None,
    *,
    use_guide: bool = True,
    max_tokens: int = 8192,
    length_penalty_start: float = 0.8,
) -> dict[str, float]:
    """Rewards of the in-band conjectures of one round.

    `R = R_guide * (1 - s)`, min-max normalised to [0, 1] over all of `in_band` (over-long ones
    included, as the reference's pool: every conjecture of `conjectures_selected_for_training_
    conjecturer`); then an over-long generation (`lengths`, in tokens) gets the negative length
    penalty instead of its normalised reward. `use_guide=False` is the "no guide" ablation:
    `R_guide = 1` and `guide_scores` is not needed.
    """
    ids = list(dict.fromkeys(in_band))
    missing_rates = [k for k in ids if k not in rates]
    if missing_rates:
        raise ValueError(f"conjecturer_rewards: no solve rate for {', '.join(missing_rates[:5])}")
    if use_guide:
        if guide_scores is None:
            raise ValueError("conjecturer_rewards: guide_scores are required unless use_guide is False")
        missing = [k for k in ids if k not in guide_scores]
        if missing:
            raise ValueError(f"conjecturer_rewards: no guide score for {', '.join(missing[:5])}")
    raw = {k: (guide_scores[k] if use_guide and guide_scores is not None else 1.0) * (1.0 - rates[k]) for k in ids}
    out = min_max_normalise(raw)
    for k in ids:
        penalty = None
        if lengths is not None and k in lengths:
            penalty = length_penalty(lengths[k], max_tokens, length_penalty_start)
        if penalty is not None:
            out[k] = penalty
    return out


def group_rewards(
    verified: Sequence[bool],
    lengths: Sequence[int] | None = None,
    proofs: Sequence[str] | None = None,
    *,
    max_tokens: int = 8192,
    length_penalty_start: float = 0.8,
    zero_try: bool = True,
    try_comments: TryComments = "reference",
) -> list[float]:
    """CISPO rewards of one group: 1 verified / 0 failed; with `zero_try` a proof using `try` gets 0
    (needs `proofs`; skipped when they are not given); then any over-long rollout, verified or
    failed, gets the length penalty instead.
    """
    if lengths is not None and len(lengths) != len(verified):
        raise ValueError("group_rewards: lengths and verified differ in size")
    if proofs is not None and len(proofs) != len(verified):
        raise ValueError("group_rewards: proofs and verified differ in size")
    out: list[float] = []
    for i, ok in enumerate(verified):
        reward = 1.0 if ok else 0.0
        if zero_try and proofs is not None and uses_try(proofs[i], try_comments):
            reward = 0.0
        penalty = None if lengths is None else length_penalty(lengths[i], max_tokens, length_penalty_start)
        out.append(reward if penalty is None else penalty)
    return out


def advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """CISPO advantages of one group: `(r - mean) / (std_pop + eps)`."""
    if not rewards:
        raise ValueError("advantages: empty group")
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + eps) for r in rewards]


def keep_group(rewards: Sequence[float]) -> bool:
    """CISPO drops groups whose rewards are all zero."""
    return any(r != 0.0 for r in rewards)


def group_advantages(groups: Mapping[str, Sequence[float]], eps: float = 1e-6) -> dict[str, list[float]]:
    """Advantages of every kept group (all-zero groups dropped), keyed like `groups`."""
    return {k: advantages(r, eps) for k, r in groups.items() if keep_group(r)}


# ----------------------------------------------------------------------------- the GRPO family


def correct_samples(verified: Sequence[bool], proofs: Sequence[str], *, zero_try: bool = True,
                    try_comments: TryComments = "reference") -> list[bool]:
    """Which samples of a group earn the correctness reward: verified, and not using `try` (with `zero_try`)."""
    if len(proofs) != len(verified):
        raise ValueError("correct_samples: proofs and verified differ in size")
    return [ok and not (zero_try and uses_try(p, try_comments)) for ok, p in zip(verified, proofs, strict=True)]


def overlong_shaping(length: int, max_tokens: int, buffer_fraction: float, penalty: float = 1.0) -> float:
    """DAPO's soft overlong punishment (arXiv 2503.14476 §3.4; verl workers/reward_manager/dapo.py,
    `overlong_buffer`): 0 up to L_max - L_cache, then ((L_max - L_cache) - L) / L_cache * penalty,
    floored at -penalty (L > L_max), with L_cache = buffer_fraction * L_max; buffer_fraction 0 = off."""
    if max_tokens <= 0:
        raise ValueError(f"overlong_shaping: max_tokens must be positive, got {max_tokens}")
    if not 0.0 <= buffer_fraction < 1.0:
        raise ValueError(f"overlong_shaping: buffer_fraction must be in [0, 1), got {buffer_fraction}")
    if buffer_fraction == 0.0:
        return 0.0
    cache = buffer_fraction * max_tokens
    expected = max_tokens - cache
    if length <= expected:
        return 0.0
    return max(-penalty, (expected - length) / cache * penalty)


def policy_rewards(correct: Sequence[bool], lengths: Sequence[int], *, incorrect: float = 0.0, max_tokens: int = 8192,
                   overlong_buffer: float = 0.0, overlong_penalty: float = 1.0) -> list[float]:
    """The GRPO family's rewards of one group: 1 correct, `incorrect` otherwise (DAPO §2.4: -1), plus
    `overlong_shaping` when `overlong_buffer` > 0 (DAPO). The SGS length penalty is not applied."""
    if len(lengths) != len(correct):
        raise ValueError("policy_rewards: lengths and correct differ in size")
    return [(1.0 if ok else incorrect) + overlong_shaping(n, max_tokens, overlong_buffer, overlong_penalty)
            for ok, n in zip(correct, lengths, strict=True)]


def grpo_advantages(rewards: Sequence[float], eps: float = 1e-6, scale_std: bool = True) -> list[float]:
    """GRPO's group-normalised advantages `(r - mean) / (std + eps)` with the unbiased (N - 1) std, as
    verl's compute_grpo_outcome_advantage (torch.std, epsilon 1e-6) and TRL's nanstd; `scale_std=False`
    is Dr. GRPO's `r - mean` (arXiv 2503.20783 §3.2; verl norm_adv_by_std_in_grpo=False, TRL
    scale_rewards="none"). A group whose rewards are all equal (a group of one included: no baseline)
    has advantage exactly 0."""
    if not rewards:
        raise ValueError("grpo_advantages: empty group")
    n = len(rewards)
    mean = sum(rewards) / n
    if max(rewards) == min(rewards):
        return [0.0] * n
    if not scale_std:
        return [r - mean for r in rewards]
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def dapo_keeps(correct: Sequence[bool]) -> bool:
    """DAPO's dynamic sampling (arXiv 2503.14476 §3.2: 0 < |{correct}| < G; verl filter_groups with
    metric "acc"): a group whose samples are all correct or all not is dropped."""
    return 0 < sum(correct) < len(correct)
