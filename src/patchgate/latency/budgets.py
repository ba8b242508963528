"""What the looks may spend: the note when a look's rounds cannot decide a scenario
alone, the confirmation's budget (:mod:`patchgate.latency.looks`, step 3), and the one
scenario a confirmation may measure alone first (``confirm_strongest``).

Pure: the profile and counts in, numbers and sentences out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import stats
from ..profile import Profile
from ..stats import paired_t
from . import decide


@dataclass(frozen=True)
class ConfirmBudget:
    """What the confirmation may spend: ``rounds`` a look, up to ``looks`` looks, each
    test at level ``alpha``; ``note`` says when the rounds were raised."""

    rounds: int
    looks: int
    alpha: float
    note: str = ""


def confirm_budget(prof: Profile, flagged: dict[str, list[str]], steps: int = 1
                   ) -> ConfirmBudget:
    """The confirmation's budget (step 3 of the module docstring) for the ``flagged``
    items of each comparison: the profile's ``confirm_rounds`` and ``confirm_looks``
    (its ``rounds`` and ``max_looks`` where unset), tests at alpha / (comparisons x
    looks x ``steps``), rounds raised to the fewest that can decide the strongest item
    of every comparison's family at that level. ``steps`` 2: one scenario is measured
    alone first (:func:`alone_budget`), and the two steps share the level."""
    looks, alpha = _level(prof, len(flagged), steps)
    asked = prof.confirm_rounds or prof.rounds
    need = max((decide.fewest_rounds(alpha, items, prof.test) for items in flagged.values()),
               default=2)
    if asked >= need:
        return ConfirmBudget(asked, looks, alpha)
    key = "confirm_rounds" if prof.confirm_rounds else "rounds"
    return ConfirmBudget(need, looks, alpha, note=(
        f"the confirmation took {need} rounds a look, not {asked} ({key}): its tests run "
        f"at {alpha:.3g} ({len(flagged)} comparison(s), {looks} look(s)), where fewer "
        "rounds could not confirm the slowdown"))


def alone_budget(prof: Profile) -> ConfirmBudget:
    """The first step of a ``confirm_strongest`` confirmation: one look at the other half
    of the one comparison's level (alpha / (``confirm_looks`` x 2)), with the fewest
    rounds whose test can decide one item there."""
    _, alpha = _level(prof, 1, 2)
    return ConfirmBudget(decide.rounds_for(alpha, prof.test), 1, alpha)


def _level(prof: Profile, comparisons: int, steps: int) -> tuple[int, float]:
    """The confirmation's looks (``confirm_looks``, else ``max_looks``) and the level of
    each of its tests: alpha / (comparisons x looks x steps)."""
    looks = prof.confirm_looks or max(1, prof.max_looks)
    return looks, prof.thresholds.alpha / (max(1, comparisons) * looks * steps)


def strongest(decisions: Mapping[str, decide.Decision], threshold: float) -> str | None:
    """The scenario a ``confirm_strongest`` confirmation measures alone first, from the
    first processes' ``decisions`` against the current baseline: among the scenarios
    found slower (every scenario, when the pooled score was slower: it carries them)
    whose ratio lies beyond the ``threshold``, the one whose interval's lower end is
    highest, where the slowdown stands out most. None when there is none."""
    score = decisions.get(decide.SCORE)
    carried = score is not None and score.outcome == stats.SLOWER
    names = [n for n, d in decisions.items() if n != decide.SCORE
             and (carried or d.outcome == stats.SLOWER)
             and d.comparison.ratio > 1 + threshold]
    if not names:
        return None
    return max(names, key=lambda n: (decisions[n].comparison.ci_low,
                                     decisions[n].comparison.ratio))


def power_notes(rounds: int, alpha_look: float, scenarios: int = 6,
                test: str = paired_t.SIGNED_RANK) -> list[str]:
    """Say so when a look has too few rounds for a scenario alone to reach its share of
    alpha: the signed-rank test's smallest p-value is 2^-rounds (the t-test has no such
    floor)."""
    if test != paired_t.SIGNED_RANK:
        return []
    share = alpha_look * (1 - decide.SCORE_SHARE) / max(1, scenarios)
    need = decide.rounds_for(share)
    if rounds >= need:
        return []
    return [f"{rounds} rounds a look: a scenario alone cannot be significant before "
            f"{need} rounds (its share of alpha is {share:.2g}, the smallest p of "
            f"{rounds} paired rounds 2^-{rounds}); the pooled score can"]
