"""Checks and score: measurements in, the judgement out (no I/O, no printing).

- accuracy: candidate vs the reference (the unpatched model), paired on items;
  rejected below ``thresholds.accuracy_reject`` (0.99) of the reference;
- latency: candidate vs the current baseline, from paired rounds
  (:mod:`patchgate.latency.looks`, :mod:`patchgate.latency.decide`): rejected if a scenario or the
  pooled score is *slower* (significant after Holm AND beyond ``thresholds.latency``)
  in the first engine processes and again in fresh ones; also rejected if the score
  is slower than the fastest accepted state's (``best``), so a chain of small
  slowdowns cannot pass one by one;
- score: S1, S8, Sinf = 100 x geometric mean over {prefill, decode} of
  reference time / candidate time at batch 1, 8 and the largest batch;
  score = (0.4 S1 + 0.3 S8 + 0.3 Sinf) x C.

:func:`judge` gives the checks, reasons and score; the document around them is put
together once by :func:`patchgate.verdict.document.assemble`. The latency part alone
(accepted, rejected, inconclusive) is :func:`patchgate.verdict.evidence.status`, what
calibration asks of every planted run.
"""

from __future__ import annotations

import math

from .. import stats
from ..guard.decision import AccuracyDecision
from ..latency import decide
from ..latency.result import LatencyResult
from ..profile import Profile
from ..stats.score import batch_keys
from . import evidence
from .accuracy import accuracy_reasons
from .document import Confirmation, Latency, Pooled, Row, Verdict

MARKS = {stats.SLOWER: "+", stats.FASTER: "-", stats.EQUIVALENT: "=", stats.NOT_SLOWER: "≤",
         stats.UNDECIDED: "~"}


def _num(x: float) -> float | None:
    """JSON has no infinity: an unbounded interval end or an undetectable change is null."""
    return x if math.isfinite(x) else None


def _confirmation(lat: LatencyResult, comp: str, item: str) -> Confirmation | None:
    d = lat.again(comp, item)
    if d is None:
        return None
    c = d.comparison
    out: Confirmation = {"ratio": c.ratio, "ci_low": _num(c.ci_low),
                         "ci_high": _num(c.ci_high), "p_value": c.p_slower,
                         "outcome": d.outcome, "rounds": c.n}
    samples = lat.again_samples(comp, item)
    if samples is not None:
        out["samples_s"] = samples
    return out


def _alone(lat: LatencyResult) -> dict | None:
    """The one scenario the fresh processes measured alone first (``confirm_strongest``)."""
    a = lat.alone
    if a is None:
        return None
    c = a.decision.comparison
    return {"item": a.item, "ratio": c.ratio, "p_value": c.p_slower,
            "outcome": a.decision.outcome, "rounds": a.rounds, "alpha": a.alpha}


def _final(lat: LatencyResult, comp: str, item: str) -> str:
    out = lat.final(comp, item)
    return out


def rows(lat: LatencyResult) -> list[Row]:
    """One :class:`Row` per scenario, candidate vs the current baseline."""
    out: list[Row] = []
    for s in lat.scenarios:
        d = lat.decisions["current"][s.name]
        c = d.comparison
        final = _final(lat, "current", s.name)
        cand = lat.samples["candidate"][s.name]
        out.append(s.record() | {
            "median_s": stats.median(cand),
            "baseline_median_s": stats.median(lat.samples["current"][s.name]),
            "reference_median_s": stats.median(lat.samples["reference"][s.name]),
            "ratio": c.ratio, "ci_low": _num(c.ci_low), "ci_high": _num(c.ci_high),
            "p_value": c.p_slower, "alpha": d.alpha, "outcome": final,
            "mark": MARKS[final], "regressed": final == stats.SLOWER,
            "improved": final == stats.FASTER, "detectable": _num(c.detectable),
            "rounds": len(cand), "looks": d.look,
            "samples_s": {"candidate": list(cand),
                          "current": list(lat.samples["current"][s.name])},
            "confirmation": _confirmation(lat, "current", s.name)})
    return out


def pooled(lat: LatencyResult, comp: str) -> Pooled | None:
    """The score item against ``comp`` ("current" or "best"); None if not compared."""
    d = lat.decisions.get(comp, {}).get(decide.SCORE)
    if d is None:
        return None
    c = d.comparison
    return {"against": comp, "ratio": c.ratio, "ci_low": _num(c.ci_low),
            "ci_high": _num(c.ci_high), "p_value": c.p_slower,
            "outcome": _final(lat, comp, decide.SCORE), "score_change": 1 / c.ratio - 1,
            "detectable": _num(c.detectable), "rounds": c.n,
            "confirmation": _confirmation(lat, comp, decide.SCORE)}


