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
from .results import AccuracyResult


@dataclass
class Context:
    """What a guard evaluates with: the profile, the run's configurations (engines
    started), the reporter, and what may stand in for a measurement of the reference:
    its stored result (``reference.json``, or None), this run's environment and
    workload fingerprints, ``--force-environment``, and the file's name for the report.
    ``full_reference``: the reference's result will be stored (``--accept``), so it is
    measured on every item when none stands in."""

    profile: object
    configs: object
    reporter: object
    stored_reference: dict | None = None
    fingerprints: tuple[dict, dict] = ({}, {})  # (environment, workload)
    force_environment: bool = False
    stored_name: str = "reference.json"
    full_reference: bool = False


@dataclass
class Outcome:
    """Both results, where the reference's came from (one sentence), the guard's mode
    (a sentence, for guards other than task accuracy) and notes for the report.
    ``sequential``: the early stop's fields for the accuracy block (both results then
    hold the evaluated items only); ``reference_full``: the reference on every item,
    where known (what ``--accept`` stores)."""

    reference: AccuracyResult
    candidate: AccuracyResult
    source: str
    mode: str | None = None
    notes: list[str] = field(default_factory=list)
    sequential: dict | None = None
    reference_full: AccuracyResult | None = None


class Guard(Protocol):
    name: str
    alone: bool  # it can judge one configuration by itself (:meth:`one`)

    def check(self, profile) -> None:
        """Refuse, before any engine starts, what cannot run (an unknown task, say)."""

    def evaluate(self, ctx: Context) -> Outcome:
        """The candidate's and the reference's results on the same items."""

    def one(self, engine, profile, reporter) -> AccuracyResult | None:
        """One configuration's result alone (``--attribute``), or None where the guard
        cannot judge an engine by itself."""


def get(name: str) -> Guard:
    """The guard registered as ``name``."""
    return registry.create("guard", name)
