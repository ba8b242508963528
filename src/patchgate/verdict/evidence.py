"""What the latency evidence shows: accepted on evidence, rejected on evidence, or
inconclusive; and, when inconclusive, what a re-run would need.

A change is **accepted** only when its score item is *shown* not slower (outcome
faster, equivalent or not slower: the interval's upper end below 1 + threshold)
against the current baseline, and against the fastest accepted state when that is
compared too. It is **rejected** when an item is slower in the first engine processes
and again in fresh ones. Anything else is **inconclusive**: the run could not tell, and
"not shown slower" is never read as "fine". On a noisy machine the honest answer is
"cannot tell yet".

For an inconclusive run, :func:`rounds_needed` estimates the rounds a re-run would need
at the noise this run measured (an interval's width shrinks as 1/sqrt(rounds)), and
:func:`noise` is the spread of the pooled per-round log ratios (score-weighted, robust
SD), which the report compares with the spread the calibration measured on this runner.
"""

from __future__ import annotations

import math

from .. import stats
from ..latency import decide

ACCEPTED, REJECTED, INCONCLUSIVE = "accepted", "rejected", "inconclusive"
MAX_ROUNDS = 1000  # beyond this, "the change sits at the threshold"


def status(lat) -> str:
    """The latency part of the verdict, against every baseline compared (the current
    one, and the fastest accepted state when it was compared): accepted, rejected or
    inconclusive."""
    finals = {c: {item: lat.final(c, item) for item in per}
              for c, per in lat.decisions.items()}
    if any(out == stats.SLOWER for per in finals.values() for out in per.values()):
        return REJECTED
    if all(per.get(decide.SCORE) in stats.SHOWN_NOT_SLOWER for per in finals.values()):
        return ACCEPTED
    return INCONCLUSIVE


def noise(lat, comparison: str | None = None) -> float | None:
    """Robust SD of the score-weighted per-round log ratios, candidate vs ``comparison``
    (the first processes' rounds): the run's noise, on the scale of the score. By
    default against the current baseline, or against the reference where the candidate
    is the current baseline (one engine: its rounds compared with themselves say
    nothing). None where the two are one engine (every round's ratio exactly 1) or too
    few rounds were kept."""
    if comparison is None:
        comparison = "reference" if lat.same_as_current else "current"
    if comparison not in lat.samples or not lat.weights:
        return None
    diffs = decide.differences(lat.samples["candidate"], lat.samples[comparison])
    pooled = stats.pooled_differences(diffs, lat.weights)
    if len(pooled) < 3 or not any(pooled):
        return None
    return stats.robust_sd(pooled)


def rounds_needed(item: dict, threshold: float) -> int | None:
    """Rounds a re-run would need to decide the pooled ``item`` (a verdict's score item:
    ratio, interval, rounds) at the noise it measured: the interval must shrink to the
    distance between the estimate and the nearer boundary it has to clear (1 + t to show
    not slower, 1 to show slower). None: the change sits at the threshold (more than
    :data:`MAX_ROUNDS`) or nothing can be said (an unbounded interval)."""
    lo, hi, ratio, n = item.get("ci_low"), item.get("ci_high"), item["ratio"], item["rounds"]
    if not (lo and hi and ratio > 0 and n):
        return None
    half = (math.log(hi) - math.log(lo)) / 2
    bound = math.log(1 + threshold)
    est = math.log(ratio)
    gap = bound - est if est < bound else est  # to clear 1 + t from below, or 1 from above
    if gap <= 0 or half <= 0:
        return None
    need = math.ceil(n * (half / gap) ** 2)
    return need if need <= MAX_ROUNDS else None


def sentences(block: dict, compared_with: str, calibrated: float | None = None
              ) -> list[str]:
    """Why a run is inconclusive, in words, from the verdict's latency block."""
    th = block["threshold"]
    out = []
    for key, what in (("score", compared_with), ("best", "fastest accepted state")):
        item = block.get(key)
        if not item or item["outcome"] in stats.SHOWN_NOT_SLOWER:
            continue
        ci = (f"{item['ci_low']:.3f}-{item['ci_high']:.3f}" if item.get("ci_low")
              and item.get("ci_high") else "unbounded")
        need = rounds_needed(item, th)
        rerun = (f"a re-run would need about {need} rounds at this noise (--rounds "
                 f"{math.ceil(need / max(1, block['max_looks']))} with "
                 f"{block['max_looks']} looks)" if need else
                 "the change sits at the threshold: no number of rounds will decide it "
                 "soon")
        out.append(f"latency not shown within the {100 * th:g} % threshold of the "
                   f"{what}: the score's ratio is {item['ratio']:.3f} (CI {ci}, "
                   f"{item['rounds']} rounds, {item['outcome']}); {rerun}")
    mine = block.get("noise")
    if mine and calibrated:
        factor = mine / calibrated
        if factor > 1.5:
            out.append(f"this machine was {factor:.1f}x noisier than when calibrated "
                       f"({100 * mine:.2f} % vs {100 * calibrated:.2f} % a round): rerun "
                       "on a quiet runner")
    return out