def latency_block(lat: LatencyResult, profile: Profile) -> Latency:
    score = pooled(lat, "current")
    assert score is not None
    return {"threshold": profile.thresholds.latency, "alpha": profile.thresholds.alpha,
            "alpha_look": lat.alpha_look, "max_looks": lat.max_looks, "looks": lat.looks,
            "confirm_looks": lat.confirm_looks, "confirm_rounds": lat.confirm_rounds,
            "confirm_alpha": lat.confirm_alpha, "pairing": "by round", "test": profile.test,
            "weights": lat.weights, "score": score, "best": pooled(lat, "best"),
            "noise": evidence.noise(lat), "alone": _alone(lat),
            "inputs": "fresh token ids every round (from the profile's seed), the same for "
                      "every configuration within a round"}


def speed_scores(rows: list[Row], batch_sizes: tuple[int, ...]) -> dict[str, float]:
    """S per batch size: keys "1", "8", "inf" (the largest batch stands for unlimited)."""
    out = {}
    for b, key in batch_keys(batch_sizes).items():
        sel = [r for r in rows if r["batch_size"] == b]
        out[key] = stats.speed_score([r["reference_median_s"] for r in sel],
                                     [r["median_s"] for r in sel])
    return out


def _again(c: Confirmation | None, alone: dict | None = None, item: str = "") -> str:
    """What the fresh processes found for ``item``; where they measured one scenario
    alone and it was slower again (``alone``), which item the rejection stands on and
    which were not re-measured."""
    stands = bool(alone) and alone["outcome"] == stats.SLOWER
    if not c:
        return "; not re-measured in fresh processes" if stands else ""
    how = ", alone" if stands and alone["item"] == item else ""
    return (f"; again in fresh engine processes{how}: {100 * (c['ratio'] - 1):+.1f} %, "
            f"p={c['p_value']:.2g}" + ("; the rejection stands on it" if how else ""))


def _interval(x: dict) -> str:
    lo, hi = x.get("ci_low"), x.get("ci_high")
    lo_s = "0" if lo is None else f"{lo:.3f}"
    return f"{lo_s}-{hi:.3f}" if hi is not None else f"above {lo_s}"


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten", "eleven", "twelve")


def together(n: int) -> str:
    """How the pooled score item names the scenarios it pools: "the six scenarios
    together" (the static set), "the three scenarios together" (serving)."""
    return f"the {_WORDS[n] if n < len(_WORDS) else n} scenarios together"


def _pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def latency_reasons(scenario_rows: list[Row], block: Latency, compared_with: str
                    ) -> list[str]:
    """One sentence per latency check that failed."""
    th = block["threshold"]
    out = []
    score = block["score"]
    if score["outcome"] == stats.SLOWER:
        # the scenarios that carry it, in words: those whose interval lies wholly beyond
        # the threshold, though not tested alone (a slower score ends the looks)
        carry = [f"{r['name']} {_pct(r['ratio'])}" for r in sorted(
            scenario_rows, key=lambda r: -r["ratio"]) if not r["regressed"]
            and (r.get("ci_low") or 0) > 1 + th]
        out.append(
            f"the score is {-100 * score['score_change']:.1f} % lower than the "
            f"{compared_with}'s: {together(len(scenario_rows))} are {_pct(score['ratio'])} "
            f"slower (score-weighted, paired by round; {100 * (1 - 2 * block['alpha_look']):.1f}"
            f" % CI {_interval(score)}, p={score['p_value']:.2g})"
            f", beyond the {100 * th:g} % threshold"
            f"{_again(score['confirmation'], block.get('alone'), 'score')}"
            + (f"; the intervals of {', '.join(carry)} lie wholly beyond it"
               if carry else ""))
    for r in scenario_rows:
        if r["regressed"]:
            out.append(
                f"{r['name']} is {100 * (r['ratio'] - 1):.1f} % slower than the "
                f"{compared_with} ({1000 * r['median_s']:.2f} ms vs "
                f"{1000 * r['baseline_median_s']:.2f} ms, p={r['p_value']:.2g}, "
                f"{100 * (1 - 2 * r['alpha']):.1f} % CI of the ratio "
                f"{_interval(r)}), beyond the {100 * th:g} % "
                f"threshold{_again(r['confirmation'], block.get('alone'), r['name'])}")
    best = block["best"]
    if best and best["outcome"] == stats.SLOWER:
        out.append(
            f"the score is {-100 * best['score_change']:.1f} % lower than the fastest "
            f"accepted state's ({_pct(best['ratio'])} slower, CI {_interval(best)}): "
            f"small slowdowns have added up beyond the "
            f"{100 * th:g} % threshold{_again(best['confirmation'])}")
    return out


