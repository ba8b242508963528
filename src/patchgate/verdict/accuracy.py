"""The verdict's accuracy block: the guard's decision and the paired statistics beside it.

The decision itself is the guard's (:class:`patchgate.guard.decision.AccuracyDecision`:
pass or reject against the profile's limit, read once); nothing here decides again. What
this module adds is what a reviewer reads beside it: both means and their ratio with a
paired bootstrap CI, McNemar's test on the flipped items, each task's primary metric and
the others, the contest's C, and the flipped items themselves.
"""

from __future__ import annotations

from .. import stats
from ..guard.base import Outcome
from ..guard.decision import AccuracyDecision
from ..guard.results import paired_scores
from ..profile import Profile

FLIPS_KEPT = 20  # flipped items in the verdict; all of them go to the flips file
CLIP = 300  # characters of a flipped item's texts in the verdict (a prompt's end)


def block_of(found: Outcome, profile: Profile, flips: list[dict] | None = None) -> dict:
    """The accuracy block of a guard's outcome, in one step: the paired statistics, the
    decision, where the reference's result came from, the guard's mode and, for the
    sequential guard, how it got to its decision."""
    out = accuracy_block(*paired_scores(found.reference, found.candidate), found.reference,
                         found.candidate, profile, found.decision, flips=flips)
    out["reference_source"] = found.source
    if found.sequential:
        out["sequential"] = found.sequential
    if found.mode:
        out["mode"] = found.mode
    return out


def accuracy_block(reference_items: list[float], candidate_items: list[float],
                   reference: dict, candidate: dict, profile: Profile,
                   decision: AccuracyDecision, *, flips: list[dict] | None = None) -> dict:
    """Paired accuracy vs the reference, with the guard's ``decision``. ``per_task``: each
    task's primary metric and filter (what the rule reads) and ``others`` (the other
    filters and metrics, shown, not judged). ``flips``: the first FLIPS_KEPT items judged
    right in one run and wrong in the other (both outputs, the target, the prompt's end);
    ``flips_total`` counts them all."""
    cmp = stats.compare_accuracy(reference_items, candidate_items, seed=profile.seed)
    per_task = {}
    for t, r in sorted(reference["tasks"].items()):
        c = candidate["tasks"][t]
        theirs = {(o["metric"], o["filter"]): o["value"] for o in c.get("others", [])}
        per_task[t] = {
            "metric": r["metric"], "filter": r.get("filter", "none"), "reference": r["value"],
            "candidate": c["value"], "ratio": (c["value"] / r["value"]) if r["value"] else 1.0,
            "others": [{"metric": o["metric"], "filter": o["filter"], "reference": o["value"],
                        "candidate": theirs[(o["metric"], o["filter"])]}
                       for o in r.get("others", []) if (o["metric"], o["filter"]) in theirs]}
    th = profile.thresholds
    kept = [{k: _clip(v, tail=k == "prompt") for k, v in f.items()}
            for f in (flips or [])[:FLIPS_KEPT]]
    return {
        "reference": cmp.reference, "candidate": cmp.candidate, "ratio": cmp.ratio,
        "ci_low": cmp.ci_low, "ci_high": cmp.ci_high,
        "flipped_to_wrong": cmp.flipped_to_wrong, "flipped_to_right": cmp.flipped_to_right,
        "p_value": cmp.p_value, "n": cmp.n, "per_task": per_task,
        "C": stats.correctness_coefficient(cmp.ratio, th.c_low, th.c_high),
        "threshold": decision.limit, **decision.fields(),
        "flips": kept, "flips_total": len(flips or []),
    }


def _clip(text, tail: bool = False):
    """A long text cut to CLIP characters: a prompt's end, an output's start."""
    if not isinstance(text, str) or len(text) <= CLIP:
        return text
    return "..." + text[-CLIP:] if tail else text[:CLIP] + "..."


def _early(decision: AccuracyDecision) -> str:
    """`` on 96 of 600 items (full-set interval 90.1 % to 96.0 %)`` where the guard
    stopped early."""
    if not decision.early:
        return ""
    where = f" on {decision.items} of {decision.total} items"
    if decision.low is not None and decision.high is not None:
        where += (f" (full-set interval {100 * decision.low:.1f} % to "
                  f"{100 * decision.high:.1f} %)")
    return where


def accuracy_reasons(accuracy: dict, decision: AccuracyDecision) -> list[str]:
    """The reason a change fails on accuracy (none if the decision passes)."""
    if not decision.fails:
        return []
    return [f"accuracy is {100 * accuracy['ratio']:.1f} % of the reference "
            f"({accuracy['candidate']:.4f} vs {accuracy['reference']:.4f}; "
            f"{accuracy['flipped_to_wrong']} items right->wrong, "
            f"{accuracy['flipped_to_right']} wrong->right, McNemar p={accuracy['p_value']:.3g})"
            + _early(decision) + f", below the {100 * decision.limit:.0f} % limit"]


def task_notes(accuracy: dict, decision: AccuracyDecision) -> list[str]:
    """Tasks that fell below the limit of the reference although the rule, which holds
    the suite's mean, may pass: worth a look, not a rejection (a task of 100 items moves
    by 1 % per item)."""
    limit = decision.limit
    return [f"task {t} is at {100 * v['ratio']:.2f} % of the reference "
            f"({v['candidate']:.3f} vs {v['reference']:.3f}); the {100 * limit:.0f} % rule "
            "applies to the mean over the tasks"
            for t, v in sorted(accuracy.get("per_task", {}).items()) if v["ratio"] < limit]
