"""Held-out evaluation's pure logic: the unbiased pass@k estimator and a set's summary. No I/O.

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): with n samples of a
problem of which c are correct, the chance that k samples drawn without replacement hold at least one
correct one is 1 - C(n-c, k) / C(n, k). It is computed as 1 - prod_{i=n-c+1..n} (1 - k/i) (their
numerically stable form): no factorials, exact 1.0 when n - c < k. A set's pass@k is the mean over its
problems. Not covered: generating or verifying the samples (phases/evaluate.py), recording metrics
(ops/evaluate.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k for one problem with `c` correct of `n` samples (1 <= k <= n)."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: correct samples must be within [0, n = {n}], got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: k must be within [1, n = {n}] (k samples of the n drawn), got {k}")
    if n - c < k:  # every draw of k samples holds a correct one
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def set_pass_at_k(counts: Iterable[tuple[int, int]], ks: Sequence[int]) -> dict[int, float]:
    """{k: mean pass@k} over a set's problems, each given as (n samples, c correct); an empty set gives 0.0."""
    rows = list(counts)
    return {k: (sum(pass_at_k(n, c, k) for n, c in rows) / len(rows) if rows else 0.0) for k in ks}


def correct_counts(results: Mapping[str, Sequence[str]], verified: str = "verified") -> list[tuple[int, int]]:
    """(n, c) per problem from its samples' verdicts (`verified` counts as correct), in id order."""
    return [(len(v), sum(1 for x in v if x == verified)) for _, v in sorted(results.items())]
