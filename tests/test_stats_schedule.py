"""When the sequential guard looks next (patchgate.stats.schedule): looks that cannot
decide are skipped, the error rate is unchanged, and fewer looks are taken near the
limit. The suite mimics the default one (6 x 100 items, 577 right), built in place."""

import pytest

from patchgate.stats.schedule import next_point, predicted_half_width, worth_a_look
from patchgate.stats.sequential import REJECT, SequentialSettings
from patchgate.stats.sequential_sim import disagreement, flipped_to_ratio

SUITE = tuple(tuple(1.0 if i < k else 0.0 for i in range(100))
              for k in (100, 92, 85, 100, 100, 100))
GATE = SequentialSettings(block=96, growth=1.25)  # the gate's looks: 96, 192, ..., 600
SKIP = SequentialSettings(block=96, growth=1.25, skip_margin=0.25)  # as the gate skips


def test_half_width_shrinks_as_a_mean_sampled_without_replacement():
    assert predicted_half_width(0.1, 100, 100, 600) == pytest.approx(0.1)
    # sqrt((1/400 - 1/600) / (1/100 - 1/600)) = 0.31623
    assert predicted_half_width(0.1, 100, 400, 600) == pytest.approx(0.031623, abs=1e-6)
    assert predicted_half_width(0.1, 100, 600, 600) == 0.0


def test_a_look_is_worth_taking_only_where_the_interval_could_clear_the_limit():
    # centred on 0: no look but the last can decide
    assert not worth_a_look(-0.05, 0.05, 96, 480, 600)
    assert worth_a_look(-0.05, 0.05, 96, 600, 600)
    # centred well above: the very next look may decide
    assert worth_a_look(-0.01, 0.09, 96, 192, 600)
    # a margin of 0 looks everywhere
    assert worth_a_look(-0.05, 0.05, 96, 192, 600, margin=0.0)
    points = [96, 192, 288, 384, 480, 600]
    assert next_point(points, 192, -0.05, 0.05, 96) == 600
    assert next_point(points, 192, -0.01, 0.09, 96) == 192
    # centre 0.01, half-width 0.05 after 96: 0.5 x h(n') <= 0.01 needs n' >= 326 (384);
    # the default margin (0.25) looks sooner: h(n') <= 0.04 at n' >= 114 (192)
    assert next_point(points, 192, -0.04, 0.06, 96, margin=0.5) == 384
    assert next_point(points, 192, -0.04, 0.06, 96) == 192


@pytest.mark.parametrize("target", [0.80, 0.97, 0.99, 1.00])
def test_skipping_keeps_decisions_and_shares_and_cuts_looks_near_the_limit(target):
    cand = flipped_to_ratio(SUITE, target, seed=1)
    every = disagreement(SUITE, cand, orders=40, seed=3, settings=GATE)
    skip = disagreement(SUITE, cand, orders=40, seed=3, settings=SKIP)
    assert skip.wrong.k == every.wrong.k == 0
    assert skip.mean_fraction <= every.mean_fraction + 0.03
    assert skip.mean_looks <= every.mean_looks
    if target == 0.99:  # runs to the end either way, in fewer looks
        assert every.full_decision == REJECT and skip.to_end == every.to_end == 40
        assert skip.mean_looks <= every.mean_looks - 1
