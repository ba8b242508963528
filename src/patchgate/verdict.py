"""Checks and score: measurements in, a verdict dict out (no I/O, no printing).

- accuracy: candidate vs the reference (the unpatched model), paired on items;
  rejected below ``thresholds.accuracy_reject`` (0.99) of the reference;
- latency: candidate vs the current baseline (the accepted patches), per scenario;
  rejected where a scenario is slower by more than ``thresholds.latency`` AND the
  difference is significant (:func:`patchgate.stats.compare_latency`) at
  ``alpha / number of scenarios`` (Bonferroni: six tests per verdict);
- score: S1, S8, Sinf = 100 x geometric mean over {prefill, decode} of
  reference time / candidate time at batch 1, 8 and the largest batch;
  score = (0.4 S1 + 0.3 S8 + 0.3 Sinf) x C.

The verdict dict is what ``--json`` writes (``VERDICT_SCHEMA_VERSION``) and what
the reports render.
"""

from __future__ import annotations

from . import stats
from .config import Profile
from .scenarios import Scenario

VERDICT_SCHEMA_VERSION = 1


def compare_scenarios(scenarios: list[Scenario], candidate: dict[str, list[float]],
                      baseline: dict[str, list[float]], reference: dict[str, list[float]],
                      profile: Profile, looks: dict[str, int] | None = None) -> list[dict]:
    """One row per scenario. ``looks``: how many times a scenario's samples were
    tested (more rounds were measured after an inconclusive look)."""
    th = profile.thresholds
    rows = []
    for s in scenarios:
        # Six scenarios are six tests, and a scenario measured again after an
        # inconclusive look was tested more than once: Bonferroni over both keeps the
        # chance that a change with no effect is rejected for noise at about alpha.
        n_looks = (looks or {}).get(s.name, 1)
        alpha = th.alpha / (len(scenarios) * n_looks)
        c, b, r = candidate[s.name], baseline[s.name], reference[s.name]
        cmp = stats.compare_latency(c, b, threshold=th.latency, alpha=alpha,
                                    confidence=1 - alpha, seed=profile.seed)
        rows.append(s.record() | {
            "median_s": stats.median(c),
            "baseline_median_s": stats.median(b),
            "reference_median_s": stats.median(r),
            "ratio": cmp.ratio,
            "ci_low": cmp.ci_low,
            "ci_high": cmp.ci_high,
            "p_value": cmp.p_value,
            "significant": cmp.significant,
            "regressed": cmp.regressed,
            "improved": cmp.improved,
            "mark": cmp.mark,
            "detectable": cmp.detectable,
            "rounds": len(c),
            "looks": n_looks,
            "alpha": alpha,
        })
    return rows


def inconclusive_slowdowns(rows: list[dict]) -> list[str]:
    """Scenarios slower than the threshold without significance: worth more rounds."""
    return [r["name"] for r in rows if r["mark"] == "~" and r["ratio"] > 1]


def speed_scores(rows: list[dict], batch_sizes: tuple[int, ...]) -> dict[str, float]:
    """S per batch size: keys "1", "8", "inf" (the largest batch stands for unlimited)."""
    out = {}
    for b, key in zip(batch_sizes, ("1", "8", "inf"), strict=False):
        sel = [r for r in rows if r["batch_size"] == b]
        out[key] = stats.speed_score([r["reference_median_s"] for r in sel],
                                     [r["median_s"] for r in sel])
    return out


def accuracy_block(reference_items: list[float], candidate_items: list[float],
                   reference: dict, candidate: dict, profile: Profile) -> dict:
    cmp = stats.compare_accuracy(reference_items, candidate_items, seed=profile.seed)
    per_task = {
        t: {"metric": r["metric"], "reference": r["value"],
            "candidate": candidate["tasks"][t]["value"],
            "ratio": (candidate["tasks"][t]["value"] / r["value"]) if r["value"] else 1.0}
        for t, r in sorted(reference["tasks"].items())
    }
    th = profile.thresholds
    return {
        "reference": cmp.reference, "candidate": cmp.candidate, "ratio": cmp.ratio,
        "ci_low": cmp.ci_low, "ci_high": cmp.ci_high,
        "flipped_to_wrong": cmp.flipped_to_wrong, "flipped_to_right": cmp.flipped_to_right,
        "p_value": cmp.p_value, "n": cmp.n, "per_task": per_task,
        "C": stats.correctness_coefficient(cmp.ratio, th.c_low, th.c_high),
        "threshold": th.accuracy_reject,
    }


def task_notes(accuracy: dict, limit: float) -> list[str]:
    """Tasks that fell below ``limit`` of the reference although the rule, which holds
    the suite's mean, may pass: worth a look, not a rejection (a task of 100 items
    moves by 1 % per item)."""
    return [f"task {t} is at {100 * v['ratio']:.2f} % of the reference "
            f"({v['candidate']:.3f} vs {v['reference']:.3f}); the {100 * limit:.0f} % rule "
            "applies to the mean over the tasks"
            for t, v in sorted(accuracy.get("per_task", {}).items()) if v["ratio"] < limit]


def _confirmed(row: dict) -> str:
    c = row.get("confirmation")
    if not c:
        return ""
    return (f"; again in fresh engine processes: {100 * (c['ratio'] - 1):.1f} % slower, "
            f"p={c['p_value']:.2g}")


def decide(profile: Profile, rows: list[dict], accuracy: dict, *, compared_with: str
           ) -> dict:
    """The verdict: accepted unless accuracy or a latency check fails; reasons in words."""
    th = profile.thresholds
    reasons = []
    if accuracy["ratio"] < th.accuracy_reject:
        reasons.append(
            f"accuracy is {100 * accuracy['ratio']:.1f} % of the reference "
            f"({accuracy['candidate']:.4f} vs {accuracy['reference']:.4f}; "
            f"{accuracy['flipped_to_wrong']} items right->wrong, "
            f"{accuracy['flipped_to_right']} wrong->right, McNemar p={accuracy['p_value']:.3g})"
            f", below the {100 * th.accuracy_reject:.0f} % limit")
    for r in rows:
        if r["regressed"]:
            reasons.append(
                f"{r['name']} is {100 * (r['ratio'] - 1):.1f} % slower than the {compared_with} "
                f"({1000 * r['median_s']:.2f} ms vs {1000 * r['baseline_median_s']:.2f} ms, "
                f"p={r['p_value']:.2g} < {r['alpha']:.3g}, {100 * (1 - r['alpha']):.1f} % CI of "
                f"the ratio {r['ci_low']:.3f}-{r['ci_high']:.3f})"
                f", beyond the {100 * th.latency:.0f} % threshold{_confirmed(r)}")
    s = speed_scores(rows, profile.batch_sizes)
    c = accuracy["C"]
    return {
        "schema_version": VERDICT_SCHEMA_VERSION,
        "verdict": "rejected" if reasons else "accepted",
        "reasons": reasons,
        "score": stats.score(s["1"], s["8"], s["inf"], c),
        "S": s,
        "C": c,
        "accuracy": accuracy,
        "scenarios": rows,
    }


def error_verdict(profile_name: str, message: str) -> dict:
    """The verdict document of a run that ended in an error (no numbers)."""
    return {"schema_version": VERDICT_SCHEMA_VERSION, "profile": profile_name,
            "verdict": "error", "reasons": [message], "score": None, "S": None, "C": None,
            "accuracy": None, "scenarios": []}
