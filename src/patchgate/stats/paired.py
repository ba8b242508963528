"""Paired latency statistics: one log ratio per round, a signed-rank test, a
Hodges-Lehmann estimate with its distribution-free interval, and five outcomes.

Every round measures every configuration back to back, so round i gives the log
ratio ``d_i = log(candidate_i / baseline_i)``. A drift of the machine that lasts
longer than a round falls on both sides of a pair and cancels, instead of widening
both samples as it does in an unpaired comparison. Call times on a shared machine
are heavy-tailed (one call in twenty can take twice as long), so everything here
is rank-based: the Wilcoxon signed-rank test for significance, the Hodges-Lehmann
estimate (the median of the Walsh averages ``(d_i + d_j) / 2``) for the change, and
the interval that inverts the same test. An outlier moves none of them by more than
one rank.

Outcomes (:func:`outcome`), for a threshold t (0.05 = 5 %):

- ``slower``: significantly slower (the caller says at which level, e.g. after Holm)
  AND the estimated ratio is above 1 + t;
- ``faster``: the mirror image;
- ``equivalent``: the interval lies inside (1 / (1 + t), 1 + t): two one-sided tests
  (TOST) say the change is smaller than the threshold either way;
- ``not slower``: the interval's upper end lies below 1 + t, its lower end does not
  clear 1 / (1 + t): shown not slower beyond the threshold (a non-inferiority test),
  maybe faster; what an accepted change must show;
- ``undecided``: none of these; the run could not tell. More rounds may decide it.
  A change is never accepted on this one: "not shown slower" is not "shown not slower".

Pure: lists of floats in, frozen dataclasses out; no I/O.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .core import _nonempty, lower_cut, median

EXACT_MAX_N = 60  # exact signed-rank distribution up to this many pairs (no ties)
SLOWER, FASTER, EQUIVALENT, UNDECIDED = "slower", "faster", "equivalent", "undecided"
NOT_SLOWER = "not slower"
OUTCOMES = (SLOWER, FASTER, EQUIVALENT, NOT_SLOWER, UNDECIDED)
SHOWN_NOT_SLOWER = (FASTER, EQUIVALENT, NOT_SLOWER)  # what an accepted change shows


def log_ratios(candidate: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``log(candidate_i / baseline_i)`` per round; the samples must pair up (same length,
    values > 0)."""
    c, b = _nonempty(candidate, "candidate"), _nonempty(baseline, "baseline")
    if len(c) != len(b):
        raise ValueError(f"paired samples differ in length: {len(c)} vs {len(b)}")
    if any(not x > 0 for x in c + b):
        raise ValueError("times must be > 0")
    return [math.log(x / y) for x, y in zip(c, b, strict=True)]


@functools.lru_cache(maxsize=128)
def _counts(n: int) -> tuple[int, ...]:
    """How many of the 2^n sign patterns give W+ = 0, 1, ..., n(n+1)/2 (ranks 1..n)."""
    top = n * (n + 1) // 2
    counts = [1] + [0] * top
    for k in range(1, n + 1):
        for w in range(k * (k + 1) // 2, k - 1, -1):
            counts[w] += counts[w - k]
    return tuple(counts)


def _ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) of ``values`` and the sizes of their groups of ties."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@dataclass(frozen=True)
class SignedRank:
    """Wilcoxon signed-rank test of "the differences are centred on 0".

    ``p_greater``: one-sided p for "centred above 0" (the candidate is slower);
    ``p_less``: for "below 0". A large p says only that this data cannot tell; it
    does not show the change is 0 (that is what :func:`outcome`'s equivalence is for).
    ``n`` counts the non-zero differences (zeros carry no sign and are dropped).
    """

    n: int
    w_plus: float
    p_greater: float
    p_less: float
    method: str  # "exact" | "normal"


def signed_rank(differences: Sequence[float]) -> SignedRank:
    """Exact null distribution for up to :data:`EXACT_MAX_N` untied differences, else
    the normal approximation with tie and continuity corrections (as
    ``scipy.stats.wilcoxon`` with ``zero_method="wilcox"``)."""
    d = [x for x in _nonempty(differences, "differences") if x != 0]
    n = len(d)
    if n == 0:
        return SignedRank(n=0, w_plus=0.0, p_greater=1.0, p_less=1.0, method="exact")
    ranks, ties = _ranks([abs(x) for x in d])
    w = math.fsum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    if n <= EXACT_MAX_N and all(t == 1 for t in ties):
        counts = _counts(n)
        total = 2**n
        w_int = round(w)
        return SignedRank(n=n, w_plus=w, p_greater=sum(counts[w_int:]) / total,
                          p_less=sum(counts[: w_int + 1]) / total, method="exact")
    mean = n * (n + 1) / 4
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in ties) / 48
    if var <= 0:
        return SignedRank(n=n, w_plus=w, p_greater=1.0, p_less=1.0, method="normal")
    sd = math.sqrt(var)
    norm = NormalDist()
    return SignedRank(n=n, w_plus=w, p_greater=1 - norm.cdf((w - mean - 0.5) / sd),
                      p_less=norm.cdf((w - mean + 0.5) / sd), method="normal")


def _walsh(d: list[float]) -> list[float]:
    n = len(d)
    return sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))


