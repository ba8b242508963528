"""Literal known numbers for the paired statistics, change points and error rates.

Expected p-values were computed once with scipy 1.17.1 (scipy.stats.wilcoxon,
scipy.stats.binomtest(...).proportion_ci(method="exact")) and pasted here; the
Hodges-Lehmann bounds follow R's wilcox.test(conf.int=TRUE) rule (qsignrank(0.025, 12)
= 14: the 14th smallest and largest Walsh averages). This file does not import scipy.
"""

import math

import pytest

from patchgate.stats import (
    EQUIVALENT,
    FASTER,
    SLOWER,
    UNDECIDED,
    compare_differences,
    compare_paired,
    e_divisive,
    hodges_lehmann,
    holm,
    log_ratios,
    outcome,
    pooled_differences,
    rate,
    shift_interval,
    signed_rank,
)

# 12 paired log ratios of prefill_b1 from a committed CPU run (baselines/default, 2026-12-04)
D = [0.031, 0.051, -0.001, 0.035, 0.015, -0.026, -0.059, -0.160, 0.075, 0.022, 0.063, 0.018]


def test_signed_rank_exact_matches_scipy():
    r = signed_rank(D)
    assert (r.n, r.w_plus, r.method) == (12, 51.0, "exact")
    # scipy wilcoxon(D, alternative="greater" / "less", method="exact")
    assert r.p_greater == pytest.approx(0.190185546875, rel=1e-12)
    assert r.p_less == pytest.approx(0.830322265625, rel=1e-12)


def test_signed_rank_normal_with_ties_matches_scipy():
    big = [0.01 * ((i * 37) % 23 - 11) + 0.02 for i in range(70)]  # 3 zeros, many ties
    r = signed_rank(big)
    assert (r.n, r.method) == (67, "normal")
    # scipy wilcoxon(big, alternative="greater", method="approx", correction=True)
    assert r.p_greater == pytest.approx(0.0127324324029489, rel=1e-9)


def test_signed_rank_of_nothing_but_zeros_says_nothing():
    r = signed_rank([0.0, 0.0, 0.0])
    assert (r.n, r.p_greater, r.p_less) == (0, 1.0, 1.0)


def test_hodges_lehmann_interval_is_rs():
    loc = hodges_lehmann(D, 0.025)
    assert loc.estimate == pytest.approx(0.0175)
    assert (loc.low, loc.high) == (pytest.approx(-0.0425), pytest.approx(0.043))
    # the interval inverts the test: just inside the lower bound the one-sided p > a
    assert signed_rank([x - (loc.low + 1e-9) for x in D]).p_greater > 0.025
    assert signed_rank([x - (loc.low - 1e-9) for x in D]).p_greater <= 0.025


def test_too_few_rounds_give_an_unbounded_interval():
    loc = hodges_lehmann([0.1, 0.2, 0.3], 0.01)  # 2^-3 > 0.01: no bound exists
    assert loc.low == -math.inf and loc.high == math.inf
    assert compare_differences([0.1, 0.2, 0.3], 0.01).detectable == math.inf


def test_compare_paired_reads_ratios():
    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.2, 0.8, 1.0, 1.1, 0.9, 1.0]
    cmp = compare_paired([x * 1.1 * (1 + 0.001 * i) for i, x in enumerate(base)], base, 0.01)
    assert cmp.ratio == pytest.approx(1.1 * 1.0055, rel=1e-3)
    assert cmp.p_slower == pytest.approx(2**-12) and cmp.n == 12
    with pytest.raises(ValueError):
        log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        log_ratios([1.0], [0.0])


@pytest.mark.parametrize(("ratio", "low", "high", "slow_sig", "fast_sig", "expected"), [
    (1.08, 1.02, 1.12, True, False, SLOWER),       # significant and beyond 5 %
    (1.03, 1.01, 1.045, True, False, EQUIVALENT),  # significant, but within 5 % either way
    (1.08, 0.99, 1.20, False, False, UNDECIDED),    # beyond, not significant
    (1.00, 0.94, 1.06, False, False, UNDECIDED),    # the interval reaches past 5 %
    (1.00, 0.97, 1.03, False, False, EQUIVALENT),
    (0.90, 0.85, 0.94, False, True, FASTER),
])
def test_three_outcomes(ratio, low, high, slow_sig, fast_sig, expected):
    from patchgate.stats import PairedComparison

    cmp = PairedComparison(ratio, low, high, 0.5, 0.5, 12, 0.01, 0.05)
    assert outcome(cmp, 0.05, slow_sig, fast_sig) == expected


def test_holm_steps_down_and_weights_recycle_alpha():
    assert holm([0.01, 0.04, 0.03, 0.5], 0.05) == [True, False, False, False]
    assert holm([0.01, 0.012, 0.015, 0.04], 0.05) == [True] * 4  # <= .0125 .0167 .025 .05
    # the pooled item (weight 1/2) rejected first hands its share to a scenario (1/12)
    assert holm([0.001, 0.008], 0.05, [0.5, 1 / 12]) == [True, True]
    assert holm([0.2, 0.008], 0.05, [0.5, 1 / 12]) == [False, False]  # 0.008 > 0.05/7
    with pytest.raises(ValueError):
        holm([0.1], 0.05, [0.0])


def test_pooled_differences_weight_each_round():
    d = pooled_differences({"a": [0.1, 0.2, 0.3], "b": [0.0, 0.0]}, {"a": 3.0, "b": 1.0})
    assert d == [pytest.approx(0.075), pytest.approx(0.15)]  # the rounds both have


def test_shift_interval_unpaired():
    est, low, high = shift_interval([1.1, 1.2, 1.15, 1.12, 1.18], [1.0, 1.05, 0.98, 1.02,
                                                                  1.01], 0.025)
    assert est == pytest.approx(math.log(1.15 / 1.01), abs=0.02)
    assert 0 < low < est < high


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 20, 0.0, 0.168433),       # scipy binomtest(0, 20).proportion_ci("exact")
    (1, 20, 0.001265, 0.248733),
    (19, 20, 0.751267, 0.998735),
    (5, 12, 0.151652, 0.723330),
])
def test_clopper_pearson(k, n, low, high):
    r = rate(k, n)
    assert (r.low, r.high) == (pytest.approx(low, abs=1e-6), pytest.approx(high, abs=1e-6))
    assert r.rate == k / n
    with pytest.raises(ValueError):
        rate(3, 2)


def test_e_divisive_finds_a_step_and_nothing_in_noise():
    noise = [100.3, 99.6, 100.1, 99.8, 100.4, 99.9, 100.2, 99.7, 100.0, 100.1]
    step = noise + [92.2, 91.8, 92.5, 91.9, 92.1, 92.3, 91.7, 92.0]
    (cp,) = e_divisive(step)
    assert cp.index == 10 and cp.p_value <= 0.05
    assert cp.before == pytest.approx(100.01) and cp.after == pytest.approx(92.0625)
    assert e_divisive(noise) == []
    assert e_divisive(step) == e_divisive(step)  # seeded: the same answer every time
    # two shifts in a longer series: both found, in order
    two = step + [97.0, 96.8, 97.2, 96.9, 97.1, 97.0, 96.8, 97.3]
    assert [c.index for c in e_divisive(two)] == [10, 18]
