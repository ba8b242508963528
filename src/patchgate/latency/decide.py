"""Latency decisions from paired rounds: per scenario, and pooled over the score.

Pure: samples in, :class:`Decision` objects out; no I/O, no engines.

The items of one comparison (candidate vs the current baseline, say) are the
scenarios and ``score``: per round, the weighted mean of their log ratios with the
score's weights (0.4 S1 + 0.3 S8 + 0.3 Sinf, each S the geometric mean of the
prefill and decode ratios at its batch size). To first order, ``score``'s ratio is
how much the contest score changes; scenarios that are all 8 % slower are one
strong fact there, where each alone may be too noisy to decide.

At each look, every item gets a :class:`~patchgate.stats.PairedComparison` at level
``alpha_look`` (alpha divided by the most looks the run may take, so looking again
never raises the false-alarm rate), and weighted Holm picks which "slower" and
"faster" tests are significant across the items: ``score`` carries half the
weight, the scenarios share the other half. An item's outcome is the first decisive one it
reaches (slower, faster, equivalent); until then it is undecided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import stats
from ..stats import paired_t
from ..stats.score import WEIGHTS, batch_keys
from .scenarios import Scenario

SCORE = "score"
SCORE_SHARE = 0.5  # the pooled test's share of alpha in Holm (the scenarios share the rest)


@dataclass(frozen=True)
class Decision:
    """One item of a comparison after a look: its paired comparison and outcome."""

    item: str
    comparison: stats.PairedComparison
    outcome: str
    look: int  # the look at which the outcome was reached (or the last one)
    alpha: float  # the level of this look's tests (before Holm)

    @property
    def decided(self) -> bool:
        return self.outcome != stats.UNDECIDED


def score_weights(scenarios: Sequence[Scenario], batch_sizes: Sequence[int],
                  speed: Mapping[str, float] | None = None) -> dict[str, float]:
    """Each scenario's weight in the score: the batch size's contest weight (S1 0.4, S8
    0.3, Sinf 0.3 for the largest batch) split equally over its phases, times the S
    of the baseline at that batch (``speed``, keys "1", "8", "inf"), so that the
    pooled ratio is the score's own first-order change. Normalized to sum 1."""
    keys = batch_keys(batch_sizes)
    contest = {b: WEIGHTS[k] for b, k in keys.items()}
    per_batch = {b: sum(1 for s in scenarios if s.batch_size == b) for b in batch_sizes}
    raw = {}
    for s in scenarios:
        b = s.batch_size
        s_b = (speed or {}).get(keys.get(b, ""), 100.0)
        raw[s.name] = contest.get(b, 0.0) * s_b / per_batch[b]
    total = math.fsum(raw.values())
    if not total > 0:
        raise ValueError("the score weights sum to 0")
    return {name: w / total for name, w in raw.items()}


def differences(candidate: Mapping[str, Sequence[float]],
                baseline: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """Per scenario, the log ratio of each round (the rounds both sides have)."""
    out = {}
    for name, c in candidate.items():
        b = baseline[name]
        n = min(len(c), len(b))
        out[name] = stats.log_ratios(c[:n], b[:n])
    return out


@dataclass(frozen=True)
class Level:
    """What a look decides at: the latency ``threshold`` (0.05: 5 %), the level of
    each of its tests, ``alpha_look`` (alpha split over the looks), and the ``test``
    (:data:`patchgate.stats.paired_t.TESTS`, the profile's)."""

    threshold: float
    alpha_look: float
    test: str = paired_t.SIGNED_RANK


def look(diffs: Mapping[str, Sequence[float]], weights: Mapping[str, float], level: Level,
         number: int, previous: Mapping[str, Decision] | None = None,
         items: Sequence[str] | None = None) -> dict[str, Decision]:
    """Decide every item after look ``number``. ``previous`` outcomes that were
    decisive are kept; ``items`` limits the family (default: the scenarios in
    ``weights`` and ``score``)."""
    threshold, alpha_look = level.threshold, level.alpha_look
    names = list(items) if items is not None else [*weights, SCORE]
    cmps = {}
    for name in names:
        d = (stats.pooled_differences(diffs, weights) if name == SCORE else diffs[name])
        cmps[name] = paired_t.compare(d, alpha_look, level.test)
    share = {n: (SCORE_SHARE if n == SCORE else (1 - SCORE_SHARE) / max(1, len(names) - 1))
             for n in names}
    if SCORE not in names:
        share = dict.fromkeys(names, 1.0)
    w = [share[n] for n in names]
    slower = stats.holm([cmps[n].p_slower for n in names], alpha_look, w)
    faster = stats.holm([cmps[n].p_faster for n in names], alpha_look, w)
    out = {}
    for i, name in enumerate(names):
        before = (previous or {}).get(name)
        if before is not None and before.decided:
            out[name] = before
            continue
        result = stats.outcome(cmps[name], threshold, slower[i], faster[i])
        out[name] = Decision(name, cmps[name], result, number, alpha_look)
    return out


def fewest_rounds(level: float, items: Sequence[str], test: str = paired_t.SIGNED_RANK
                  ) -> int:
    """The fewest paired rounds with which the strongest item of the family ``items`` can
    be significant at ``level`` (:func:`look`'s weighted Holm, first step): ``score``
    with its share when it is in the family, else a scenario with its equal share. The
    signed-rank test's smallest p of n rounds is 2^-n (every round one way)."""
    share = SCORE_SHARE if SCORE in items else 1 / max(1, len(items))
    return rounds_for(share * level, test)


def rounds_for(level: float, test: str = paired_t.SIGNED_RANK) -> int:
    """The fewest paired rounds (at least 2) whose ``test`` can reach ``level``: the
    signed-rank test's smallest p of n rounds is 2^-n (every round one way); the t-test
    reaches any level with rounds that agree closely enough, from
    :data:`~patchgate.stats.paired_t.T_MIN_ROUNDS` on."""
    if test == paired_t.T:
        return paired_t.T_MIN_ROUNDS
    n = 2
    while stats.signed_rank(range(1, n + 1)).p_greater > level and n < 64:
        n += 1
    return n


def pending(decisions: Mapping[str, Decision]) -> list[str]:
    """Items still undecided."""
    return [n for n, d in decisions.items() if not d.decided]


def slower(decisions: Mapping[str, Decision]) -> list[str]:
    return [n for n, d in decisions.items() if d.outcome == stats.SLOWER]
