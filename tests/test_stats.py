"""Literal known numbers for patchgate.stats.

Expected values were computed once with scipy 1.17.1 (scipy.stats.mannwhitneyu,
scipy.stats.binomtest, scipy.stats.norm.ppf, scipy.stats.gmean) and pasted here;
this file does not import scipy.
"""

import math

import pytest

from patchgate.stats import (
    AccuracyComparison,
    compare_accuracy,
    correctness_coefficient,
    geometric_mean,
    mcnemar_exact,
    median,
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
