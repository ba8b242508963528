"""The accuracy decision: what a guard decided about the accuracy rule, once, typed.

The rule is the profile's: the candidate passes iff its accuracy over the full set of
items is at least ``thresholds.accuracy_reject`` (99 %) of the reference's. The limit is
read from the profile here (:func:`limit_of`) and nowhere else; every guard returns an
:class:`AccuracyDecision` made with it, and the judge, the gate and the report read the
decision instead of deciding again.

- a guard that evaluated every item decides by the full-set ratio (:meth:`full_set`);
- the sequential guard may stop early: its decision predicts the full set's, with the
  ratio's interval (:mod:`patchgate.guard.sequential`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..stats import mean_ratio
from ..stats.strata import PASS, REJECT, full_set_decision

UNDECIDED = "undecided"
ALL_ITEMS = "all items evaluated"


def limit_of(profile) -> float:
    """The accuracy limit of ``profile`` (a fraction of the reference's accuracy)."""
    return profile.thresholds.accuracy_reject


@dataclass(frozen=True, kw_only=True)
class AccuracyDecision:
    """``outcome`` (pass, reject or undecided) against ``limit``; ``ratio``: candidate /
    reference (the full-set estimate where the guard stopped early), with the full-set
    ratio's interval ``low``..``high`` (None where every item was seen: the ratio is
    exact); ``items`` evaluated of ``total``; ``why`` it stopped, in words."""

    outcome: str
    limit: float
    ratio: float | None  # None: the reference scored nothing
    items: int
    total: int
    why: str = ALL_ITEMS
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.outcome not in (PASS, REJECT, UNDECIDED):
            raise ValueError(f"an accuracy decision is pass, reject or undecided, not "
                             f"{self.outcome!r}")

    @property
    def fails(self) -> bool:
        """The change is rejected on accuracy."""
        return self.outcome == REJECT

    @property
    def early(self) -> bool:
        """Decided before every item was evaluated."""
        return self.items < self.total

    @classmethod
    def full_set(cls, reference: list[float], candidate: list[float], limit: float
                 ) -> AccuracyDecision:
        """The rule on every item, paired, in exact arithmetic (a tie at the limit
        passes, where a float ratio can land one ulp below it)."""
        return cls(outcome=full_set_decision([reference], [candidate], [1.0], limit),
                   limit=limit, ratio=mean_ratio(reference, candidate),
                   items=len(reference), total=len(reference))

    def fields(self) -> dict:
        """The verdict's accuracy block keys of the decision (the document's names)."""
        return {"decision": self.outcome, "items_evaluated": self.items,
                "items_total": self.total, "stopped": self.why,
                "interval": [self.low, self.high]}
