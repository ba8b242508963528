"""How often the sequential guard's early decision differs from the full-set one: a
simulation over seeded random orders of paired per-item vectors whose full-set ratio is
known (:func:`flipped_to_ratio` builds them from a stored reference with controlled
flips), and the least share of items any valid guard must evaluate
(:func:`least_fraction`).

Pure: lists in, frozen dataclasses out; no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .rates import Rate, rate
from .schedule import next_point
from .sequential import (
    CONTINUE,
    PASS,
    STOPPED_ALL,
    SequentialGuard,
    SequentialResult,
    SequentialSettings,
    looks,
)
from .strata import (
    _check_paired,
    _check_sizes,
    full_set_decision,
    full_set_ratio,
    stratified_order,
    task_mean_weights,
)


def sequential_test(
    reference: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    task_weights: Sequence[float] | None = None,
    seed: int = 0,
    settings: SequentialSettings = SequentialSettings(),
    reference_mean: float | None = None,
) -> SequentialResult:
    """Run the guard on per-task paired scores (``reference[t][i]``, ``candidate[t][i]``)
    in the order of ``stratified_order(sizes, seed)``, look by look (:func:`looks`, as
    the gate looks), until it stops."""
    sizes = _check_paired(reference, candidate)
    guard = SequentialGuard(sizes, task_weights, settings)
    _play(guard, reference, candidate, stratified_order(sizes, seed), settings)
    return guard.result(reference_mean)


def _play(guard, reference, candidate, order, settings) -> int:
    """Feed ``guard`` the order look by look (:func:`looks`); with ``skip_margin`` > 0, a
    look that cannot plausibly decide is skipped as the gate skips it
    (:func:`patchgate.stats.schedule.next_point`). Returns the number of looks."""
    points, done, count = looks(len(order), settings), 0, 0
    n = points[0]
    while True:
        chunk, done, count = order[done:n], n, count + 1
        if guard.add([reference[t][i] for t, i in chunk],
                     [candidate[t][i] for t, i in chunk]) != CONTINUE:
            return count
        n = next(p for p in points if p > done)
        if settings.skip_margin > 0:
            now = guard.result()
            n = next_point(points, n, now.low, now.high, done, settings.skip_margin)


def flipped_to_ratio(
    reference: Sequence[Sequence[float]],
    target: float,
    seed: int = 0,
    task_weights: Sequence[float] | None = None,
    noise: int = 0,
) -> tuple[tuple[float, ...], ...]:
    """A candidate whose full-set ratio to ``reference`` is as close to ``target`` as
    single flips allow: start from the reference's own scores; flip ``noise`` items
    wrong -> right and ``noise`` right -> wrong (a noisy but unbiased change, e.g. FP8's 7
    and 8 of 600); then flip further right -> wrong (target below) or wrong -> right
    (target above) items one at a time, in a ``random.Random(seed)`` order, and keep the
    count that lands closest. An item is right when its score is >= 0.5."""
    sizes = _check_sizes([len(x) for x in reference])
    weights = task_mean_weights(sizes) if task_weights is None else task_weights
    rng = random.Random(seed)
    cand = [list(map(float, r)) for r in reference]
    right = [(t, i) for t, r in enumerate(reference) for i, x in enumerate(r) if x >= 0.5]
    wrong = [(t, i) for t, r in enumerate(reference) for i, x in enumerate(r) if x < 0.5]
    rng.shuffle(right)
    rng.shuffle(wrong)
    if noise > min(len(right), len(wrong)):
        raise ValueError(f"noise {noise} needs that many right and wrong items")
    for (t, i), (u, k) in zip(right[:noise], wrong[:noise], strict=True):
        cand[t][i], cand[u][k] = 0.0, 1.0
    a_r = math.fsum(W * math.fsum(r) / n for W, r, n in zip(weights, reference, sizes, strict=True))
    if a_r <= 0:
        raise ValueError("the reference has no right item; no ratio to aim at")
    a_c = math.fsum(W * math.fsum(c) / n for W, c, n in zip(weights, cand, sizes, strict=True))
    ratio = a_c / a_r
    down = target < ratio
    pool, value = (right, 0.0) if down else (wrong, 1.0)
    ratios = [ratio]  # after 0, 1, 2, ... further flips
    for t, i in pool[noise:]:
        ratios.append(ratios[-1] + (value - cand[t][i]) * weights[t] / sizes[t] / a_r)
        if (ratios[-1] <= target) if down else (ratios[-1] >= target):
            break
    else:
        if len(ratios) > 1 or ratio != target:
            raise ValueError(f"cannot reach ratio {target} by flips")
    keep = min(range(len(ratios)), key=lambda k: abs(ratios[k] - target))
    for t, i in pool[noise:noise + keep]:
        cand[t][i] = value
    return tuple(tuple(c) for c in cand)


@dataclass(frozen=True)
class Disagreement:
    """The guard run over ``orders`` seeded orders of the same paired scores.

    ``wrong``: how often the decision differs from the full-set one (``full_decision``,
    at full-set ``ratio``), with its exact 95 % interval; 0 of 200 reads as "at most
    1.8 %". ``mean_fraction``: the mean share of the items evaluated; ``max_fraction``:
    the largest. ``passed``, ``rejected``: early stops of each kind; ``to_end``: runs that
    evaluated every item (their decision is the full-set one by construction).
    """

    ratio: float
    full_decision: str
    orders: int
    wrong: Rate
    mean_fraction: float
    max_fraction: float
    passed: int
    rejected: int
    to_end: int
    mean_looks: float = 0.0


def disagreement(
    reference: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    task_weights: Sequence[float] | None = None,
    orders: int = 200,
    seed: int = 0,
    settings: SequentialSettings = SequentialSettings(),
) -> Disagreement:
    """Run the guard over ``orders`` orders (seeds drawn from ``random.Random(seed)``) of
    per-task paired scores whose full-set verdict is known, and count how often the early
    decision differs from it."""
    sizes = _check_paired(reference, candidate)
    full = full_set_decision(reference, candidate, task_weights, settings.theta)
    rng = random.Random(seed)
    wrong = passed = rejected = to_end = 0
    fractions, looked = [], []
    for _ in range(orders):
        guard = SequentialGuard(sizes, task_weights, settings)
        looked.append(_play(guard, reference, candidate,
                            stratified_order(sizes, rng.getrandbits(64)), settings))
        wrong += guard.decision != full
        fractions.append(guard.seen / guard.total)
        if guard.stopped == STOPPED_ALL:
            to_end += 1
        elif guard.decision == PASS:
            passed += 1
        else:
            rejected += 1
    return Disagreement(
        ratio=full_set_ratio(reference, candidate, task_weights), full_decision=full,
        orders=orders, wrong=rate(wrong, orders), mean_fraction=math.fsum(fractions) / orders,
        max_fraction=max(fractions), passed=passed, rejected=rejected, to_end=to_end,
        mean_looks=math.fsum(looked) / orders)


def least_fraction(changes: int, delta: float = 0.01) -> float:
    """About the smallest mean share of the items that ANY guard valid at ``delta`` can
    evaluate, when changing ``changes`` items would reverse the full-set verdict:
    1 - delta^(1 / changes).

    Why: change that many items, picked at random, to build a population with the other
    verdict. Until the guard meets one of them it sees the same data under both, so its
    early decision on the first is, with probability about E[(1 - f)^changes] >=
    (1 - E f)^changes, an error on the second; validity caps that at delta. With equal
    item weights each changed item moves N D by exactly 1, so changes = floor(N D) + 1
    above the limit and ceil(-N D) below it."""
    if changes < 1:
        raise ValueError(f"changes must be >= 1, got {changes}")
    return 1 - delta ** (1 / changes)
