"""The sequential accuracy guard (patchgate.stats.sequential).

The suite below mimics the default one: 6 tasks x 100 items, 577 right (task accuracies
1, .92, .85, 1, 1, 1), built in place so the test needs no stored file. Literal counts
(items evaluated at seed 0) were computed once with this module and pasted; the
properties (coverage, exact end rule, error rates) are what can fail.
"""

import math
import random

import pytest

from patchgate.stats.sequential import (
    CONTINUE,
    PASS,
    REJECT,
    STOPPED_ABOVE,
    STOPPED_ALL,
    STOPPED_BELOW,
    SequentialGuard,
    SequentialSettings,
)
from patchgate.stats.sequential_sim import (
    disagreement,
    flipped_to_ratio,
    least_fraction,
    sequential_test,
)
from patchgate.stats.strata import (
    full_set_decision,
    full_set_ratio,
    pooled_weights,
    stratified_order,
    task_mean_weights,
    task_sequence,
)

SUITE = tuple(tuple(1.0 if i < k else 0.0 for i in range(100))
              for k in (100, 92, 85, 100, 100, 100))


def true_d(reference, candidate, weights, theta=0.99):
    return math.fsum(W * math.fsum(c - theta * r for r, c in zip(rr, cc, strict=True)) / len(rr)
                     for W, rr, cc in zip(weights, reference, candidate, strict=True))


# --- the order ---------------------------------------------------------------------------


def test_task_sequence_interleaves_in_proportion():
    assert task_sequence([3, 2]) == (0, 1, 0, 1, 0)
    assert task_sequence([4, 2, 1]) == (0, 1, 0, 2, 0, 1, 0)
    sizes = [100, 60, 37, 5]
    counts, n = [0] * 4, sum(sizes)
    for p, t in enumerate(task_sequence(sizes), 1):
        counts[t] += 1
        for u, size in enumerate(sizes):
            assert abs(counts[u] - p * size / n) <= 0.5 + 4 * size / (2 * n)


