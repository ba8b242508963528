"""Accuracy on the same items (paired): McNemar's exact test and a paired bootstrap CI.

Pure: lists of per-item scores in, frozen dataclasses out; no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .core import _check_confidence, _nonempty, _percentile


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on the discordant pairs.

    ``b``: items right -> wrong, ``c``: wrong -> right. p = min(1, 2 P(X <= min(b, c)))
    with X ~ Bin(b + c, 1/2). A large p (not significant) means the flips are
    consistent with chance, not that the two models agree item for item.
    """
    if b < 0 or c < 0:
        raise ValueError("flip counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def _mean_ratio(ref_mean: float, cand_mean: float) -> float:
    if ref_mean == 0:
        return 1.0 if cand_mean == 0 else math.inf
    return cand_mean / ref_mean


def mean_ratio(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """Candidate mean / reference mean over the same items (1 when both are 0): the
    ratio the accuracy rule reads, as :func:`compare_accuracy` computes it."""
    ref, cand = _nonempty(reference, "reference"), _nonempty(candidate, "candidate")
    if len(ref) != len(cand):
        raise ValueError(f"paired scores differ in length: {len(ref)} vs {len(cand)}")
    return _mean_ratio(math.fsum(ref) / len(ref), math.fsum(cand) / len(cand))


@dataclass(frozen=True)
class AccuracyComparison:
    """Paired accuracy: means, ``ratio`` = candidate / reference with its CI, flips, p."""

    reference: float
    candidate: float
    ratio: float
    ci_low: float
    ci_high: float
    flipped_to_wrong: int
    flipped_to_right: int
    p_value: float
    n: int


def compare_accuracy(
    reference: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> AccuracyComparison:
    """Compare per-item scores (0/1 or fractional) of two runs on the same items, in order.

    An item counts as correct when its score is >= 0.5. ``p_value`` is
    :func:`mcnemar_exact` on the flips; the CI is a paired bootstrap of the ratio of
    means (the same resampled items for both). A CI reaching below the accuracy floor
    means the run cannot rule out a loss that large.
    """
    ref, cand = _nonempty(reference, "reference"), _nonempty(candidate, "candidate")
    if len(ref) != len(cand):
        raise ValueError(f"paired scores differ in length: {len(ref)} vs {len(cand)}")
    _check_confidence(confidence)
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    n = len(ref)
    to_wrong = sum(1 for r, c in zip(ref, cand, strict=True) if r >= 0.5 > c)
    to_right = sum(1 for r, c in zip(ref, cand, strict=True) if c >= 0.5 > r)
    rng = random.Random(seed)
    ratios = []
    for _ in range(n_boot):
        idx = rng.choices(range(n), k=n)
        ratios.append(_mean_ratio(sum(ref[i] for i in idx), sum(cand[i] for i in idx)))
    ratios.sort()
    tail = (1 - confidence) / 2
    ref_mean, cand_mean = math.fsum(ref) / n, math.fsum(cand) / n
    return AccuracyComparison(
        reference=ref_mean,
        candidate=cand_mean,
        ratio=mean_ratio(ref, cand),
        ci_low=_percentile(ratios, tail),
        ci_high=_percentile(ratios, 1 - tail),
        flipped_to_wrong=to_wrong,
        flipped_to_right=to_right,
        p_value=mcnemar_exact(to_wrong, to_right),
        n=n,
    )
