"""Error rates as measurements: k events in n runs, with an exact interval.

A false-alarm rate or a power is a count over runs, never a design figure. The
Clopper-Pearson interval is exact (it never covers less than asked), so "0 of 20"
reads as "at most 16.8 % at 95 %", which is what 20 runs can say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Bin(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _solve(f, target: float) -> float:
    """p in [0, 1] with f(p) = target, f decreasing in p (bisection to 1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Rate:
    """``k`` of ``n`` runs, the rate ``k / n`` and its exact ``low``..``high`` interval
    at ``confidence``."""

    k: int
    n: int
    rate: float
    low: float
    high: float
    confidence: float


def rate(k: int, n: int, confidence: float = 0.95) -> Rate:
    """Clopper-Pearson interval of a proportion from ``k`` events in ``n`` runs."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: _binom_cdf(k - 1, n, p), 1 - tail)
    high = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), tail)
    return Rate(k=k, n=n, rate=k / n, low=low, high=high, confidence=confidence)
