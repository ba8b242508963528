"""Trend plot: score and latency per logged change, for the README and PR artifacts.

    patchgate plot --profile h200-default               # -> docs/trend-h200-default.png
    patchgate plot --profile h200-default --verdict verdict.json --out trend.png

Reads ``baselines/<profile>/history.jsonl`` (one line per logged change, written by
the gate with ``--accept`` / ``--record``) and draws two panels over the changes:

- top: the score of each change (accepted ``o``, rejected ``x``), the score of the
  accepted state as a step line, and the reference's 100;
- bottom: each scenario's median latency relative to the reference's, measured side
  by side in the same run (below 1.0: faster than the unpatched model).

The first point is the reference (score 100, every ratio 1.0). Without a history,
``current.json``'s ``extra`` (if any) is the one change shown. ``--verdict`` adds a
verdict JSON (e.g. a pull request's run) as the last point, marked "this change".
Where the score of the accepted states shifted (E-divisive over the history,
:func:`patchgate.store.history.change_points`), a dotted line marks the first change after
the shift in both panels; a dash-dotted line marks where the model files or the task
data changed (the records' workload fingerprints differ): scores across it are not
comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PatchgateError
from ..store import history as hist
from ..store.baselines import BaselineStore

SCENARIO_ORDER = ("prefill_b1", "prefill_b8", "prefill_b64", "decode_b1", "decode_b8",
                  "decode_b64")
MAX_LABEL = 22  # characters of a patch slug shown on the x axis
MAX_ANNOTATED = 15  # above this many points, scores are not written next to them
MAX_FULL_LABELS = 12  # above this many points, the x axis shows patch numbers only
MAX_TICKS = 40
OFF_SCALE = 80.0  # scores below this (C < 1: accuracy lost) sit on the panel's floor
STYLES = {  # verdict -> marker, colour, legend label
    "reference": ("s", "0.3", "reference"),
    "accepted": ("o", "tab:green", "accepted"),
    "rejected": ("X", "tab:red", "rejected"),
    "inconclusive": ("P", "tab:orange", "inconclusive"),
    "candidate": ("D", "tab:purple", "this change"),
}


@dataclass
class Point:
    """One change on the x axis."""

    label: str
    verdict: str  # "reference" | "accepted" | "rejected" | "candidate"
    score: float
    ratios: dict[str, float] = field(default_factory=dict)  # scenario -> median / reference


def short_label(new_patches: list[str]) -> str:
    """``0003-fp8-kv-cache.py`` -> ``0003 fp8-kv-cache``; several -> ``0003+0004``."""
    if not new_patches:
        return "re-run"
    stems = [Path(n).stem for n in new_patches]
    if len(stems) > 1:
        return "+".join(s.split("-", 1)[0] for s in stems)
    number, _, slug = stems[0].partition("-")
    slug = slug if len(slug) <= MAX_LABEL else slug[:MAX_LABEL - 1] + "…"
    return f"{number} {slug}".strip()


def point_from(record: dict, verdict: str | None = None, label: str | None = None) -> Point:
    """A point from a history record or a verdict dict (both carry the same fields;
    a record's scenarios are ``{name: {...}}``, a verdict's a list of rows)."""
    scenarios = record.get("scenarios") or {}
    rows = scenarios.items() if isinstance(scenarios, dict) else (
        (row["name"], row) for row in scenarios)
    ratios = {name: s["median_s"] / s["reference_median_s"]
              for name, s in rows if s.get("reference_median_s")}
    return Point(label or short_label(record.get("new_patches") or []),
                 verdict or record["verdict"], float(record["score"]), ratios)


def read_history(path: Path) -> list[dict]:
    """The records of a history file (:func:`patchgate.store.history.read`)."""
    return hist.read(path)


def workload_marks(history: list[dict]) -> list[int]:
    """Point indices (the reference is 0) of the first change measured on other model
    files or task data than the change before it (a retrained model, regenerated
    tasks): scores on either side are not comparable."""
    marks = []
    for i in range(1, len(history)):
        a, b = history[i - 1].get("workload"), history[i].get("workload")
        if a and b and a != b:
            marks.append(1 + i)
    return marks


def drift_marks(history: list[dict]) -> list[int]:
    """Point indices (the reference is 0) where a change point in the accepted score
    begins."""
    kept = [i for i, r in enumerate(history) if r in hist.kept(history)]
    return [1 + kept[cp["index"]] for cp in hist.change_points(history)]


def trend_points(history: list[dict], current: dict | None = None,
                 reference: dict | None = None, verdict: dict | None = None) -> list[Point]:
    """The points to draw: the reference, the logged changes (or, without a history,
    the accepted state in ``current``), and the optional verdict."""
    points = [Point("reference", "reference", 100.0,
                    {name: 1.0 for name in SCENARIO_ORDER})]
    points += [point_from(rec) for rec in history]
    extra = (current or {}).get("extra") or {}
    if not history and _finite(extra.get("score")):
        # reference.json and current.json are written by the same --accept run
        ref = (reference or {}).get("scenarios") or {}
        ratios = {name: s["median_s"] / ref[name]["median_s"]
                  for name, s in current["scenarios"].items() if name in ref}
        names = [p["name"] for p in current.get("patches", [])]
        points.append(Point(short_label(names) if names else "current", "accepted",
                            float(extra["score"]), ratios))
    if verdict is not None:
        if verdict.get("verdict") == "error" or not _finite(verdict.get("score")):
            raise PatchgateError("the verdict has no score (the run ended in an error)",
                                 "plot without --verdict")
        points.append(point_from(verdict, "candidate", "this change"))
    return points


def draw(points: list[Point], outputs: list[Path], title: str,
         drift: list[int] | None = None, workload: list[int] | None = None) -> None:
    """Two panels (score; latency relative to the reference) into each output file
    (PNG or SVG, by suffix); ``drift``: point indices where a shift begins;
    ``workload``: where the model files or task data changed."""
    for out in outputs:
        if Path(out).suffix.lower() not in (".png", ".svg"):
            raise PatchgateError(f"{out}: unsupported plot format",
                                 "name the output .png or .svg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 7.2), dpi=100,
                                      height_ratios=(1, 1.15), layout="constrained")
    try:
        fig.suptitle(title, fontsize=13)
        for i, at in enumerate(drift or []):
            for ax in (top, bottom):
                ax.axvline(at - 0.5, color="tab:orange", linestyle=":", linewidth=1.5,
                           label="drift (E-divisive)" if ax is top and i == 0 else None)
        for i, at in enumerate(workload or []):
            for ax in (top, bottom):
                ax.axvline(at - 0.5, color="0.3", linestyle="-.", linewidth=1.2,
                           label="model or task data changed" if ax is top and i == 0
                           else None)
        _score_panel(top, points)
        _latency_panel(bottom, points)
        x, labels = tick_labels(points)
        bottom.set_xticks(x, labels, rotation=30, ha="right", rotation_mode="anchor",
                          fontsize=9)
        bottom.set_xlim(-0.5, len(points) - 0.5)
        bottom.set_xlabel("change (new patches)")
        for out in outputs:
            _save(fig, Path(out))
    finally:
        plt.close(fig)


def tick_labels(points: list[Point]) -> tuple[list[int], list[str]]:
    """Ticks that stay readable at README width: full labels up to MAX_FULL_LABELS
    points, then patch numbers only, and at most MAX_TICKS of them."""
    labels = [p.label for p in points]
    if len(points) > MAX_FULL_LABELS:
        labels = [label.split(" ")[0] for label in labels]
    step = math.ceil(len(points) / MAX_TICKS)
    x = list(range(0, len(points), step))
    return x, [labels[i] for i in x]


def _accepted_state(points: list[Point]) -> list[int]:
    """For each point, the index of the accepted state it was measured against
    (the last reference or accepted point up to and including it)."""
    last, out = 0, []
    for i, p in enumerate(points):
        if p.verdict in ("reference", "accepted"):
            last = i
        out.append(last)
    return out


def _score_panel(ax, points: list[Point]) -> None:
    x = list(range(len(points)))
    ax.axhline(100, color="0.45", linestyle="--", linewidth=1, label="reference = 100")
    state = _accepted_state(points)
    ax.step(x, [points[i].score for i in state], where="post", color="tab:blue",
            linewidth=1.5, alpha=0.5, label="accepted state")
    shown = [p.score for p in points if p.score >= OFF_SCALE] + [100.0]
    lo, hi = min(shown), max(shown)
    margin = max(2.0, 0.15 * (hi - lo))
    floor = lo - margin
    for verdict, (marker, color, label) in STYLES.items():
        idx = [i for i in x if points[i].verdict == verdict]
        if idx:
            ax.scatter(idx, [max(points[i].score, floor + margin / 4) for i in idx], s=60,
                       zorder=3, marker=marker, color=color, label=label)
    for i, p in enumerate(points):
        off_scale = p.score < floor
        if off_scale or len(points) <= MAX_ANNOTATED:
            y = floor + margin / 4 if off_scale else p.score
            text = f"{p.score:.1f} (off scale)" if off_scale else f"{p.score:.1f}"
            ax.annotate(text, (i, y), xytext=(0, 8), textcoords="offset points",
                        ha="center", fontsize=9, color="tab:red" if off_scale else "black")
    ax.set_ylim(floor, hi + 1.5 * margin)
    ax.set_ylabel("score (reference = 100)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)


def _latency_panel(ax, points: list[Point]) -> None:
    """One line per scenario through the accepted states; rejected changes and the
    candidate as lone markers of the scenario's colour."""
    ax.axhline(1.0, color="0.45", linestyle="--", linewidth=1)
    names = [n for n in SCENARIO_ORDER if any(n in p.ratios for p in points)]
    names += sorted({n for p in points for n in p.ratios} - set(names))
    for j, name in enumerate(names):
        color, style = f"C{j % 10}", "-" if name.startswith("prefill") else "--"
        on = [i for i, p in enumerate(points)
              if name in p.ratios and p.verdict in ("reference", "accepted")]
        ax.plot(on, [points[i].ratios[name] for i in on], marker="o", markersize=4,
                linestyle=style, color=color, label=name)
        for verdict in ("rejected", "inconclusive", "candidate"):
            off = [i for i, p in enumerate(points) if name in p.ratios and p.verdict == verdict]
            ax.scatter(off, [points[i].ratios[name] for i in off], s=30, zorder=3,
                       marker=STYLES[verdict][0], color=color)
    ax.set_ylabel("median latency / reference\n(below 1 = faster)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False,
              title="scenario\n(x rejected, \u25c6 this change)", title_fontsize=8)


