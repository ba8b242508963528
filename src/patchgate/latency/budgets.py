"""What the looks may spend: the note when a look's rounds cannot decide a scenario
alone, and the confirmation's budget (:mod:`patchgate.latency.looks`, step 3).

Pure: the profile and counts in, numbers and sentences out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profile import Profile
from . import decide


@dataclass(frozen=True)
class ConfirmBudget:
    """What the confirmation may spend: ``rounds`` a look, up to ``looks`` looks, each
    test at level ``alpha``; ``note`` says when the rounds were raised."""

    rounds: int
    looks: int
    alpha: float
    note: str = ""


def confirm_budget(prof: Profile, flagged: dict[str, list[str]]) -> ConfirmBudget:
    """The confirmation's budget (step 3 of the module docstring) for the ``flagged``
    items of each comparison: the profile's ``confirm_rounds`` and ``confirm_looks``
    (its ``rounds`` and ``max_looks`` where unset), tests at alpha / (comparisons x
    looks), rounds raised to the fewest that can decide the strongest item of every
    comparison's family at that level."""
    looks = prof.confirm_looks or max(1, prof.max_looks)
    alpha = prof.thresholds.alpha / (max(1, len(flagged)) * looks)
    asked = prof.confirm_rounds or prof.rounds
    need = max((decide.fewest_rounds(alpha, items) for items in flagged.values()),
               default=2)
    if asked >= need:
        return ConfirmBudget(asked, looks, alpha)
    key = "confirm_rounds" if prof.confirm_rounds else "rounds"
    return ConfirmBudget(need, looks, alpha, note=(
        f"the confirmation took {need} rounds a look, not {asked} ({key}): its tests run "
        f"at {alpha:.3g} ({len(flagged)} comparison(s), {looks} look(s)), where fewer "
        "rounds could not confirm the slowdown"))


def power_notes(rounds: int, alpha_look: float, scenarios: int = 6) -> list[str]:
    """Say so when a look has too few rounds for a scenario alone to reach its share of
    alpha: the signed-rank test's smallest p-value is 2^-rounds."""
    share = alpha_look * (1 - decide.SCORE_SHARE) / max(1, scenarios)
    need = decide.rounds_for(share)
    if rounds >= need:
        return []
    return [f"{rounds} rounds a look: a scenario alone cannot be significant before "
            f"{need} rounds (its share of alpha is {share:.2g}, the smallest p of "
            f"{rounds} paired rounds 2^-{rounds}); the pooled score can"]