def test_stratified_order_is_a_seeded_permutation_within_each_task():
    order = stratified_order([3, 2], seed=1)
    assert order == ((0, 1), (1, 0), (0, 2), (1, 1), (0, 0))
    assert stratified_order([3, 2], seed=1) == order
    big = stratified_order([50, 30], seed=7)
    assert sorted(big) == [(0, i) for i in range(50)] + [(1, i) for i in range(30)]
    assert tuple(t for t, _ in big) == task_sequence([50, 30])
    assert big != stratified_order([50, 30], seed=8)
    # each task's first item is uniform over its items: over 600 seeds, every one of 3
    # items comes first about 200 times
    firsts = [stratified_order([3, 1], seed=s)[0][1] for s in range(600)]
    assert all(150 < firsts.count(i) < 250 for i in range(3))


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        task_sequence([3, 0])
    with pytest.raises(ValueError):
        SequentialGuard([3, 2], task_weights=[0.7, 0.7])
    with pytest.raises(ValueError):
        SequentialSettings(delta=0)
    guard = SequentialGuard([2])
    with pytest.raises(ValueError):
        guard.add([1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        guard.add([1.0] * 3, [1.0] * 3)


# --- the full-set rule and the end of the run --------------------------------------------


def test_full_set_rule_is_exact_at_a_tie():
    # 495 of 600 against 500 of 600 is a ratio of exactly 0.99: it passes, although the
    # float ratio of means is 0.98999999...
    ref, cand = [[1.0] * 500 + [0.0] * 100], [[1.0] * 495 + [0.0] * 105]
    assert (495 / 600) / (500 / 600) < 0.99
    assert full_set_decision(ref, cand) == PASS
    assert full_set_decision(ref, [[1.0] * 494 + [0.0] * 106]) == REJECT
    # per task: (1 + 0) / (0.5 + 1); pooled: 2 of 3 right against 2 of 3
    assert full_set_ratio([[1.0, 0.0], [1.0]], [[1.0, 1.0], [0.0]]) == pytest.approx(2 / 3)
    assert full_set_ratio([[1.0, 0.0], [1.0]], [[1.0, 1.0], [0.0]], [2 / 3, 1 / 3]) == 1.0


@pytest.mark.parametrize("right, decision", [(99, PASS), (98, REJECT)])
def test_last_item_decides_by_the_exact_rule(right, decision):
    # a 1 % margin on 100 items can only be settled by the last item
    ref, cand = [[1.0] * 100], [[1.0] * right + [0.0] * (100 - right)]
    res = sequential_test(ref, cand, settings=SequentialSettings(delta=1e-6))
    assert (res.decision, res.stopped, res.items_evaluated) == (decision, STOPPED_ALL, 100)
    assert res.low == res.high == pytest.approx(true_d(ref, cand, [1.0]))


def test_guard_refuses_items_after_it_stops():
    broken = flipped_to_ratio(SUITE, 0.5, seed=0)
    guard = SequentialGuard([100] * 6)
    order = stratified_order([100] * 6, seed=0)
    for start in range(0, 600, 16):
        chunk = order[start:start + 16]
        if guard.add([SUITE[t][i] for t, i in chunk], [broken[t][i] for t, i in chunk]) != CONTINUE:
            break
    assert guard.decision == REJECT
    with pytest.raises(ValueError, match="stopped"):
        guard.add([1.0], [1.0])


# --- the confidence sequence -------------------------------------------------------------


@pytest.mark.parametrize("case", ["suite-0.97", "unequal-pooled-noisy", "fractional"])
def test_interval_contains_the_true_difference_at_every_look(case):
    if case == "suite-0.97":
        ref, weights = SUITE, task_mean_weights([100] * 6)
        cand = flipped_to_ratio(ref, 0.97, seed=1)
    elif case == "unequal-pooled-noisy":
        ref = [row[:n] for row, n in zip(SUITE, (100, 60, 100, 40, 90, 30), strict=True)]
        weights = pooled_weights([len(r) for r in ref])
        cand = flipped_to_ratio(ref, 0.985, seed=2, task_weights=weights, noise=5)
    else:
        rng = random.Random(3)
        ref = [[rng.random() for _ in range(n)] for n in (40, 25, 60)]
        cand = [[min(1.0, max(0.0, x + rng.uniform(-0.2, 0.15))) for x in r] for r in ref]
        weights = task_mean_weights([40, 25, 60])
    sizes = [len(r) for r in ref]
    d = true_d(ref, cand, weights)
    for seed in range(2):
        guard = SequentialGuard(sizes, weights, SequentialSettings(delta=0.05))
        order = stratified_order(sizes, seed)
        looks = 0
        for start in range(0, len(order), 16):
            chunk = order[start:start + 16]
            guard.add([ref[t][i] for t, i in chunk], [cand[t][i] for t, i in chunk])
            res = guard.result()
            assert res.low - 1e-12 <= d <= res.high + 1e-12
            looks += 1
            if res.decision != CONTINUE:
                break
        assert looks >= 3


def test_identical_candidate_passes_early_and_the_ratio_interval_follows():
    res = sequential_test(SUITE, SUITE, seed=0, reference_mean=577 / 600)
    assert (res.decision, res.stopped) == (PASS, STOPPED_ABOVE)
    # looks at 16, 32, 48, 64, ..., 309, 387: 65 % of 600; no valid guard averages below 54 %
    assert res.items_evaluated == 387
    assert res.low >= 0
    assert res.ratio_low == pytest.approx(0.99 + res.low / (577 / 600))
    assert res.ratio_high == pytest.approx(0.99 + res.high / (577 / 600))
    assert res.ratio_low >= 0.99 and res.ratio_high < 1.02
    assert res.reference_exact and res.ratio_estimate == pytest.approx(1.0, abs=1e-3)


def test_broken_candidate_is_rejected_within_a_few_blocks():
    broken = flipped_to_ratio(SUITE, 0.80, seed=0)
    assert sum(map(sum, broken)) == 462
    res = sequential_test(SUITE, broken, seed=0)
    assert (res.decision, res.stopped) == (REJECT, STOPPED_BELOW)
    assert res.items_evaluated <= 108  # the fifth look
    fixed = sequential_test(SUITE, broken, seed=0, settings=SequentialSettings(growth=1))
    assert fixed.decision == REJECT and fixed.items_evaluated <= 96
    assert res.high < 0 and res.ratio_high < 0.99


def test_task_mean_and_pooled_weights_decide_their_own_rule():
    # task 0: 20 items all right in both; task 1: 200 items, the candidate loses 4 %.
    # Pooled, the loss is diluted to 0.96 * 200 / 220 ...; per task, it halves.
    ref = [[1.0] * 20, [1.0] * 200]
    cand = [[1.0] * 20, [1.0] * 192 + [0.0] * 8]
    pooled = pooled_weights([20, 200])
    assert full_set_ratio(ref, cand, pooled) == pytest.approx(212 / 220)
    assert full_set_ratio(ref, cand) == pytest.approx((1 + 0.96) / 2)
    assert full_set_decision(ref, cand, pooled) == REJECT
    for weights in (pooled, None):
        res = sequential_test(ref, cand, weights, seed=0, settings=SequentialSettings(delta=1e-6))
        assert res.decision == REJECT


# --- building candidates and measuring error rates ---------------------------------------


def test_flips_reach_the_target_ratio():
    cand = flipped_to_ratio(SUITE, 0.97, seed=0)
    assert sum(map(sum, cand)) == 560  # 17 right -> wrong: 560 / 577 = 0.9705
    pairs = [(r, c) for rr, cc in zip(SUITE, cand, strict=True)
             for r, c in zip(rr, cc, strict=True)]
    assert all(c <= r for r, c in pairs)
    up = flipped_to_ratio(SUITE, 1.01, seed=0)
    assert sum(map(sum, up)) == 583  # 6 wrong -> right
    noisy = flipped_to_ratio(SUITE, 1.0, seed=0, noise=7)
    pairs = [(r, c) for rr, cc in zip(SUITE, noisy, strict=True)
             for r, c in zip(rr, cc, strict=True)]
    assert sum(r > c for r, c in pairs) == 7 and sum(r < c for r, c in pairs) == 7
    assert flipped_to_ratio(SUITE, 0.97, seed=0) == cand
    with pytest.raises(ValueError):
        flipped_to_ratio(SUITE, 1.2, seed=0)  # 23 wrong items can add at most 4 %


def test_least_fraction():
    assert least_fraction(6) == pytest.approx(0.535841, abs=1e-6)
    assert least_fraction(12) == pytest.approx(0.318708, abs=1e-6)
    assert least_fraction(1, delta=0.05) == pytest.approx(0.95)


def test_small_error_rate_simulation():
    broken = disagreement(SUITE, flipped_to_ratio(SUITE, 0.80, seed=1), orders=40, seed=1)
    assert broken.full_decision == REJECT
    assert broken.wrong.k == 0 and broken.rejected == 40
    assert broken.mean_fraction < 0.2
    for target in (0.97, 1.01):
        run = disagreement(SUITE, flipped_to_ratio(SUITE, target, seed=1), orders=40, seed=1)
        assert run.wrong.k <= 1  # a 1 % rule: 0 or 1 of 40
        assert run.to_end == 0 and run.mean_fraction < 0.7
    # just below the limit (571 vs 571.23 right): nearly every order runs to the end, and
    # the exact rule then decides
    edge = disagreement(SUITE, flipped_to_ratio(SUITE, 0.99, seed=1), orders=20, seed=1)
    assert edge.full_decision == REJECT and edge.wrong.k <= 1 and edge.to_end >= 18


def test_error_rate_stays_under_delta_at_the_limit_on_a_small_population():
    # 60 items, 50 right; the candidate swaps 2 right and 2 wrong items and loses one more,
    # a ratio of 0.98 (just under the limit); looks after every item, delta = 0.05. Wrong
    # early passes come out at 1.5 %; a guard whose threshold were sqrt(1 / delta) instead
    # of 1 / delta makes 8.5 % of them and fails here.
    ref = [[1.0] * 50 + [0.0] * 10]
    cand = flipped_to_ratio(ref, 0.99 - 1e-9, seed=4, noise=2)
    settings = SequentialSettings(delta=0.05, block=1)
    run = disagreement(ref, cand, orders=400, seed=4, settings=settings)
    assert run.full_decision == REJECT and run.ratio == pytest.approx(0.98)
    assert run.wrong.rate <= 0.05