def judge(profile: Profile, lat: LatencyResult, accuracy: dict, decision: AccuracyDecision,
          *, compared_with: str, allow_slower: str | None = None,
          calibrated_noise: float | None = None) -> Verdict:
    """The judgement (:mod:`.evidence`): rejected when the guard's accuracy ``decision``
    fails or an item is confirmed slower; accepted when accuracy passes and the score is
    shown not slower; inconclusive otherwise. Reasons in words; S, C and the score
    (``accuracy``: the block of :func:`.accuracy.accuracy_block`). ``allow_slower`` (a
    maintainer's reason) lets the latency checks pass: what they found is kept under
    ``allowed_slower``, never the accuracy rule. ``calibrated_noise`` (the runner's
    measured noise) lets an inconclusive run say how much noisier this one was.
    :func:`patchgate.verdict.document.assemble` makes the document of it."""
    reasons = accuracy_reasons(accuracy, decision)
    scenario_rows = rows(lat)
    block = latency_block(lat, profile)
    slow = latency_reasons(scenario_rows, block, compared_with)
    allowed = None
    if allow_slower is not None:
        allowed = {"reason": allow_slower, "slowdowns": slow}
    else:
        reasons += slow
    if reasons:
        status = evidence.REJECTED
    elif allowed is not None or evidence.status(lat) == evidence.ACCEPTED:
        status = evidence.ACCEPTED
    else:
        status = evidence.INCONCLUSIVE
        reasons = evidence.sentences(block, compared_with, calibrated_noise)
    s = speed_scores(scenario_rows, lat.batch_sizes or profile.batch_sizes)
    c = accuracy["C"]
    out: Verdict = {
        "verdict": status,
        "reasons": reasons,
        "score": stats.score(s["1"], s["8"], s["inf"], c),
        "S": s,
        "C": c,
        "accuracy": accuracy,
        "scenarios": scenario_rows,
        "latency": block,
    }
    if allowed is not None:
        out["allowed_slower"] = allowed
    return out


def _alone_note(lat: LatencyResult) -> str:
    """What the fresh processes found for the one scenario they measured alone first."""
    a = lat.alone
    assert a is not None
    c = a.decision.comparison
    head = (f"the fresh engine processes measured {a.item} alone first ({a.rounds} rounds, "
            f"its test at {a.alpha:.3g}): {100 * (c.ratio - 1):+.1f} %, p={c.p_slower:.2g}, "
            f"{a.decision.outcome}")
    if not a.confirmed:
        return head + "; then every item found slower"
    rest = lat.not_remeasured()
    return head + ("; the rejection stands on it" + (
        f"; {', '.join(rest)} slower in the first processes only (not re-measured)"
        if rest else ""))


def latency_notes(lat: LatencyResult) -> list[str]:
    """Sentences about the latency result beside its checks: where the first processes
    and the fresh ones disagreed, and a candidate compared with itself."""
    out = []
    for comp, decisions in lat.decisions.items():
        for item, d in decisions.items():
            if not lat.unconfirmed(comp, item):
                continue
            again = lat.again(comp, item)
            what = "" if again is None else (
                f" but {100 * (again.comparison.ratio - 1):+.1f} % in fresh ones "
                f"({again.outcome}, p={again.comparison.p_slower:.2g})")
            against = "the fastest accepted state" if comp == "best" else "the current baseline"
            out.append(
                f"{item} vs {against}: {100 * (d.comparison.ratio - 1):+.1f} % in the first "
                f"engine processes (p={d.comparison.p_slower:.2g}){what}: not confirmed, "
                "not counted as a slowdown")
    if lat.alone is not None:
        out.append(_alone_note(lat))
    if lat.same_as_current:
        out.append("the candidate is the current baseline (no new or changed patches): "
                   "its latency is compared with itself")
    return out
