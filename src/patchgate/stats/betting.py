"""The bets of the sequential accuracy guard's confidence sequence
(:mod:`patchgate.stats.sequential`): which items form a round and how each is weighted
(:func:`round_plan`), the fixed grid of null values (:func:`null_grid`), and a round's bet
at a null (:func:`bet`: aGRAPA, cut so that no factor can fall below 1 - ``truncation``).

Pure: tuples of numbers in, numbers out; no I/O.
"""

from __future__ import annotations

import functools
import math

from .strata import task_sequence


@functools.lru_cache(maxsize=32)
def round_plan(sizes: tuple[int, ...], weights: tuple[float, ...]) -> tuple[tuple, ...]:
    """Per position: (task, items of the task left before it, its ordinal in its task
    within the round, its alignment beta, round start, round end). Fixed by the sizes and
    weights alone, so every seed shares it.

    beta makes the bets of a round aligned: lam_i = bet * beta_i gives
    sum_{i in round, task t} lam_i N_t / R_ti = bet * n_round / W_rem * W_t."""
    tasks = task_sequence(sizes)
    w = [W / n for W, n in zip(weights, sizes, strict=True)]
    left, plan, pos = list(sizes), [], 0
    while pos < len(tasks):
        start, need = pos, {t for t, k in enumerate(left) if k > 0}
        w_rem = math.fsum(w[t] * left[t] for t in need)
        while need:
            need.discard(tasks[pos])
            pos += 1
        members = tasks[start:pos]
        count = {t: members.count(t) for t in members}
        ordinal = dict.fromkeys(count, 0)
        for t in members:
            ordinal[t] += 1
            beta = w[t] * left[t] / count[t] * len(members) / w_rem
            plan.append((t, left[t], ordinal[t], beta, start, pos))
            left[t] -= 1
    return tuple(plan)


GRID_FIRST, GRID_GROWTH = 1e-4, 0.05


@functools.lru_cache(maxsize=8)
def null_grid(reach: float) -> tuple[float, ...]:
    """The fixed grid of nulls d, ascending: 0 and +-1e-4 (1.05^k - 1) / 0.05, k >= 1, out
    to ``reach``. Fixed before any data, which is what makes the scan in
    :meth:`patchgate.stats.sequential.SequentialGuard._bound` valid."""
    pos, k = [], 1
    while not pos or pos[-1] < reach:
        pos.append(GRID_FIRST * ((1 + GRID_GROWTH) ** k - 1) / GRID_GROWTH)
        k += 1
    return tuple([-x for x in reversed(pos)] + [0.0] + pos)




def bet(rnd: tuple, d: float, side: int, st) -> float:
    """A round's bet at null d: Kelly's g / (v + g^2) for the expected excess g of an item
    over its null mean (aGRAPA), on this side only, cut so that no factor can fall below
    1 - truncation whatever the round's items turn out to be. ``st``: the guard's
    :class:`~patchgate.stats.sequential.SequentialSettings` (``theta``, ``truncation``)."""
    c0, w_rem, v, b1, b2, shape = rnd
    g = (c0 - d) / w_rem
    raw = g * b1 / ((v + g * g) * b2)
    if raw * side <= 0:
        return 0.0
    theta = st.theta
    if side > 0:  # worst item: z = -theta against the highest null mean
        worst = max(beta * (base + theta * extra + b * d + theta)
                    for beta, base, b, extra in shape)
    else:  # worst item: z = 1 against the lowest null mean
        worst = max(beta * (1 - base + extra - b * d) for beta, base, b, extra in shape)
    if worst <= 0:
        return raw
    return side * min(abs(raw), st.truncation / worst)
