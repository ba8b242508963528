"""Basics, and latency compared without pairing.

The gate decides on paired rounds (:mod:`.paired`). What stays here serves samples
that do not pair up, and the comparison of the two: :func:`compare_latency` (median
ratio, Mann-Whitney and a bootstrap CI) and :func:`shift_interval` (the two-sample
Hodges-Lehmann interval, the unpaired counterpart of the paired one).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

_EXACT_MAX_N = 25  # exact Mann-Whitney when both samples are this small and untied
_MAD_TO_SIGMA = 1.4826  # MAD * this estimates sigma for normal data


def _nonempty(xs: Sequence[float], name: str = "sample") -> list[float]:
    if len(xs) == 0:
        raise ValueError(f"{name} is empty")
    return [float(x) for x in xs]


def median(xs: Sequence[float]) -> float:
    """The median of ``xs`` (mean of the two middle values for even lengths)."""
    s = sorted(_nonempty(xs))
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def geometric_mean(xs: Sequence[float]) -> float:
    """The geometric mean of ``xs``; every value must be > 0."""
    vals = _nonempty(xs)
    if any(not x > 0 for x in vals):
        raise ValueError("geometric mean needs values > 0")
    return math.exp(math.fsum(math.log(x) for x in vals) / len(vals))


def _percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of an already sorted list."""
    pos = q * (len(sorted_xs) - 1)
    i = math.floor(pos)
    frac = pos - i
    lo = sorted_xs[i]
    if frac == 0 or i + 1 >= len(sorted_xs):
        return lo
    hi = sorted_xs[i + 1]
    return lo if lo == hi else lo + (hi - lo) * frac


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


# --- Mann-Whitney U ------------------------------------------------------------------


@dataclass(frozen=True)
class MannWhitney:
    """``u``: pairs (x in a, y in b) with x > y, ties 0.5; ``method``: "exact" or "normal"."""

    u: float
    p_value: float
    method: str


