"""Literal known numbers for patchgate.stats.

Expected values were computed once with scipy 1.17.1 (scipy.stats.mannwhitneyu,
scipy.stats.binomtest, scipy.stats.norm.ppf, scipy.stats.gmean) and pasted here;
this file does not import scipy.
"""

import math

import pytest

from patchgate.stats import (
    AccuracyComparison,
    LatencyComparison,
    bootstrap_ratio_ci,
    compare_accuracy,
    compare_latency,
    correctness_coefficient,
    geometric_mean,
    mann_whitney,
    mcnemar_exact,
    median,
    minimum_detectable_change,
    relative_spread,
    score,
    speed_score,
)

# 12 baseline latencies (ms) around 10 with ~2 % noise.
BASE = [10.0, 10.2, 9.9, 10.1, 10.3, 9.8, 10.0, 10.4, 9.7, 10.1, 10.2, 9.9]


# --- basics ----------------------------------------------------------------------------


def test_median_and_geometric_mean():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert geometric_mean([1.0, 2.0, 4.0]) == pytest.approx(2.0)  # scipy gmean: 2.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: median([]),
        lambda: geometric_mean([]),
        lambda: geometric_mean([1.0, 0.0]),
        lambda: geometric_mean([1.0, -2.0]),
        lambda: mann_whitney([], [1.0]),
        lambda: bootstrap_ratio_ci([1.0], [0.0]),
        lambda: bootstrap_ratio_ci([1.0], [1.0], confidence=1.0),
        lambda: relative_spread([0.0, 0.0, 1.0]),
        lambda: mcnemar_exact(-1, 2),
        lambda: compare_accuracy([1, 0], [1]),
        lambda: compare_accuracy([], []),
        lambda: speed_score([1.0, 2.0], [1.0]),
        lambda: speed_score([1.0], [0.0]),
        lambda: speed_score([], []),
    ],
)
def test_value_errors(call):
    with pytest.raises(ValueError):
        call()


# --- Mann-Whitney ----------------------------------------------------------------------


def test_mann_whitney_exact_matches_scipy():
    a, b = [1.1, 2.3, 3.5, 4.2, 5.9], [2.0, 4.0, 6.1, 7.3, 8.8, 9.4]
    # scipy mannwhitneyu(a, b, method='exact'): statistic 6.0, pvalue 0.12554112554112554
    r = mann_whitney(a, b)
    assert (r.u, r.method) == (6.0, "exact")
    assert r.p_value == pytest.approx(0.12554112554112554, rel=1e-12)
    # swapping the samples: U for the other side (scipy: 24.0), same p
    r = mann_whitney(b, a)
    assert r.u == 24.0
    assert r.p_value == pytest.approx(0.12554112554112554, rel=1e-12)


def test_mann_whitney_exact_separated():
    # scipy mannwhitneyu(..., method='exact'): pvalue 0.015873015873015872 (= 2/126)
    r = mann_whitney([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0])
    assert r.u == 0.0
    assert r.p_value == pytest.approx(0.015873015873015872, rel=1e-12)


def test_mann_whitney_normal_with_ties_matches_scipy():
    a, b = [1, 2, 2, 3, 4, 5, 5, 6], [3, 4, 4, 5, 6, 7, 7, 8, 9]
    # scipy mannwhitneyu(a, b, method='asymptotic'): statistic 14.0, pvalue 0.03714012623439529
    r = mann_whitney(a, b)
    assert (r.u, r.method) == (14.0, "normal")
    assert r.p_value == pytest.approx(0.03714012623439529, rel=1e-9)


def test_mann_whitney_normal_large_no_ties_matches_scipy():
    a = [float(i) for i in range(30)]
    b = [i + 3.5 for i in range(30)]
    # scipy mannwhitneyu(a, b, method='asymptotic'): statistic 351.0, pvalue 0.14531912724086543
    r = mann_whitney(a, b)
    assert (r.u, r.method) == (351.0, "normal")
    assert r.p_value == pytest.approx(0.14531912724086543, rel=1e-9)


