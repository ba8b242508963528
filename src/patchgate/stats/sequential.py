"""A sequential accuracy guard: stop evaluating as soon as the full-set verdict is certain.

The full-set rule (:mod:`.strata`): the candidate passes iff R = sum w c / sum w r >=
theta, that is D = sum_i w_i z_i >= 0 with z_i = c_i - theta r_i in [-theta, 1].

D is the weighted mean of a finite population. The guard sees it in a seeded random
order, stratified over the tasks (:func:`stratified_order`), a block at a time, and keeps
an anytime-valid confidence sequence for D built for sampling without replacement (the
betting confidence sequences of Waudby-Smith & Ramdas, "Confidence sequences for sampling
without replacement", NeurIPS 2020, arXiv 2006.04347):

- For a null value d, the capital K+(d) bets that D > d. It is a nonnegative
  supermartingale whenever D <= d (not only at D = d), so by Ville's inequality
  P(K+(d) ever >= 1/delta) <= delta. K-(d) is the mirror image.
- The lower end of the interval is the last point of a fixed grid of d, scanned from the
  bottom of D's possible range upward, up to which every null is rejected; the upper end
  mirrors it. Each end fails with probability <= delta at any time: it can exceed D only
  if the grid point just at or above D was rejected.
- Pass when the lower end is >= 0; reject when the upper end is < 0; else go on. A wrong
  pass needs D < 0, a wrong reject D >= 0, and a candidate has only one of the two: the
  early decision differs from the full-set one with probability at most delta (not 2
  delta), whatever the stopping time. At the last item the decision is the exact
  full-set rule (:func:`full_set_decision`).

One process for D across the strata: each item is a bet against its own task's
WoR-adjusted mean under a null vector of task means summing to d, the bets of a round
(the shortest stretch of the order holding every task with items left) aligned with the
task weights, so the capital is a supermartingale for every split of D over the tasks
and no union bound is paid (docs/STATISTICS.md gives the argument). Bets: aGRAPA, cut
so that no factor falls below 1 - ``truncation``; capital read at round ends only.

Pure: lists of floats in, frozen dataclasses out; no I/O.
"""


from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .betting import bet, null_grid, round_plan
from .strata import PASS, REJECT, _check_sizes, full_set_decision, task_mean_weights

CONTINUE = "continue"
STOPPED_ABOVE = "accuracy shown at or above the limit"
STOPPED_BELOW = "accuracy shown below the limit"
STOPPED_ALL = "all items evaluated"


