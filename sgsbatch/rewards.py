"""Rewards and training weights: Solver (REINFORCE-1/2), Conjecturer, and CISPO groups.

Covered: the length penalty, the `try` tactic rule, per-proof Solver weights, per-round
Conjecturer rewards (with the "no guide" ablation), and CISPO group rewards and advantages.
Not covered: the losses that consume these numbers, band selection (`selection.py`) and guide
scores (`review.py`).

The `try` rule matches the tactic token, not the substring: `try` must not be preceded by an
identifier character, `.`, `'`, `!` or `?`, and must not be followed by an identifier character
or `'`; comments are ignored. So `try norm_num`, `<;> try simp`, `(try linarith)`, `first | try
rfl` and `try?` are hits; `symmetry`, `geometry`, `entry`, `retry_lemma`, `h_try`, `try_this`,
`Foo.try` and `-- try nlinarith` are not.

Precedence for a verified in-band proof: an over-long proof gets the (negative) length
penalty, even if it also uses `try`; otherwise a proof using `try` gets 0; otherwise 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from sgsbatch.extraction import strip_lean_comments

_TRY_RE = re.compile(r"(?<![\w.'!?])try(?![\w'])")


def uses_try(proof: str) -> bool:
    """Whether `proof` uses the `try` tactic (as a token, outside comments)."""
    return _TRY_RE.search(strip_lean_comments(proof)) is not None


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
) -> float | None:
    """REINFORCE-1/2 weight of one Solver sample; None when it is not trained on.

    `length` is the generation's token count. Failed or out-of-band samples are dropped (None).
    """
    if not verified or not in_band:
        return None
    penalty = length_penalty(length, max_tokens, length_penalty_start)
    if penalty is not None:
        return penalty
    if zero_try and uses_try(proof):
        return 0.0
    return 1.0


def min_max_normalise(values: Mapping[str, float]) -> dict[str, float]:
    """Scale to [0, 1] by `(v - min) / (max - min)`; all equal (or a single value) -> all 1."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if math.isclose(low, high, rel_tol=0.0, abs_tol=1e-12):
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

    `R = R_guide * (1 - s)`, min-max normalised to [0, 1] over the conjectures that are not
    over-long; an over-long generation (`lengths`, in tokens) gets the negative length penalty
    instead. `use_guide=False` is the "no guide" ablation: `R_guide = 1` and `guide_scores` is
    not needed.
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
    penalties: dict[str, float] = {}
    raw: dict[str, float] = {}
    for k in ids:
        penalty = None
        if lengths is not None and k in lengths:
            penalty = length_penalty(lengths[k], max_tokens, length_penalty_start)
        if penalty is not None:
            penalties[k] = penalty
            continue
        r_guide = guide_scores[k] if use_guide and guide_scores is not None else 1.0
        raw[k] = r_guide * (1.0 - rates[k])
    normalised = min_max_normalise(raw)
    return {k: penalties[k] if k in penalties else normalised[k] for k in ids}


def group_rewards(
    verified: Sequence[bool],
    lengths: Sequence[int] | None = None,
    proofs: Sequence[str] | None = None,
    *,
    max_tokens: int = 8192,
    length_penalty_start: float = 0.8,
    zero_try: bool = True,
) -> list[float]:
    """CISPO rewards of one group: 1 verified / 0 failed; an over-long verified sample gets the
    length penalty. With `zero_try` (as for REINFORCE-1/2) a verified proof using `try` gets 0;
    it needs `proofs`, and is skipped when they are not given.
    """
    if lengths is not None and len(lengths) != len(verified):
        raise ValueError("group_rewards: lengths and verified differ in size")
    if proofs is not None and len(proofs) != len(verified):
        raise ValueError("group_rewards: proofs and verified differ in size")
    out: list[float] = []
    for i, ok in enumerate(verified):
        if not ok:
            out.append(0.0)
            continue
        penalty = None if lengths is None else length_penalty(lengths[i], max_tokens, length_penalty_start)
        if penalty is not None:
            out.append(penalty)
        elif zero_try and proofs is not None and uses_try(proofs[i]):
            out.append(0.0)
        else:
            out.append(1.0)
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