def test_mann_whitney_identical_samples():
    assert mann_whitney(BASE, BASE).p_value == 1.0
    assert mann_whitney([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).p_value == 1.0
    assert mann_whitney([5.0] * 4, [5.0] * 6).p_value == 1.0  # every value tied
    assert mann_whitney([1.0], [2.0]).p_value == 1.0


# --- latency ---------------------------------------------------------------------------


def test_bootstrap_is_deterministic_and_brackets_ratio():
    cand = [x * 1.1 for x in BASE]
    first = bootstrap_ratio_ci(cand, BASE, seed=7)
    assert first == bootstrap_ratio_ci(cand, BASE, seed=7)
    assert first.low <= first.ratio <= first.high
    assert first.ratio == pytest.approx(1.1)
    assert first.confidence == 0.95


def test_relative_spread_and_detectable_change():
    xs = [8.0, 9.0, 10.0, 11.0, 12.0]  # median 10, MAD 1
    assert relative_spread(xs) == pytest.approx(0.14826)
    assert relative_spread([5.0]) == 0.0
    # (norm.ppf(0.975) + norm.ppf(0.8)) * sqrt(pi/2) * sqrt(2 * 0.14826**2 / 5)
    assert minimum_detectable_change(xs, xs) == pytest.approx(0.3292439226338107, rel=1e-9)
    assert minimum_detectable_change([1.0], xs) == math.inf


def test_compare_latency_clearly_slower():
    r = compare_latency([x * 1.2 for x in BASE], BASE)
    assert isinstance(r, LatencyComparison)
    assert r.ratio == pytest.approx(1.2)
    assert (r.mark, r.significant, r.regressed, r.improved) == ("+", True, True, False)
    assert r.ci_low > 1.05 and r.p_value < 0.001
    assert 0 < r.detectable < 0.05


def test_compare_latency_clearly_faster():
    r = compare_latency([x * 0.8 for x in BASE], BASE)
    assert r.ratio == pytest.approx(0.8)
    assert (r.mark, r.significant, r.regressed, r.improved) == ("-", True, False, True)
    assert r.ci_high < 1.0


def test_compare_latency_large_but_noisy():
    baseline = [8.0, 12.0, 10.0, 14.0, 9.0]
    candidate = [9.0, 13.0, 11.0, 15.0, 10.5]
    r = compare_latency(candidate, baseline)
    assert r.ratio == pytest.approx(1.1)
    assert (r.mark, r.significant, r.regressed) == ("~", False, False)
    assert r.ci_low < 1.0 < r.ci_high
    assert r.detectable > 0.05  # the run could not have seen a 5 % change


def test_compare_latency_equal():
    r = compare_latency(BASE, BASE)
    assert r.ratio == 1.0 and r.p_value == 1.0
    assert (r.mark, r.significant, r.regressed, r.improved) == (" ", False, False, False)


def test_compare_latency_is_deterministic():
    cand = [x * 1.03 for x in BASE]
    assert compare_latency(cand, BASE, seed=3) == compare_latency(cand, BASE, seed=3)


# --- accuracy --------------------------------------------------------------------------


def test_mcnemar_exact():
    assert mcnemar_exact(10, 2) == pytest.approx(0.03857421875)  # scipy binomtest(2, 12)
    assert mcnemar_exact(2, 10) == pytest.approx(0.03857421875)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)  # scipy binomtest(1, 7)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_compare_accuracy_paired():
    ref = [1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0]
    cand = [1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0]
    r = compare_accuracy(ref, cand)
    assert isinstance(r, AccuracyComparison)
    assert (r.n, r.flipped_to_wrong, r.flipped_to_right) == (20, 3, 1)
    assert r.reference == pytest.approx(0.8) and r.candidate == pytest.approx(0.7)
    assert r.ratio == pytest.approx(0.875)
    assert r.ci_low <= r.ratio <= r.ci_high
    assert r.p_value == pytest.approx(0.625)  # scipy binomtest(1, 4)
    assert r == compare_accuracy(ref, cand)  # fixed seed: same CI


def test_compare_accuracy_fractional_and_zero():
    r = compare_accuracy([0.9, 0.2, 0.6], [0.4, 0.7, 0.6])
    assert (r.flipped_to_wrong, r.flipped_to_right) == (1, 1)
    assert compare_accuracy([0, 0], [0, 0]).ratio == 1.0
    assert compare_accuracy([0, 0], [1, 0]).ratio == math.inf


# --- scoring ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ratio, expected", [(0.96, 0.0), (0.97, 0.0), (0.98, 0.5), (0.99, 1.0), (1.0, 1.0)]
)
def test_correctness_coefficient(ratio, expected):
    assert correctness_coefficient(ratio) == pytest.approx(expected)


def test_score():
    assert score(100.0, 200.0, 300.0, 1.0) == pytest.approx(190.0)
    assert score(100.0, 200.0, 300.0, 0.5) == pytest.approx(95.0)
    assert score(100.0, 200.0, 300.0, 0.0) == 0.0


def test_speed_score():
    assert speed_score([2.0, 8.0], [1.0, 4.0]) == pytest.approx(200.0)
    assert speed_score([1.0, 1.0], [2.0, 0.5]) == pytest.approx(100.0)
    # 100 * scipy gmean([2/1, 9/4]) = 212.1320343559643
    assert speed_score([2.0, 9.0], [1.0, 4.0]) == pytest.approx(212.1320343559643)
