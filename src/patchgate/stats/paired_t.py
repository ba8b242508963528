"""The paired t-test on log ratios: the other test a profile may choose (``test = "t"``).

The signed-rank test (:mod:`.paired`) needs no assumption about the shape of the noise,
but its smallest p-value with n rounds is 2^-n: however quiet the machine, a look needs
as many rounds as the level asks (8 at 0.05 / 3 looks / the score's half). Where the
noise of a round is small against the threshold (a GPU with ``repeats``: 0.3 % a round
against 2 %), Student's t on the same log ratios can decide with 3 or 4 rounds. It
assumes less than it seems: under "no change" the rounds are counterbalanced, so each
log ratio is as likely to be negative as positive (symmetric about 0), where the t-test
keeps its level or errs on the safe side; one outlier widens its interval (it loses
power) rather than making it significant. Its error rates are measured, not assumed:
``patchgate calibrate`` on a profile that sets it (docs/STATISTICS.md).

:func:`compare_t` returns the same :class:`~.paired.PairedComparison` as the
signed-rank path: the mean log ratio for ``ratio``, the t interval at level ``a`` each
side, the one-sided t p-values. :func:`compare` picks the profile's test by name.

Pure: lists of floats in, frozen dataclasses out; standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .core import _nonempty
from .paired import PairedComparison, compare_differences

SIGNED_RANK, T = "signed-rank", "t"
TESTS = (SIGNED_RANK, T)
T_MIN_ROUNDS = 3  # two degrees of freedom: the fewest rounds a profile may give the t-test


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified
    Lentz), converging for x < (a + 1) / (a + b + 2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5)
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = ``p`` (bisection on :func:`t_sf`, to 1e-12 relative)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    tail = 1 - p
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > tail:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf(mid, df) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def compare_t(differences: Sequence[float], a: float, power: float = 0.8
              ) -> PairedComparison:
    """:class:`PairedComparison` of the paired t-test on log ratios: ``ratio`` the
    exponentiated mean, the interval at level ``a`` each side, one-sided p-values.
    Fewer than two rounds decide nothing (p 1, an unbounded interval); rounds that all
    agree exactly (no spread) give p 0 on their side."""
    if not 0 < a < 0.5:
        raise ValueError(f"a must be in (0, 0.5), got {a}")
    d = _nonempty(differences, "differences")
    n = len(d)
    mean = math.fsum(d) / n
    if n < 2:
        return PairedComparison(ratio=math.exp(mean), ci_low=0.0, ci_high=math.inf,
                                p_slower=1.0, p_faster=1.0, n=n, a=a, detectable=math.inf)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    if se == 0:
        p_slower, p_faster = (0.0, 1.0) if mean > 0 else (1.0, 0.0) if mean < 0 else (1.0, 1.0)
        r = math.exp(mean)
        return PairedComparison(ratio=r, ci_low=r, ci_high=r, p_slower=p_slower,
                                p_faster=p_faster, n=n, a=a, detectable=0.0)
    df = n - 1
    q = t_quantile(1 - a, df)
    p_slower = t_sf(mean / se, df)
    return PairedComparison(
        ratio=math.exp(mean), ci_low=math.exp(mean - q * se), ci_high=math.exp(mean + q * se),
        p_slower=p_slower, p_faster=1.0 - p_slower, n=n, a=a,
        detectable=math.expm1((q + t_quantile(power, df)) * se))


def compare(differences: Sequence[float], a: float, test: str = SIGNED_RANK
            ) -> PairedComparison:
    """The comparison of the named ``test`` (:data:`TESTS`)."""
    if test == T:
        return compare_t(differences, a)
    if test == SIGNED_RANK:
        return compare_differences(differences, a)
    raise ValueError(f"unknown test {test!r}; one of {', '.join(TESTS)}")
