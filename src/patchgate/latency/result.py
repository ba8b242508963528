"""What the latency phase measured and decided (:mod:`patchgate.latency.looks` builds
it; :mod:`patchgate.verdict.judge` reads it): the samples, each comparison's decisions in
the first processes and in fresh ones, and the outcome that counts for each item.
Pure: no engines, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..stats import SLOWER, UNDECIDED
from . import decide
from .scenarios import Scenario

Samples = dict[str, dict[str, list[float]]]  # {label: {scenario: [seconds]}}


@dataclass(frozen=True)
class Alone:
    """The scenario a ``confirm_strongest`` confirmation measured alone first: its
    ``decision`` in the fresh processes (one look of ``rounds`` rounds at ``alpha``) and
    the ``samples`` of that look."""

    item: str
    decision: decide.Decision
    samples: Samples
    rounds: int
    alpha: float

    @property
    def confirmed(self) -> bool:
        return self.decision.outcome == SLOWER


@dataclass(kw_only=True)
class LatencyResult:
    """What the latency phase measured and decided.

    ``samples``: per label, per scenario, the seconds of every timed call in the
    first set of processes (more looks append). ``decisions``: per comparison
    ("current", "best"), per item (scenario names and ``score``), the outcome in the
    first processes. ``confirmation``: the same for the items found slower, measured
    again in fresh processes (``confirm_samples``); ``alone``: the one scenario they
    measured first (``confirm_strongest``), if any. ``weights``: each scenario's
    weight in the pooled score item. ``same_as_current``: the candidate is the
    current configuration (nothing new to compare). ``batch_sizes``: the batch sizes
    that stand for S1, S8 and Sinf when they are not the profile's (the serving set)."""

    scenarios: list[Scenario]
    samples: Samples
    decisions: dict[str, dict[str, decide.Decision]]
    weights: dict[str, float]
    looks: int
    max_looks: int
    alpha_look: float
    confirmation: dict[str, dict[str, decide.Decision]] = field(default_factory=dict)
    confirm_samples: Samples = field(default_factory=dict)
    confirm_looks: int = 0
    confirm_rounds: int = 0  # rounds a look in the fresh processes (0: none measured)
    confirm_alpha: float | None = None  # the level of the fresh processes' tests
    alone: Alone | None = None
    same_as_current: bool = False
    notes: list[str] = field(default_factory=list)
    batch_sizes: tuple[int, ...] | None = None
    answers: dict | None = None  # {engine name: {scenario: [first tokens per call]}}
    # work off the clock that favoured the candidate (:mod:`.offclock`): the error the
    # gate raises unless the candidate is rejected anyway
    offclock: Exception | None = None

    def final(self, comparison: str, item: str) -> str:
        """The outcome that counts. An item found slower is measured again in fresh
        processes; there the fresh measurement decides: "slower" only if it agrees,
        else its own outcome (a fresh "equivalent" shows the first was the processes,
        not the change; a fresh "undecided" leaves the item undecided). When the pooled
        score was slower in the first processes, the fresh ones test every scenario too
        (the looks there stopped before a scenario alone could be tested): one they find
        slower is slower, the score in the first processes and it in the fresh ones.
        Where they measured one scenario alone first (:attr:`alone`) and found it slower
        again, it is slower and every other item keeps the first processes' outcome."""
        first = self.decisions[comparison][item].outcome
        if self.alone is not None and self.alone.confirmed and comparison == "current":
            # the rejection stands on the one scenario measured alone; the other items
            # keep what the first processes found (not re-measured)
            return SLOWER if item == self.alone.item else first
        again = self.again(comparison, item)
        if first != SLOWER:
            score = self.decisions[comparison].get(decide.SCORE)
            if again is not None and again.outcome == SLOWER and score is not None \
                    and score.outcome == SLOWER:
                return SLOWER
            return first
        if comparison not in self.confirmation:
            return first
        return again.outcome if again is not None else UNDECIDED

    def again(self, comparison: str, item: str) -> decide.Decision | None:
        """What the fresh processes found for ``item``: their test of every item found
        slower, else the one scenario they measured alone first; None: not measured."""
        d = self.confirmation.get(comparison, {}).get(item)
        if d is None and self.alone is not None and comparison == "current" \
                and item == self.alone.item:
            return self.alone.decision
        return d

    def again_samples(self, comparison: str, item: str) -> dict[str, list[float]] | None:
        """The fresh processes' seconds of scenario ``item`` for the candidate and
        ``comparison``, paired by round (those :meth:`again` decided on); None where
        they did not measure it."""
        if self.confirmation.get(comparison, {}).get(item) is not None:
            samples = self.confirm_samples
        elif self.again(comparison, item) is not None:
            samples = self.alone.samples
        else:
            return None
        if item not in samples.get("candidate", {}):
            return None  # the pooled score: derived from the scenarios, no seconds of its own
        return {"candidate": list(samples["candidate"][item]),
                comparison: list(samples[comparison][item])}

    def not_remeasured(self) -> list[str]:
        """Items found slower in the first processes that the fresh ones did not measure,
        the rejection standing on :attr:`alone`."""
        if self.alone is None or not self.alone.confirmed:
            return []
        return [n for n, d in self.decisions["current"].items()
                if d.outcome == SLOWER and n != self.alone.item]

    def unconfirmed(self, comparison: str, item: str) -> bool:
        """Found slower in the first processes, but not again in fresh ones."""
        return (self.decisions[comparison][item].outcome == SLOWER
                and self.final(comparison, item) != SLOWER)