def _save(fig, out: Path) -> None:
    """Write atomically; no date, software version or random id in the file, so
    re-drawing the same history gives the same bytes."""
    import matplotlib

    kind = out.suffix.lower().lstrip(".")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"Date": None} if kind == "svg" else {"Software": None}
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with matplotlib.rc_context({"svg.hashsalt": "patchgate"}):  # stable SVG ids
            fig.savefig(tmp, format=kind, metadata=meta)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def write_plot(baselines_dir: Path, profile: str, outputs: list[Path],
               verdict: dict | None = None) -> list[Path]:
    """Read the profile's history (and current.json) and draw the trend."""
    store = BaselineStore(baselines_dir, profile)
    history = store.history()
    current = reference = None
    if not history:
        current, reference = store.load("current"), store.load("reference")
    points = trend_points(history, current, reference, verdict)
    if len(points) < 2:
        raise PatchgateError(
            f"nothing to plot for profile {profile}: no {hist.HISTORY} and no accepted "
            f"current.json under {Path(baselines_dir) / profile}",
            f"accept a change first (`patchgate guard --profile {profile} --accept`) "
            "or pass --verdict")
    draw(points, outputs, f"patchgate trend: {profile}", drift_marks(history),
         workload_marks(history))
    return outputs


def _finite(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))
