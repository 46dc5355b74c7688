"""Selection: solve rates, the Solver and Conjecturer bands, and which targets a round samples.

Covered: which problems a round trains on (bands, the reference's statement selection modes,
STP's conjecture band and per-problem proof cap) and which targets and proofs a round samples from
(the unsolved set for the Conjecturer, the Expert Iteration cap, the seeds of seeded conjecturing).
Not covered: the solved store itself (state/ingest.py keeps at most `solver.store_cap` proofs per
target, first come first kept) and the rewards. Determinism: band functions return sets; functions
that return targets to sample keep the caller's order; seed draws come from an rng the caller seeds.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def solve_rate(verified: int, samples: int) -> float:
    """`verified / samples`; a problem with no samples is a user error."""
    if samples <= 0:
        raise ValueError(f"solve_rate: samples must be positive, got {samples}")
    if not 0 <= verified <= samples:
        raise ValueError(f"solve_rate: verified must be in 0..{samples}, got {verified}")
    return verified / samples


def solver_band(
    rates: Mapping[str, float], low: float = 0.0, high: float = 0.5, include_high: bool = True
) -> set[str]:
    """Problems with `low < s <= high` (`s < high` when `include_high` is False).

    Default: the "hard" band `0 < s <= 0.5`. CISPO uses `high=1.0, include_high=False`.
    """
    if low > high:
        raise ValueError(f"solver_band: low ({low}) is above high ({high})")
    if include_high:
        return {k for k, s in rates.items() if low < s <= high}
    return {k for k, s in rates.items() if low < s < high}


def conjecturer_band(rates: Mapping[str, float], percentile: float = 0.7) -> set[str]:
    """In-band conjectures: among those with `0 < s < 1`, keep `0 < s <= t`, `t = sorted[int(p * n)]`.

    Ties with `t` are kept. `percentile = 1.0` would index past the end; the index is clamped to
    the last element (keep all of `0 < s < 1`).
    """
    if not 0.0 <= percentile <= 1.0:
        raise ValueError(f"conjecturer_band: percentile must be in [0, 1], got {percentile}")
    candidates = {k: s for k, s in rates.items() if 0.0 < s < 1.0}
    if not candidates:
        return set()
    ordered = sorted(candidates.values())
    threshold = ordered[min(int(percentile * len(ordered)), len(ordered) - 1)]
    return {k for k, s in candidates.items() if s <= threshold}


def unsolved(target_ids: Iterable[str], stored: Mapping[str, int]) -> list[str]:
    """Targets without a stored verified proof (`stored`: proofs per target), in the given order."""
    return [t for t in target_ids if not stored.get(t)]


def ei_targets(target_ids: Iterable[str], stored: Mapping[str, int], cap: int) -> list[str]:
    """Targets Expert Iteration still samples: fewer than `cap` stored proofs, in the given order."""
    if cap <= 0:
        raise ValueError(f"ei_targets: cap must be positive, got {cap}")
    return [t for t in target_ids if stored.get(t, 0) < cap]


def selected_problems(
    mode: str,
    rates: Mapping[str, float],
    targets: Collection[str] = (),
    unsolved: Collection[str] = (),
    *,
    low: float = 0.0,
    high: float = 0.5,
    include_high: bool = True,
) -> set[str]:
    """The problems of one round the Solver trains on under the reference's statement_selection_mode
    (sgs/pipeline/step1_data_gen.py:1040-1126, the same rule for targets and conjectures but "unsolved").

    `targets`: which keys of `rates` are targets (the rest are conjectures); `unsolved`: the targets
    without a stored proof when the round started. "hard": `solver_band(low, high, include_high)`;
    "all_none_0_1": `low < s < 1`; "all": `s > 0`; "unsolved": targets first solved this round
    (`s > 0` and in `unsolved`) and conjectures with `s > 0`; "less_16_proofs" and "stp_improved_ei":
    `s > 0` (Expert Iteration then trains on a window of stored proofs, not on this set alone).
    """
    if mode == "hard":
        return solver_band(rates, low=low, high=high, include_high=include_high)
    if mode == "all_none_0_1":
        return solver_band(rates, low=low, high=1.0, include_high=False)
    if mode in ("all", "less_16_proofs", "stp_improved_ei"):
        return {k for k, s in rates.items() if s > 0.0}
    if mode == "unsolved":
        was_unsolved, is_target = set(unsolved), set(targets)
        return {k for k, s in rates.items() if s > 0.0 and (k not in is_target or k in was_unsolved)}
    raise ValueError(f"selected_problems: unknown mode {mode!r}; valid: hard, unsolved, stp_improved_ei, "
                     "all_none_0_1, all, less_16_proofs")


def seed_cycle(proofs: Sequence[T], n: int, rng: random.Random) -> list[T]:
    """`n` seeds from a solved statement's `proofs`, cycled as the reference does (sgs/pipeline/
    step1_data_gen.py:317-340): each pass is a fresh random order (`rng.sample(proofs, len(proofs))`),
    passes follow one another until `n` are drawn, so each proof seeds floor(n/p) or ceil(n/p)
    prompts. [] without proofs (an unsolved statement seeds nothing)."""
    if n < 0:
        raise ValueError(f"seed_cycle: n must be >= 0, got {n}")
    out: list[T] = []
    while proofs and len(out) < n:
        for proof in rng.sample(list(proofs), len(proofs)):
            out.append(proof)
            if len(out) >= n:
                break
    return out


def conjecture_seeds(target_ids: Iterable[str], stored: Mapping[str, Sequence[int]], n: int,
                     seed: str) -> list[tuple[str, int, int]]:
    """The seeded Conjecturer's prompts of one round (`conjecturer.setup = "seed_statement"`):
    (target id, stored proof slot, samples) for every solved target, in the given order.

    `stored`: each target's stored proof slots; `n`: prompts per solved target (the reference's
    `conjectures_per_statement`), drawn by `seed_cycle` with an rng seeded by `seed` and the target,
    so a target's seeds depend on neither the others nor the order; prompts of one proof are one
    entry with its count of samples, entries in the order of first use.
    """
    out: list[tuple[str, int, int]] = []
    for t in target_ids:
        slots = sorted(stored.get(t, ()))
        counts: dict[int, int] = {}
        for slot in seed_cycle(slots, n, random.Random(f"{seed}:{t}")):
            counts[slot] = counts.get(slot, 0) + 1
        out.extend((t, slot, k) for slot, k in counts.items())
    return out


def capped_proofs(proofs: Iterable[tuple[int, str, int, str]], cap: int) -> list[tuple[int, str, int]]:
    """(round, problem id, sample) of the proofs STP's Expert Iteration trains on, from verified
    (round, problem id, sample, proof text): per problem, distinct proof texts only, newest round
    first (then sample order), at most `cap` (kfdong/STP RL/RL_step3_final_model.py:176-187 keeps
    16 per statement, in a random order)."""
    if cap <= 0:
        raise ValueError(f"capped_proofs: cap must be positive, got {cap}")
    kept: dict[str, set[str]] = {}
    out = []
    for rnd, pid, sample, text in sorted(proofs, key=lambda p: (-p[0], p[1], p[2])):
        seen = kept.setdefault(pid, set())
        if text in seen or len(seen) >= cap:
            continue
        seen.add(text)
        out.append((rnd, pid, sample))
    return sorted(out)


def stp_conjecture_band(rates: Mapping[str, float], ratios: Mapping[str, float], threshold: float = 0.25,
                        quantile: float = 0.2) -> set[str]:
    """STP's conjectures to train the Conjecturer on: those with `0 < s < threshold` (kfdong/STP
    RL/utils/RL_utils.py:28, 481), then its elegance filter (`filter_by_ratio`, RL_utils.py:79-101):
    with `ratios` = each conjecture's shortest verified proof length / its statement length, keep those
    at or above `cutoff = sorted(ratios)[int(n * quantile)]` over the n candidates (all when n < 2)."""
    if not 0.0 <= quantile < 1.0:
        raise ValueError(f"stp_conjecture_band: quantile must be in [0, 1), got {quantile}")
    candidates = [k for k, s in rates.items() if 0.0 < s < threshold]
    missing = [k for k in candidates if k not in ratios]
    if missing:
        raise ValueError(f"stp_conjecture_band: no proof length ratio for {', '.join(sorted(missing)[:5])}")
    if len(candidates) < 2:
        return set(candidates)
    ordered = sorted(ratios[k] for k in candidates)
    cutoff = ordered[int(len(ordered) * quantile)]
    return {k for k in candidates if ratios[k] >= cutoff}


def rollout_draw(target_ids: Sequence[str], r: int, n: int, seed: str) -> list[str]:
    """Round r's rollout batch: the next `n` targets of a seeded shuffle of `target_ids`, reshuffled each pass.

    As verl's and TRL's dataloaders: pass e over the targets is a shuffle seeded by (`seed`, e), cut into
    len // n batches in order; the targets past the last whole batch wait for a later pass (drop_last), so every
    round samples exactly n distinct targets. With n >= len(target_ids) every round takes them all, in its
    pass's order. The order returned is the draw order (DAPO's dynamic sampling keeps groups in it).
    """
    ids = sorted(target_ids)
    if not ids or n <= 0:
        return []
    per_pass = max(1, len(ids) // n)
    epoch, k = divmod(r, per_pass)
    perm = ids[:]
    random.Random(f"{seed}:rollout:{epoch}").shuffle(perm)
    return perm[k * n:(k + 1) * n]
