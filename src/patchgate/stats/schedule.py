"""When the sequential guard looks next: skip the looks that cannot decide.

Each look costs the gate a pass of lm-eval over the items chosen so far, and its small
batches answer an item more slowly than a full pass does. A change close to the limit
runs to the last item anyway (no valid guard can stop it early: ``least_fraction``), so
its intermediate looks are pure cost: on the CPU default suite the six looks of the
repository's chain (0.3 points above the limit) took 12.4 s where one pass took 10.

After each look the guard knows its interval for D (the full-set difference; centre c,
half-width h after n of N items). For a mean sampled without replacement the width
shrinks about as sqrt(1/n - 1/N), so a later look at n' items should see a half-width of
about h sqrt((1/n' - 1/N) / (1/n - 1/N)). The next look is the first scheduled point
where that is at most |c| / ``margin``, that is where the interval could plausibly clear
the limit; the last item always qualifies (the exact full-set rule decides there).

This changes only *when* the guard looks, chosen from the data seen so far: the
confidence sequence holds at every stopping time, so the error rate is unchanged
(docs/SEQUENTIAL.md). A margin below 1 looks before the prediction says a decision is
likely, so a change that decides sooner than predicted is rarely made to wait.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MARGIN = 0.25


def predicted_half_width(half_width: float, seen: int, at: int, total: int) -> float:
    """The interval's half-width expected after ``at`` items, from ``half_width`` after
    ``seen`` of ``total`` (the without-replacement shrinkage sqrt(1/n - 1/N))."""
    if at >= total:
        return 0.0
    now = 1 / seen - 1 / total
    return half_width * math.sqrt(max(1 / at - 1 / total, 0.0) / now) if now > 0 else 0.0


def worth_a_look(low: float, high: float, seen: int, at: int, total: int,
                 margin: float = MARGIN) -> bool:
    """Whether a look after ``at`` items could plausibly decide, the interval for D being
    ``low``..``high`` after ``seen`` of ``total`` items."""
    if at >= total:
        return True
    centre, half = (low + high) / 2, (high - low) / 2
    return margin * predicted_half_width(half, seen, at, total) <= abs(centre)


def next_point(points: Sequence[int], least: int, low: float, high: float, seen: int,
               margin: float = MARGIN) -> int:
    """The first of the schedule's ``points`` at or after ``least`` items where a look is
    worth taking (:func:`worth_a_look`); the schedule's last point where none is."""
    total = points[-1]
    return next((p for p in points if p >= least and
                 worth_a_look(low, high, seen, p, total, margin)), total)
