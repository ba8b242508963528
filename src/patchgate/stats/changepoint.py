"""Change points in a stored history: E-divisive with a permutation test.

Each change is judged against the state before it, so five changes that each cost
2 % pass one by one while the series drifts by 10 %. E-divisive (Matteson & James,
2014; the method Apache Otava / Hunter runs over benchmark histories) finds where the
distribution of a series shifts, without assuming a shape for it:

1. for every split point of a segment, the energy statistic
   Q = (m_A m_B / m) * (2 E|a - b| - E|a - a'| - E|b - b'|) compares the points
   before and after it; the largest Q marks the candidate;
2. the candidate stands if a permutation test says so: the segment's points are
   shuffled ``permutations`` times, and p = (1 + #{shuffled max Q >= observed}) /
   (1 + permutations) must be <= ``alpha``;
3. repeat inside the segments until no candidate stands.

A short history has too few points for any split to reach ``alpha``: no change
point then means "none found", not "no drift".

Pure: numbers in, frozen dataclasses out; seeded, so the same series always gives
the same answer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChangePoint:
    """The series shifts at ``index`` (the first point of the new segment).
    ``before`` / ``after``: the mean of the first coordinate over the adjacent
    segments; ``p_value``: the permutation test's."""

    index: int
    p_value: float
    before: float
    after: float


def _vector(x) -> tuple[float, ...]:
    if isinstance(x, int | float):
        return (float(x),)
    return tuple(float(v) for v in x)


def _distances(points: list[tuple[float, ...]]) -> list[list[float]]:
    n = len(points)
    d = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            d[i][j] = d[j][i] = math.dist(points[i], points[j])
    return d


def _best_split(d: list[list[float]], idx: list[int], min_size: int) -> tuple[float, int]:
    """(max Q, split position) over the points ``idx`` (in order); (-inf, -1) if the
    segment is too short to split."""
    m = len(idx)
    if m < 2 * min_size:
        return -math.inf, -1
    # within_a[t]: sum of distances among idx[:t]; within_b[t]: among idx[t:]
    within_a = [0.0] * (m + 1)
    for t in range(1, m + 1):
        new = idx[t - 1]
        within_a[t] = within_a[t - 1] + math.fsum(d[idx[i]][new] for i in range(t - 1))
    within_b = [0.0] * (m + 1)
    for t in range(m - 1, -1, -1):
        new = idx[t]
        within_b[t] = within_b[t + 1] + math.fsum(d[new][idx[j]] for j in range(t + 1, m))
    total = within_a[m]
    best, where = -math.inf, -1
    for t in range(min_size, m - min_size + 1):
        na, nb = t, m - t
        cross = total - within_a[t] - within_b[t]
        stat = 2 * cross / (na * nb)
        stat -= within_a[t] / math.comb(na, 2) if na > 1 else 0.0
        stat -= within_b[t] / math.comb(nb, 2) if nb > 1 else 0.0
        q = na * nb / m * stat
        if q > best:
            best, where = q, t
    return best, where


def e_divisive(series: Sequence, alpha: float = 0.05, permutations: int = 199,
               min_size: int = 2, seed: int = 0) -> list[ChangePoint]:
    """Change points of ``series`` (numbers, or equal-length tuples of numbers), in
    order of position. See the module docstring."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if permutations < 1 or min_size < 1:
        raise ValueError("permutations and min_size must be >= 1")
    points = [_vector(x) for x in series]
    if len({len(p) for p in points}) > 1:
        raise ValueError("every point of the series needs the same number of values")
    d = _distances(points)
    rng = random.Random(seed)
    bounds = [0, len(points)]
    found: list[tuple[int, float]] = []
    while True:
        segments = [list(range(a, b)) for a, b in zip(bounds, bounds[1:], strict=False)]
        scored = [(_best_split(d, seg, min_size), seg) for seg in segments]
        (q, t), seg = max(scored, key=lambda s: s[0][0])
        if t < 0:
            break
        hits = 0
        for _ in range(permutations):
            shuffled_max = -math.inf
            for other in segments:
                perm = other[:]
                rng.shuffle(perm)
                shuffled_max = max(shuffled_max, _best_split(d, perm, min_size)[0])
            hits += shuffled_max >= q
        p = (1 + hits) / (1 + permutations)
        if p > alpha:
            break
        found.append((seg[t], p))
        bounds = sorted(bounds + [seg[t]])
    out = []
    for index, p in sorted(found):
        a = max(b for b in bounds if b < index)
        z = min(b for b in bounds if b > index)
        out.append(ChangePoint(index=index, p_value=p,
                               before=math.fsum(x[0] for x in points[a:index]) / (index - a),
                               after=math.fsum(x[0] for x in points[index:z]) / (z - index)))
    return out