def _cut(n: int, a: float) -> int:
    """How many Walsh averages a one-sided bound at level ``a`` leaves out on its side:
    the largest k with P(W+ <= k - 1) <= a (0: no finite bound at this n and level)."""
    if n <= EXACT_MAX_N:
        return lower_cut(_counts(n), 2**n, a)
    m = n * (n + 1) / 2
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(0, math.floor(m / 2 + 0.5 - NormalDist().inv_cdf(1 - a) * sd))


@dataclass(frozen=True)
class Location:
    """Hodges-Lehmann ``estimate`` of the centre of the differences, with ``low`` and
    ``high``: one-sided bounds at level ``a`` each (together a 1 - 2a interval).
    An infinite bound means the data are too few for this level."""

    estimate: float
    low: float
    high: float
    a: float
    n: int


def hodges_lehmann(differences: Sequence[float], a: float) -> Location:
    """The median of the Walsh averages and the interval that inverts the signed-rank
    test: the true centre lies above ``low`` with probability >= 1 - a (and below
    ``high`` likewise) when the differences are symmetric about it."""
    if not 0 < a < 0.5:
        raise ValueError(f"a must be in (0, 0.5), got {a}")
    d = _nonempty(differences, "differences")
    walsh = _walsh(d)
    k = _cut(len(d), a)
    if k == 0:
        return Location(median(walsh), -math.inf, math.inf, a, len(d))
    return Location(median(walsh), walsh[k - 1], walsh[len(walsh) - k], a, len(d))


@dataclass(frozen=True)
class PairedComparison:
    """Candidate vs baseline from paired rounds. ``ratio`` = exp(Hodges-Lehmann
    estimate of the log ratio) > 1 means the candidate is slower; ``ci_low`` ..
    ``ci_high`` is the 1 - 2a interval of the ratio; ``p_slower`` / ``p_faster``
    are the one-sided signed-rank p-values; ``detectable`` is the smallest change
    (0.03 = 3 %) this many rounds at this noise could detect at level ``a`` with 80 %
    power (inf if the interval is unbounded)."""

    ratio: float
    ci_low: float
    ci_high: float
    p_slower: float
    p_faster: float
    n: int
    a: float
    detectable: float


def compare_differences(differences: Sequence[float], a: float,
                        power: float = 0.8) -> PairedComparison:
    """:class:`PairedComparison` from log ratios (one per round, or pooled per round)."""
    loc = hodges_lehmann(differences, a)
    test = signed_rank(differences)
    if math.isfinite(loc.low) and math.isfinite(loc.high):
        z = NormalDist().inv_cdf(1 - a)
        se = (loc.high - loc.low) / (2 * z)
        detectable = math.expm1((z + NormalDist().inv_cdf(power)) * se)
    else:
        detectable = math.inf
    return PairedComparison(
        ratio=math.exp(loc.estimate), ci_low=math.exp(loc.low), ci_high=math.exp(loc.high),
        p_slower=test.p_greater, p_faster=test.p_less, n=len(differences), a=a,
        detectable=detectable)


def compare_paired(candidate: Sequence[float], baseline: Sequence[float], a: float
                   ) -> PairedComparison:
    """Compare two samples of times measured in the same rounds (element i of each)."""
    return compare_differences(log_ratios(candidate, baseline), a)


def outcome(cmp: PairedComparison, threshold: float, slower_significant: bool,
            faster_significant: bool) -> str:
    """One of :data:`OUTCOMES` (see the module docstring). Significance is decided by
    the caller, which knows how many tests share alpha (:func:`holm`)."""
    hi, lo = 1 + threshold, 1 / (1 + threshold)
    if slower_significant and cmp.ratio > hi:
        return SLOWER
    if faster_significant and cmp.ratio < lo:
        return FASTER
    if cmp.ci_low > lo and cmp.ci_high < hi:
        return EQUIVALENT
    if cmp.ci_high < hi:
        return NOT_SLOWER
    return UNDECIDED


def holm(p_values: Sequence[float], alpha: float,
         weights: Sequence[float] | None = None) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level
    ``alpha``. With ``weights`` (> 0), the weighted version: at each step the
    hypothesis with the smallest p / w is rejected if p <= alpha * w / (sum of the
    weights not yet rejected). Equal weights give plain Holm, which rejects at least
    what Bonferroni rejects, at the same error rate."""
    n = len(p_values)
    w = [1.0] * n if weights is None else [float(x) for x in weights]
    if len(w) != n or any(not x > 0 for x in w):
        raise ValueError("weights must be > 0, one per p-value")
    rejected = [False] * n
    left = sorted(range(n), key=lambda i: p_values[i] / w[i])
    remaining = math.fsum(w)
    for i in left:
        if p_values[i] <= alpha * w[i] / remaining:
            rejected[i] = True
            remaining -= w[i]
        else:
            break
    return rejected


def pooled_differences(differences: Mapping[str, Sequence[float]],
                       weights: Mapping[str, float]) -> list[float]:
    """Per round, the weighted mean of the scenarios' log ratios (weights normalized
    to sum 1), over the rounds every scenario has. Six scenarios that are all slower
    make one strong signal here, where each alone may be weak."""
    names = list(weights)
    if not names:
        raise ValueError("no scenarios to pool")
    total = math.fsum(weights.values())
    if not total > 0:
        raise ValueError("weights must sum to > 0")
    rounds = min(len(differences[n]) for n in names)
    if rounds == 0:
        raise ValueError("a scenario has no rounds")
    return [math.fsum(weights[n] * differences[n][i] for n in names) / total
            for i in range(rounds)]
