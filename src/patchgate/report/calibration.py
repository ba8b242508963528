"""A calibration file as text: per condition (quiet, under load) and kind (A/A, planted
slowdowns), how many runs the gate rejected, called inconclusive and accepted."""

from __future__ import annotations

from tabulate import tabulate

from ..store.calibration import measured_apart


def _cell(k: dict, what: str) -> str:
    c = k.get(what)
    if c is None:
        return "-"
    return f"{c['count']}/{k['runs']} ({100 * c['low']:.0f}-{100 * c['high']:.0f} %)"


def render(doc: dict) -> str:
    """The calibration summary (terminal, docs): 95 % intervals in brackets."""
    s = doc["settings"]
    summary = doc["summary"]
    lines = [f"profile {doc['profile']}: {s['rounds']} rounds a look, up to {s['max_looks']} "
             f"looks, threshold {100 * s['threshold']:g} %, alpha {s['alpha']}, "
             f"confirmation {'on' if s['confirm'] else 'off'}"
             + (", the paired t-test" if s.get("test") == "t" else "")]
    load = doc.get("load") or {}
    conditions = summary.get("conditions") or {"quiet": _v1(summary["kinds"])}
    for cond, kinds in conditions.items():
        what = (f"under load ({load.get('busy_processes')} busy processes on "
                f"{load.get('cpu_count')} cores)" if cond == "load" else cond)
        rows = [[label, _cell(k, "rejected"), _cell(k, "inconclusive"), _cell(k, "accepted"),
                 f"{k['median_score_ratio']:.3f}"]
                for label, k in sorted(kinds.items(), key=lambda kv: kv[1]["planted"])]
        noise = (summary.get("noise") or {}).get(cond)
        lines += ["", f"{what}" + (f"; A/A noise {100 * noise:.2f} % a round" if noise
                                   else ""),
                  tabulate(rows, headers=["planted", "rejected", "inconclusive", "accepted",
                                          "median score ratio"], tablefmt="github",
                           disable_numparse=True)]
    for cond, kinds in conditions.items():
        for label, k in sorted(kinds.items(), key=lambda kv: kv[1]["planted"]):
            apart = measured_apart(k)
            if apart is not None:
                lines.append(f"note: the planted {label} measured {100 * apart:+.1f} % "
                             f"({cond}, median score ratio): its catch rate is that of "
                             "the size measured")
    gains = summary.get("unpaired_over_paired_ci_width") or {}
    if gains:
        lines.append("unpaired / paired CI width (median over runs): " + ", ".join(
            f"{name} {g:.2f}x" for name, g in gains.items()))
    if summary.get("wall_s_median") is not None:
        lines.append(f"median wall time of one run (engines started, looks, confirmation): "
                     f"{summary['wall_s_median']:.0f} s; calibration {doc['wall_s']:.0f} s")
    for lab, t in (summary.get("timings_s_median") or {}).items():
        lines.append(f"median {lab} run: " + ", ".join(
            f"{phase} {s:.0f} s" for phase, s in t.items()))
    return "\n".join(lines)


def _v1(kinds: dict) -> dict:
    """A first-version summary (rejections only) in the table's shape."""
    return {label: {"planted": k["planted"], "runs": k["runs"],
                    "rejected": {"count": k["rejected"], "low": k["low"], "high": k["high"]},
                    "median_score_ratio": k["median_score_ratio"]}
            for label, k in kinds.items()}
