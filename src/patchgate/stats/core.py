"""Basics (median, geometric mean, percentiles, standard errors), and one unpaired
interval.

The gate decides on paired rounds (:mod:`.paired`). :func:`shift_interval` (the
two-sample Hodges-Lehmann interval, from the Mann-Whitney null distribution) is the
unpaired counterpart of the paired interval: calibration quotes both widths, the gain
of pairing measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist

_EXACT_MAX_N = 25  # exact Mann-Whitney null distribution when both samples are this small


def _nonempty(xs: Sequence[float], name: str = "sample") -> list[float]:
    if len(xs) == 0:
        raise ValueError(f"{name} is empty")
    return [float(x) for x in xs]


def median(xs: Sequence[float]) -> float:
    """The median of ``xs`` (mean of the two middle values for even lengths)."""
    s = sorted(_nonempty(xs))
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def robust_sd(xs: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: the standard deviation of normal data,
    robust to the heavy tails of call times (one slow call moves it by one rank)."""
    values = _nonempty(xs, "xs")
    m = median(values)
    return 1.4826 * median([abs(x - m) for x in values])


def median_se(xs: Sequence[float]) -> float:
    """The standard error of the median of ``xs``, from their spread: sqrt(pi / 2) x
    :func:`robust_sd` / sqrt(n) (the median's large-sample error under normal data,
    robust to a few wild values)."""
    values = _nonempty(xs, "xs")
    return math.sqrt(math.pi / 2) * robust_sd(values) / math.sqrt(len(values))


def mean_se(xs: Sequence[float]) -> tuple[float, float]:
    """``(mean, standard error of the mean)`` of ``xs``; the error is infinite for a
    single value."""
    values = _nonempty(xs, "xs")
    n = len(values)
    sd = statistics.stdev(values) if n > 1 else math.inf
    return statistics.fmean(values), sd / math.sqrt(n)


# Student's t, one-sided 1 - 1e-4, by degrees of freedom 1..29
_T_1E4 = (3183.1, 70.7, 22.2, 13.03, 9.68, 8.02, 7.06, 6.44, 6.01, 5.69, 5.45, 5.26, 5.11,
          4.99, 4.88, 4.79, 4.71, 4.65, 4.59, 4.54, 4.49, 4.45, 4.42, 4.38, 4.35, 4.32, 4.3,
          4.28, 4.25)


def student_t_1e4(df: int) -> float:
    """Student's t quantile at one-sided 1 - 1e-4 for ``df`` degrees of freedom; from
    30 on, the normal's (3.72), which it approaches from above."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T_1E4[df - 1] if df <= len(_T_1E4) else NormalDist().inv_cdf(1 - 1e-4)


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


def order_effect(diffs: Sequence[float]) -> tuple[float, float, float]:
    """Paired differences of rounds whose order alternates (round 1: A then B, round 2:
    B then A, ...; each ``log(A / B)``): ``(effect, sd, sd_without)``. ``effect`` is
    half the mean of the rounds where A went second minus that of the rounds where it
    went first: how much slower a configuration is timed second than first (the
    balanced order cancels it from the mean, not from the spread); ``sd`` the standard
    deviation of the differences, ``sd_without`` theirs once it is removed (one degree
    of freedom more spent). Needs at least 5 rounds."""
    values = _nonempty(diffs, "diffs")
    if len(values) < 5:
        raise ValueError("order_effect needs at least 5 rounds")
    first, second = values[0::2], values[1::2]
    effect = (statistics.fmean(second) - statistics.fmean(first)) / 2
    centred = [x + effect if i % 2 == 0 else x - effect for i, x in enumerate(values)]
    mean = statistics.fmean(centred)
    sd_without = math.sqrt(sum((x - mean) ** 2 for x in centred) / (len(values) - 2))
    return effect, statistics.stdev(values), sd_without
