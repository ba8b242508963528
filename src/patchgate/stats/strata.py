"""Strata of an accuracy guard: the tasks, their weights, a seeded stratified order of
their items, and the exact full-set rule the sequential guard predicts.

Items i in T tasks, reference score r_i and candidate score c_i in [0, 1], item weight
w_i = W_t / N_t (task t has N_t items; the task weights W_t sum to 1): ``pooled_weights``
is today's mean over the items, ``task_mean_weights`` the mean over the tasks. The full
set passes iff R = sum w c / sum w r >= theta, decided exactly (:func:`full_set_decision`:
fractions, so a tie at the limit passes).

Pure: lists in, tuples and strings out; no I/O. Orders come from ``random.Random(seed)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction

PASS, REJECT = "pass", "reject"


def pooled_weights(task_sizes: Sequence[int]) -> tuple[float, ...]:
    """Task weights W_t = N_t / N: every item counts the same (the mean over items)."""
    n = sum(task_sizes)
    return tuple(s / n for s in task_sizes)


def task_mean_weights(task_sizes: Sequence[int]) -> tuple[float, ...]:
    """Task weights W_t = 1 / T: every task counts the same (the mean over tasks)."""
    return tuple(1 / len(task_sizes) for _ in task_sizes)


def _check_sizes(task_sizes: Sequence[int]) -> list[int]:
    sizes = list(task_sizes)
    if not sizes or any(not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"task sizes must be integers >= 1, got {sizes}")
    return sizes


def task_sequence(task_sizes: Sequence[int]) -> tuple[int, ...]:
    """The task of each position of the order: item k of task t sits at (k + 1/2) / N_t,
    ties to the lower task. After any prefix of p items, task t has had p N_t / N items
    within 1/2 + T N_t / (2 N) (within one when the tasks are the same size). The same
    for every seed, so the rounds and bets' alignment are too."""
    sizes = _check_sizes(task_sizes)
    keys = sorted(((k + 0.5) / n, t) for t, n in enumerate(sizes) for k in range(n))
    return tuple(t for _, t in keys)


def stratified_order(task_sizes: Sequence[int], seed: int) -> tuple[tuple[int, int], ...]:
    """A seeded order of ``(task, index)`` pairs: the tasks interleaved by
    :func:`task_sequence`, each task's items in a uniformly random permutation
    (``random.Random(seed)``, tasks shuffled in turn). Deterministic in ``seed``."""
    sizes = _check_sizes(task_sizes)
    rng = random.Random(seed)
    perms = []
    for n in sizes:
        p = list(range(n))
        rng.shuffle(p)
        perms.append(p)
    seen = [0] * len(sizes)
    order = []
    for t in task_sequence(sizes):
        order.append((t, perms[t][seen[t]]))
        seen[t] += 1
    return tuple(order)


def _check_paired(reference: Sequence[Sequence[float]],
                  candidate: Sequence[Sequence[float]]) -> tuple[int, ...]:
    sizes = tuple(len(x) for x in reference)
    if sizes != tuple(len(x) for x in candidate):
        raise ValueError("reference and candidate differ in their tasks' sizes")
    _check_sizes(sizes)
    return sizes


def full_set_decision(reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]],
                      task_weights: Sequence[float] | None = None, theta: float = 0.99) -> str:
    """The full-set rule in exact arithmetic: ``pass`` iff sum w c >= theta sum w r (a tie
    passes), with theta taken as the decimal it is written as (0.99 = 99/100). A float
    ratio can land one ulp below the limit at a tie (495/600 over 500/600 gives
    0.98999...), which this rule does not."""
    sizes = _check_paired(reference, candidate)
    weights = task_mean_weights(sizes) if task_weights is None else task_weights
    th = Fraction(repr(theta))
    pairs = zip(weights, reference, candidate, strict=True)
    lhs = sum(Fraction(W) * sum(map(Fraction, c)) / len(c) for W, _, c in pairs)
    pairs = zip(weights, reference, candidate, strict=True)
    rhs = sum(Fraction(W) * sum(map(Fraction, r)) / len(r) for W, r, _ in pairs)
    return PASS if lhs >= th * rhs else REJECT


def full_set_ratio(reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]],
                   task_weights: Sequence[float] | None = None) -> float:
    """R = sum w c / sum w r (inf when the reference is all wrong and the candidate not)."""
    sizes = _check_paired(reference, candidate)
    weights = task_mean_weights(sizes) if task_weights is None else task_weights
    a_c = math.fsum(W * math.fsum(c) / len(c) for W, c in zip(weights, candidate, strict=True))
    a_r = math.fsum(W * math.fsum(r) / len(r) for W, r in zip(weights, reference, strict=True))
    if a_r == 0:
        return 1.0 if a_c == 0 else math.inf
    return a_c / a_r