def _u_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1+n2, n1) orderings give U = 0, 1, ..., n1*n2 (no ties).

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q, built as
    prod_{k=1..n1} (1 - q^(n2+k)) / (1 - q^k) with exact integer arithmetic.
    """
    size = n1 * n2 + 1
    poly = [1] + [0] * (size - 1)
    for k in range(1, n1 + 1):
        m = n2 + k
        for i in range(size - 1, m - 1, -1):  # multiply by (1 - q^m)
            poly[i] -= poly[i - m]
        for i in range(k, size):  # divide by (1 - q^k)
            poly[i] += poly[i - k]
    return poly


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann-Whitney U test: do ``a`` and ``b`` come from the same distribution?

    A small ``p_value`` says values of one sample tend to be larger than the other's.
    A large one (not significant) says only that this data cannot tell them apart; it
    does not show they are equal. Exact null distribution when there are no ties and
    both samples have at most 25 values, else the normal approximation with tie and
    continuity corrections (as scipy's ``mannwhitneyu``). Identical samples give 1.0.
    """
    xs, ys = _nonempty(a, "a"), _nonempty(b, "b")
    n1, n2 = len(xs), len(ys)
    pooled = sorted(xs + ys)
    ranks: dict[float, float] = {}
    tie_sizes: list[int] = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1] == pooled[i]:
            j += 1
        ranks[pooled[i]] = (i + j) / 2 + 1  # 1-based mid-rank
        tie_sizes.append(j - i + 1)
        i = j + 1
    u1 = math.fsum(ranks[x] for x in xs) - n1 * (n1 + 1) / 2
    u_big = max(u1, n1 * n2 - u1)
    ties = any(t > 1 for t in tie_sizes)

    if not ties and n1 <= _EXACT_MAX_N and n2 <= _EXACT_MAX_N:
        counts = _u_counts(n1, n2)
        tail = sum(counts[round(u_big) :])  # P(U >= u_big), times C(n1+n2, n1)
        p = 2 * tail / math.comb(n1 + n2, n1)
        return MannWhitney(u=u1, p_value=min(1.0, p), method="exact")

    n = n1 + n2
    tie_term = sum(t**3 - t for t in tie_sizes)
    var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:  # every value equal
        return MannWhitney(u=u1, p_value=1.0, method="normal")
    z = (u_big - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    p = 2 * NormalDist().cdf(-z)
    return MannWhitney(u=u1, p_value=min(1.0, p), method="normal")


# --- latency -------------------------------------------------------------------------


@dataclass(frozen=True)
class RatioCI:
    """``ratio`` of medians with its ``low``..``high`` interval at ``confidence``."""

    ratio: float
    low: float
    high: float
    confidence: float


def bootstrap_ratio_ci(
    candidate: Sequence[float],
    baseline: Sequence[float],
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> RatioCI:
    """Percentile-bootstrap CI of median(candidate) / median(baseline).

    Each sample is resampled independently ``n_boot`` times. An interval that contains
    1.0 means the run cannot tell the two medians apart at this confidence. Values must
    be > 0 (times).
    """
    c, b = _nonempty(candidate, "candidate"), _nonempty(baseline, "baseline")
    _check_confidence(confidence)
    if any(not x > 0 for x in c + b):
        raise ValueError("bootstrap ratio needs values > 0")
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    rng = random.Random(seed)
    ratios = sorted(
        median(rng.choices(c, k=len(c))) / median(rng.choices(b, k=len(b))) for _ in range(n_boot)
    )
    tail = (1 - confidence) / 2
    return RatioCI(
        ratio=median(c) / median(b),
        low=_percentile(ratios, tail),
        high=_percentile(ratios, 1 - tail),
        confidence=confidence,
    )


def relative_spread(xs: Sequence[float]) -> float:
    """Robust relative noise: 1.4826 * MAD / |median| (a robust coefficient of variation).

    0.02 means the run-to-run noise is about 2 % of the median. One value gives 0.0.
    """
    m = median(xs)
    if m == 0:
        raise ValueError("relative spread is undefined for a median of 0")
    mad = median([abs(x - m) for x in xs])
    return _MAD_TO_SIGMA * mad / abs(m)


def minimum_detectable_change(
    candidate: Sequence[float],
    baseline: Sequence[float],
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest relative change of the median (0.03 = 3 %) these samples could detect.

    (z_{1-alpha/2} + z_{power}) * sqrt(pi/2) * sqrt(s_c^2/n_c + s_b^2/n_b), where s is
    each side's :func:`relative_spread` and sqrt(pi/2) is the median's efficiency loss
    against the mean for normal data. A "no regression" verdict only rules out changes
    about this large or larger. ``math.inf`` if a side has fewer than 2 values.
    """
    if len(candidate) < 2 or len(baseline) < 2:
        return math.inf
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    s_c, s_b = relative_spread(candidate), relative_spread(baseline)
    se = math.sqrt(s_c**2 / len(candidate) + s_b**2 / len(baseline))
    return z * math.sqrt(math.pi / 2) * se


@dataclass(frozen=True)
class LatencyComparison:
    """Verdict on candidate vs baseline times; ``ratio`` > 1 means the candidate is slower.

    ``mark`` (asv style): "+" regressed, "-" improved, "~" beyond the threshold but not
    significant, " " otherwise. ``detectable``: see :func:`minimum_detectable_change`.
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    mark: str
    regressed: bool
    improved: bool
    detectable: float


def compare_latency(
    candidate: Sequence[float],
    baseline: Sequence[float],
    threshold: float = 0.05,
    alpha: float = 0.05,
    confidence: float = 0.95,
    seed: int = 0,
) -> LatencyComparison:
    """Compare two samples of times by the ratio of their medians.

    ``significant``: Mann-Whitney p < ``alpha`` AND the bootstrap CI excludes 1.0.
    ``regressed``: significant and ratio > 1 + threshold; ``improved``: significant and
    ratio < 1 / (1 + threshold). Not significant means this run could not tell the two
    apart; with ``detectable`` above the threshold it could not have, either.
    """
    ci = bootstrap_ratio_ci(candidate, baseline, confidence=confidence, seed=seed)
    p = mann_whitney(candidate, baseline).p_value
    significant = p < alpha and (ci.low > 1.0 or ci.high < 1.0)
    slower = ci.ratio > 1 + threshold
    faster = ci.ratio < 1 / (1 + threshold)
    regressed, improved = significant and slower, significant and faster
    if regressed:
        mark = "+"
    elif improved:
        mark = "-"
    elif slower or faster:
        mark = "~"
    else:
        mark = " "
    return LatencyComparison(
        ratio=ci.ratio,
        ci_low=ci.low,
        ci_high=ci.high,
        p_value=p,
        significant=significant,
        mark=mark,
        regressed=regressed,
        improved=improved,
        detectable=minimum_detectable_change(candidate, baseline, alpha=alpha),
    )


def lower_cut(counts: Sequence[int], total: int, a: float) -> int:
    """From a null distribution given as counts of each statistic value 0, 1, 2, ...
    (out of ``total``): the largest k with P(statistic <= k - 1) <= ``a``. A one-sided
    bound at level ``a`` leaves out the k smallest of the sorted estimates (0: there is
    no bound at this sample size and level)."""
    k, below = 0, 0
    while k < len(counts) and below + counts[k] <= a * total:
        below += counts[k]
        k += 1
    return k


def shift_interval(candidate: Sequence[float], baseline: Sequence[float], a: float
                   ) -> tuple[float, float, float]:
    """Unpaired: the two-sample Hodges-Lehmann estimate of log(candidate / baseline)
    (the median of all pairwise differences of the logs) with one-sided bounds at
    level ``a`` each, from the Mann-Whitney null distribution (exact up to 25 values
    a side, else normal). What an unpaired test would conclude from the same samples:
    the gate quotes its width beside the paired one."""
    c = [math.log(x) for x in _nonempty(candidate, "candidate")]
    b = [math.log(x) for x in _nonempty(baseline, "baseline")]
    diffs = sorted(x - y for x in c for y in b)
    n1, n2 = len(c), len(b)
    if n1 <= _EXACT_MAX_N and n2 <= _EXACT_MAX_N:
        k = lower_cut(_u_counts(n1, n2), math.comb(n1 + n2, n1), a)
    else:
        sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
        k = max(0, math.floor(n1 * n2 / 2 + 0.5 - NormalDist().inv_cdf(1 - a) * sd))
    estimate = median(diffs)
    if k == 0:
        return estimate, -math.inf, math.inf
    return estimate, diffs[k - 1], diffs[len(diffs) - k]
