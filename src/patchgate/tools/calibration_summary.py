"""A calibration's runs summed up: per condition and planted kind, how many runs were
rejected, inconclusive and accepted (each with an exact 95 % interval), the A/A noise,
the wall time and the pairing gain (:func:`summarize`); what ``patchgate calibrate``
writes as the file's ``summary``. Also how long a run of a kind is expected to take
(:func:`expected_s`), what ``--time-limit`` goes by.

Pure: run records in, numbers out.
"""

from __future__ import annotations

from .. import stats
from ..verdict import evidence


def kinds_of(slowdowns: list[float]) -> list[float]:
    return [0.0, *slowdowns]


def label(fraction: float) -> str:
    return "A/A" if fraction == 0 else f"{100 * fraction:g} %"


def outcome_of(run: dict) -> str:
    """A run's outcome; runs of the first calibrations knew only rejected or not."""
    return run.get("outcome") or (evidence.REJECTED if run["rejected"] else evidence.ACCEPTED)


def _counts(mine: list[dict]) -> dict:
    out = {"runs": len(mine)}
    for what in (evidence.REJECTED, evidence.INCONCLUSIVE, evidence.ACCEPTED):
        k = sum(outcome_of(r) == what for r in mine)
        r = stats.rate(k, len(mine))
        out[what] = {"count": k, "rate": r.rate, "low": r.low, "high": r.high}
    return out


def summarize(runs: list[dict], slowdowns: list[float]) -> dict:
    """Per condition (quiet, load) and kind: how many runs were rejected, inconclusive
    and accepted, each with an exact 95 % interval; the A/A noise; wall time; the
    pairing gain. ``kinds`` (the quiet condition's rejections) is kept for older readers."""
    out: dict = {"conditions": {}, "noise": {}}
    for cond in sorted({r.get("condition", "quiet") for r in runs}):
        per: dict = {}
        for fraction in kinds_of(slowdowns):
            mine = [r for r in runs if r["planted"] == fraction
                    and r.get("condition", "quiet") == cond]
            if mine:
                per[label(fraction)] = {"planted": fraction, **_counts(mine),
                                         "median_score_ratio": stats.median(
                                             [x["score_ratio"] for x in mine])}
        out["conditions"][cond] = per
        noises = [r["noise"] for r in runs if r["planted"] == 0 and r.get("noise")
                  and r.get("condition", "quiet") == cond]
        out["noise"][cond] = stats.median(noises) if noises else None
    quiet = out["conditions"].get("quiet") or next(iter(out["conditions"].values()), {})
    out["kinds"] = {label: {"planted": k["planted"], "rejected": k["rejected"]["count"],
                            "runs": k["runs"], "rate": k["rejected"]["rate"],
                            "low": k["rejected"]["low"], "high": k["rejected"]["high"],
                            "median_score_ratio": k["median_score_ratio"]}
                    for label, k in quiet.items()}
    walls = [r["wall_s"] for r in runs]
    out["wall_s_median"] = stats.median(walls) if walls else None
    out["timings_s_median"] = _timings(runs, slowdowns)
    classes = sorted({r["node"]["class"] for r in runs if r.get("node")})
    if len(classes) > 1:  # spread over nodes of several hardware classes: rates per class
        out["classes"] = {c: summarize([r for r in runs if (r.get("node") or {}).get("class")
                                        == c], slowdowns)["conditions"] for c in classes}
    gains = {}
    for name in (runs[0]["ci_widths"] if runs else {}):
        ratios = [r["ci_widths"][name]["unpaired"] / r["ci_widths"][name]["paired"]
                  for r in runs if r["ci_widths"][name]["paired"]
                  and r["ci_widths"][name]["unpaired"] is not None]
        if ratios:
            gains[name] = stats.median(ratios)
    out["unpaired_over_paired_ci_width"] = gains
    return out


def _timings(runs: list[dict], slowdowns: list[float]) -> dict:
    """Per kind, the median seconds of each phase of a run (engines, latency,
    confirm_engines, confirm, close) over the runs that recorded them (a phase a run
    did not enter counts as 0 s: a median confirmation of 0 s says most runs had none)."""
    out = {}
    for fraction in kinds_of(slowdowns):
        mine = [r["timings_s"] for r in runs if r["planted"] == fraction and r.get("timings_s")]
        if mine:
            phases = [p for p in _ORDER if any(p in t for t in mine)]
            out[label(fraction)] = {p: stats.median([t.get(p, 0.0) for t in mine])
                                    for p in phases}
    return out


_ORDER = ("engines", "latency", "confirm_engines", "confirm", "close")


def expected_s(fraction: float, cond: str, finished: list[dict]) -> float | None:
    """How long a run of planted ``fraction`` under ``cond`` is expected to take: the
    longest finished run of that kind (a planted run confirms in fresh engines, an A/A
    run seldom does), else the longest of any kind; None when none has finished."""
    same = [r["wall_s"] for r in finished
            if r["planted"] == fraction and r["condition"] == cond]
    known = same or [r["wall_s"] for r in finished]
    return max(known) if known else None