@dataclass(frozen=True)
class SequentialSettings:
    """The guard's knobs, in one place.

    ``theta``: the limit on the ratio (``accuracy_reject``); ``delta``: the allowed rate
    of early decisions the full set would reverse; ``block``: items of the first look;
    ``growth``: each later look sees this many times the items of the one before (at
    least ``block`` more; 1: a look every ``block`` items), see :func:`looks`, skipping
    those that cannot decide when ``skip_margin`` > 0 (:mod:`.schedule`);
    ``truncation``: a bet never risks more than this fraction of the capital;
    ``prior_var`` and ``prior_weight``: the variance of z assumed before any item (in
    units of z) and how many items it counts for, in the bet size.
    """

    theta: float = 0.99
    delta: float = 0.01
    block: int = 16
    growth: float = 1.25
    truncation: float = 0.9
    prior_var: float = 0.25
    prior_weight: float = 1.0
    skip_margin: float = 0.0

    def __post_init__(self) -> None:
        if not self.theta > 0:
            raise ValueError(f"theta must be > 0, got {self.theta}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        if self.block < 1:
            raise ValueError(f"block must be >= 1, got {self.block}")
        if not self.growth >= 1:
            raise ValueError(f"growth must be >= 1, got {self.growth}")
        if not 0 < self.truncation < 1:
            raise ValueError(f"truncation must be in (0, 1), got {self.truncation}")
        if not (self.prior_var > 0 and self.prior_weight > 0):
            raise ValueError("prior_var and prior_weight must be > 0")
        if not self.skip_margin >= 0:
            raise ValueError(f"skip_margin must be >= 0, got {self.skip_margin}")


def looks(total: int, settings: SequentialSettings) -> list[int]:
    """The items seen at each look: ``block``, then ``growth`` times as many (at least
    ``block`` more), ending at ``total``. Fewer looks cost nothing in validity (the
    sequence is valid at any stopping time); each costs the gate one lm-eval run."""
    out, n = [], min(settings.block, total)
    while n < total:
        out.append(n)
        n = min(total, max(n + settings.block, math.ceil(settings.growth * n)))
    return [*out, total]


@dataclass(frozen=True)
class SequentialResult:
    """Where the guard stands after ``items_evaluated`` of ``items_total`` items.

    ``decision`` is ``pass``, ``reject`` or ``continue``; ``stopped`` says why it stopped
    (one of the ``STOPPED_*`` texts) or is None while it goes on. ``low``..``high`` is the
    interval for D = sum w (c - theta r), the quantity the decision uses: a lower and an
    upper confidence sequence, each failing with probability <= delta (the two-sided
    interval covers D at all times with probability >= 1 - 2 delta; the decision errs
    with probability <= delta, as only one side can be wrong). ``estimate`` is the
    stratified estimate of D.

    ``ratio_low``..``ratio_high`` is the same interval on the ratio scale:
    R = theta + D / A_r, with A_r = sum w r the reference mean. It is exact when
    ``reference_exact`` (A_r known from a complete stored reference); otherwise A_r is the
    stratified estimate from the items seen and the ratio interval is approximate (the
    decision, on D, is not). The ratio fields are None when A_r is 0.
    """

    decision: str
    stopped: str | None
    items_evaluated: int
    items_total: int
    low: float
    high: float
    estimate: float
    reference_mean: float
    reference_exact: bool
    ratio_low: float | None
    ratio_high: float | None
    ratio_estimate: float | None
    delta: float


class SequentialGuard:
    """Accumulates paired scores in the order of :func:`task_sequence` (which item of a
    task comes next: :func:`stratified_order`) and decides after each call of :meth:`add`.

    Pure (no I/O), mutable only in what it has seen. :meth:`add` costs O(1) per item, plus
    a scan of the grid when the capital at d = 0 crosses 1/delta; :meth:`result` scans the
    grid from both ends of D's range inward. The capital at each grid point is kept and
    brought up to date, so looking after every block costs O(grid x items) over a run.
    """

    def __init__(
        self,
        task_sizes: Sequence[int],
        task_weights: Sequence[float] | None = None,
        settings: SequentialSettings = SequentialSettings(),
    ) -> None:
        sizes = tuple(_check_sizes(task_sizes))
        weights = tuple(task_mean_weights(sizes) if task_weights is None else task_weights)
        if len(weights) != len(sizes) or any(not w > 0 for w in weights):
            raise ValueError("need one weight > 0 per task")
        if abs(math.fsum(weights) - 1) > 1e-9:
            raise ValueError(f"task weights must sum to 1, got {math.fsum(weights)}")
        self.settings, self.sizes, self.weights = settings, sizes, weights
        self.w = [W / n for W, n in zip(weights, sizes, strict=True)]
        self.plan = round_plan(sizes, weights)
        self.total = len(self.plan)
        self.grid = null_grid(max(1.0, settings.theta))
        self.limit = math.log(1 / settings.delta)
        T = len(sizes)
        self.ref: list[list[float]] = [[] for _ in range(T)]
        self.cand: list[list[float]] = [[] for _ in range(T)]
        self.n, self.s, self.q = [0] * T, [0.0] * T, [0.0] * T  # per task: seen, sum z, z^2
        self.d_seen = 0.0
        self.z: list[float] = []
        self.a: list[float] = []  # each item's null mean at d = 0 (at d: a + B d)
        self.rounds: list[tuple] = []  # (c0, W_rem, v, sum beta, sum beta^2, shape)
        self.done = 0  # items in completed rounds
        self._capital: dict[tuple[int, float], tuple[float, int, int]] = {}
        self.log_plus = self.log_minus = 0.0  # log capital at d = 0, completed rounds
        self._lp = self._lm = 0.0
        self.decision: str = CONTINUE
        self.stopped: str | None = None

    @property
    def seen(self) -> int:
        return len(self.z)

    def _range(self) -> tuple[float, float]:
        """Where D can still be: every unseen z at -theta, or every unseen z at 1."""
        w_rem = math.fsum(w * (N - n) for w, N, n in zip(self.w, self.sizes, self.n, strict=True))
        return self.d_seen - self.settings.theta * w_rem, self.d_seen + w_rem

    def _open_round(self, pos: int) -> None:
        """Fix the round's null means (functions of d) and what its bets are made of, from
        the items before it. Task t's unseen items have null mean zhat_t + (d - c0) / W_rem,
        zhat_t its mean so far (shrunk to the pooled one): the weighted sum of the null task
        means is d, and the split of d over the tasks does not matter (module docstring)."""
        st, a = self.settings, self.settings.prior_weight
        seen = sum(self.n)
        pooled = math.fsum(self.s) / seen if seen else 0.0
        zhat = [(s + a * pooled) / (n + a) for s, n in zip(self.s, self.n, strict=True)]
        left = [N - n for N, n in zip(self.sizes, self.n, strict=True)]
        w_rem = math.fsum(w * k for w, k in zip(self.w, left, strict=True))
        c0 = self.d_seen + math.fsum(w * k * z for w, k, z in zip(self.w, left, zhat, strict=True))
        shape = []  # per item of the round: (beta, null mean at d = 0 before in-round
        for t, r_before, j, beta, _, _ in self.plan[pos:self.plan[pos][5]]:  # items, B, extra)
            r0 = r_before + j - 1  # the task's items left at the round's start
            shape.append((beta, r0 * (zhat[t] - c0 / w_rem) / r_before,
                          r0 / (r_before * w_rem), (j - 1) / r_before))
        ss = math.fsum(q - s * s / n for q, s, n in zip(self.q, self.s, self.n, strict=True) if n)
        v = (st.prior_var * a + max(ss, 0.0)) / (a + sum(max(n - 1, 0) for n in self.n))
        rnd = (c0, w_rem, v, math.fsum(x[0] for x in shape),
               math.fsum(x[0] ** 2 for x in shape), shape)
        self.rounds.append(rnd)
        self._bets = (bet(rnd, 0.0, +1, st), bet(rnd, 0.0, -1, st))
        self._partial = [0.0] * len(self.sizes)

    def add(self, reference: Sequence[float], candidate: Sequence[float]) -> str:
        """The next items of the order, paired; returns ``pass``, ``reject`` or
        ``continue`` (also in :attr:`decision`). Raises once the guard has stopped."""
        if self.decision != CONTINUE:
            raise ValueError(f"the guard has stopped ({self.stopped}); nothing more to add")
        if len(reference) != len(candidate):
            raise ValueError(f"paired scores differ in length: {len(reference)} vs "
                             f"{len(candidate)}")
        if self.seen + len(reference) > self.total:
            raise ValueError(f"more items than the {self.total} of the suite")
        theta = self.settings.theta
        for r, c in zip(reference, candidate, strict=True):
            pos = len(self.z)
            t, r_before, _, _, start, end = self.plan[pos]
            if pos == start:
                self._open_round(pos)
            z = c - theta * r
            beta, base = self.rounds[-1][5][pos - start][:2]
            m0 = base - self._partial[t] / r_before
            self._lp += math.log1p(self._bets[0] * beta * (z - m0))
            self._lm += math.log1p(self._bets[1] * beta * (z - m0))
            self._partial[t] += z
            self.z.append(z)
            self.a.append(m0)
            self.n[t] += 1
            self.s[t] += z
            self.q[t] += z * z
            self.d_seen += self.w[t] * z
            self.ref[t].append(r)
            self.cand[t].append(c)
            if pos + 1 == end:
                self.done, self.log_plus, self.log_minus = end, self._lp, self._lm
        self._decide()
        return self.decision

    def _decide(self) -> None:
        """Pass when the interval lies wholly at or above 0, reject when wholly below;
        at the last item, the exact full-set rule."""
        if self.seen == self.total:
            self.decision = full_set_decision(self.ref, self.cand, self.weights,
                                              self.settings.theta)
            self.stopped = STOPPED_ALL
            return
        lo, hi = self._range()
        up = lo > 1e-12 or (self.log_plus > self.limit - 1e-9 and self._bound(+1) >= 0)
        down = hi < -1e-12 or (self.log_minus > self.limit - 1e-9 and self._bound(-1) < 0)
        if up != down:
            self.decision = PASS if up else REJECT
            self.stopped = STOPPED_ABOVE if up else STOPPED_BELOW

    # --- the interval ----------------------------------------------------------------

    def _log_capital(self, d: float, side: int) -> float:
        """log K(d) over the completed rounds: side +1 tests D <= d, side -1 D >= d.
        Kept per (side, d) and brought up to date from where it was left, so a guard
        that asks after every block pays O(grid x items) in all."""
        total, k, pos = self._capital.get((side, d), (0.0, 0, 0))
        while pos < self.done:
            rnd = self.rounds[k]
            shape = rnd[5]
            size = bet(rnd, d, side, self.settings)
            if size:
                z, a = self.z, self.a
                total += math.fsum(
                    math.log1p(size * beta * (z[pos + i] - a[pos + i] - b * d))
                    for i, (beta, _, b, _) in enumerate(shape))
            k, pos = k + 1, pos + len(shape)
        self._capital[(side, d)] = (total, k, pos)
        return total

    def _bound(self, side: int) -> float:
        """The lower (side +1) or upper (side -1) end of the confidence sequence.

        Scan the fixed grid from the far end of D's range inward (upward for the lower
        end), as long as each null d is rejected (log K(d) >= log 1/delta); the end is the
        last rejected grid point, and never inside the range's own end. If it exceeds the
        true D, the first grid point at or above D was rejected, an event of probability
        <= delta (Ville): valid whether or not K is monotone in d; conservative by one
        grid step."""
        lo, hi = self._range()
        grid = self.grid[bisect.bisect_left(self.grid, lo):bisect.bisect_right(self.grid, hi)]
        bound = lo if side > 0 else hi
        for d in (grid if side > 0 else reversed(grid)):
            if self._log_capital(d, side) < self.limit:
                break
            bound = d
        return max(bound, lo) if side > 0 else min(bound, hi)

    def result(self, reference_mean: float | None = None) -> SequentialResult:
        """Where the guard stands, with its interval. ``reference_mean``: the reference's
        full-set weighted mean when it is known (a complete stored reference); otherwise
        the ratio scale uses the stratified estimate from the items seen."""
        theta = self.settings.theta
        r_means = [math.fsum(x) / len(x) for x in self.ref if x]
        fill = math.fsum(r_means) / len(r_means) if r_means else 0.0
        a_r = reference_mean if reference_mean is not None else math.fsum(
            W * (math.fsum(x) / len(x) if x else fill)
            for W, x in zip(self.weights, self.ref, strict=True))
        pooled = math.fsum(self.s) / self.seen if self.seen else 0.0
        estimate = math.fsum(W * (s / n if n else pooled)
                             for W, s, n in zip(self.weights, self.s, self.n, strict=True))
        if self.seen == self.total:
            low = high = estimate
        else:
            low, high = self._bound(+1), self._bound(-1)

        def ratio(x: float) -> float | None:
            return theta + x / a_r if a_r > 0 else None

        return SequentialResult(
            decision=self.decision, stopped=self.stopped, items_evaluated=self.seen,
            items_total=self.total, low=low, high=high, estimate=estimate,
            reference_mean=a_r, reference_exact=reference_mean is not None,
            ratio_low=ratio(low), ratio_high=ratio(high), ratio_estimate=ratio(estimate),
            delta=self.settings.delta)
