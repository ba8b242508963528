"""Standard errors and the t quantile of stats.core (the clock and off-clock checks'
statistics)."""

import math

import pytest

from patchgate.stats import mean_se, median_se, student_t_1e4


def test_median_se_is_the_normal_medians_error_from_the_mad():
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    # MAD 1 -> robust sd 1.4826; sqrt(pi/2) x 1.4826 / sqrt(5)
    assert median_se(xs) == pytest.approx(1.2533 * 1.4826 / math.sqrt(5), rel=1e-4)
    assert median_se([3.0, 3.0, 3.0, 100.0]) == 0.0  # one wild value moves it by a rank


def test_mean_se_and_a_single_value():
    assert mean_se([1.0, 3.0]) == (2.0, pytest.approx(1.0))
    m, se = mean_se([5.0])
    assert m == 5.0 and se == math.inf


def test_student_t_1e4_falls_to_the_normal_quantile():
    assert student_t_1e4(1) == pytest.approx(3183.1)
    assert student_t_1e4(7) == pytest.approx(7.063, abs=0.01)  # 8 rounds
    assert student_t_1e4(29) > student_t_1e4(30) == pytest.approx(3.719, abs=1e-3)
    with pytest.raises(ValueError):
        student_t_1e4(0)


def test_order_effect_finds_a_place_in_the_round_that_costs_time():
    """Rounds alternate which configuration goes first; the one timed second is 2 %
    slower: the effect is found, the mean left to the balanced order, and the spread
    without it is the noise left."""
    from patchgate.stats import order_effect

    noise = [0.1, -0.2, 0.0, 0.15, -0.05, 0.1, -0.1, 0.0]
    # A second (odd places) is 2 % slower, A first its rival 2 % slower
    diffs = [x + (2.0 if i % 2 else -2.0) for i, x in enumerate(noise)]
    effect, sd, sd_without = order_effect(diffs)
    assert effect == pytest.approx(2.0 + (sum(noise[1::2]) - sum(noise[0::2])) / 8)
    assert sd > 2.0 and sd_without < 0.2
    assert order_effect(noise)[0] == pytest.approx(0.0125)  # none planted: noise only
    with pytest.raises(ValueError, match="at least 5"):
        order_effect([1.0, 2.0, 3.0, 4.0])
