"""The guard protocol: how accuracy is judged, one registered kind per way.

A guard (:class:`Guard`, registered by name in :mod:`patchgate.registry`) evaluates
the candidate and the reference on the same items through the run's loaded engines,
and returns both results (:class:`Outcome`); the verdict pairs them item by item.
``lm_eval`` runs the profile's lm-eval tasks (:mod:`.lmeval`); ``token_agreement``
judges each generated token by the reference's top-1 choice, for random weights
(:mod:`.agreement`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .. import registry
from ..engines.configurations import Configurations
from ..profile import Profile
from .decision import AccuracyDecision, limit_of
from .results import AccuracyResult, paired_scores


@dataclass(kw_only=True)
class Context:
    """What a guard evaluates with: the profile, the run's configurations (engines
    started), the reporter, and what may stand in for a measurement of the reference:
    its stored result (``reference.json``, or None), this run's ``environment`` and
    ``workload`` fingerprints, ``--force-environment``, and the file's name for the
    report. ``full_reference``: the reference's result will be stored (``--accept``), so
    it is measured on every item when none stands in."""

    profile: Profile
    configs: Configurations
    reporter: object  # patchgate.report.console.Reporter (the stage above: not imported)
    stored_reference: dict | None = None
    environment: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    force_environment: bool = False
    stored_name: str = "reference.json"
    full_reference: bool = False

    @property
    def limit(self) -> float:
        """The accuracy limit every guard decides against (:func:`.decision.limit_of`)."""
        return limit_of(self.profile)


@dataclass(kw_only=True)
class Outcome:
    """Both results, the :class:`~.decision.AccuracyDecision`, where the reference's
    result came from (one sentence), the guard's ``mode`` (a sentence, for guards other
    than task accuracy) and notes for the report. ``sequential``: how the sequential
    guard got to its decision, for the accuracy block (both results then hold the
    evaluated items only); ``reference_full``: the reference on every item, where known
    (what ``--accept`` stores)."""

    reference: AccuracyResult
    candidate: AccuracyResult
    decision: AccuracyDecision
    source: str
    mode: str | None = None
    notes: list[str] = field(default_factory=list)
    sequential: dict | None = None
    reference_full: AccuracyResult | None = None


def decided_on_every_item(reference: AccuracyResult, candidate: AccuracyResult,
                          limit: float) -> AccuracyDecision:
    """The decision of a guard that evaluated every item: the full-set rule, paired."""
    return AccuracyDecision.full_set(*paired_scores(reference, candidate), limit)


class Guard(Protocol):
    name: str
    judges_alone: bool  # it can judge one configuration by itself (:meth:`result_of`)

    def check(self, profile: Profile) -> None:
        """Refuse, before any engine starts, what cannot run (an unknown task, say)."""

    def evaluate(self, ctx: Context) -> Outcome:
        """The candidate's and the reference's results on the same items, decided."""

    def result_of(self, engine, profile: Profile, reporter) -> AccuracyResult | None:
        """One configuration's result alone (``--attribute``), or None where the guard
        cannot judge an engine by itself."""


def get(name: str) -> Guard:
    """The guard registered as ``name``."""
    return registry.create("guard", name)
