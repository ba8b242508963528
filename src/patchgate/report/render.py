"""Rendering of a verdict dict: the terminal text, and the rows and lines the markdown
report (:mod:`.markdown`, the PR comment) shares with it.

Pure functions: a verdict dict in, a string out. Each scenario's outcome is written
out and marked: ``+`` slower, ``-`` faster (significant and beyond the threshold,
and again in fresh processes), ``=`` equivalent (within the threshold either way),
``~`` undecided (this run could not tell). Verdicts of schema 1 (before outcomes)
render with their marks.
"""

from __future__ import annotations

from tabulate import tabulate

from ..store.calibration import own_noise
from ..verdict.judge import together
from .caveats import caveats, device
from .timing import time_line

HEADERS = ["scenario", "in->out", "reference", "baseline", "new", "ratio", "CI", "outcome",
           "p", "detectable"]
LEGEND = ("`+` slower, `-` faster (significant after Holm, beyond the threshold, and again "
          "in fresh processes), `=` equivalent (the CI lies within the threshold), `≤` not "
          "slower (the CI ends below the threshold), `~` undecided. Ratio: candidate / "
          "baseline time, paired by round (Hodges-Lehmann; above 1 is slower). p: the "
          "one-sided signed-rank p-value of \"slower\". Detectable: the smallest change "
          "this many rounds could have found (80 % power). A score change has the other "
          "sign: a higher score is faster.")
LEGEND_T = LEGEND.replace("(Hodges-Lehmann; above 1 is slower)", "(the mean log ratio; above 1 is "
                          "slower)").replace("signed-rank p-value", "paired t-test's p-value")


def legend(verdict: dict) -> str:
    """The table's legend, in the words of the test the run used (``latency.test``)."""
    return LEGEND_T if (verdict.get("latency") or {}).get("test") == "t" else LEGEND


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.2f} ms" if x < 10 else f"{x:.2f} s"


def _outcome(r: dict) -> str:
    mark = r["mark"].strip() or " "
    return f"{mark} {r['outcome']}" if r.get("outcome") else mark


def _confirm_budget(block: dict) -> str:
    """`` (6 rounds a look, each test at 0.05)``: the fresh processes' budget, where the
    verdict records it (older verdicts do not)."""
    if not block.get("confirm_rounds") or block.get("confirm_alpha") is None:
        return ""
    return (f" ({block['confirm_rounds']} rounds a look, each test at "
            f"{block['confirm_alpha']:.3g})")


def _ci(r: dict) -> str:
    lo, hi = r.get("ci_low"), r.get("ci_high")
    if lo is None and hi is None:
        return "-"
    if hi is None:
        return f">{lo:.3f}"
    return f"<{hi:.3f}" if lo is None else f"{lo:.3f}-{hi:.3f}"


def _detectable(r: dict) -> str:
    d = r.get("detectable")
    return "-" if d is None else f"{100 * d:.1f} %"


def _shape(r: dict) -> str:
    """``batch x in->out``; a serving row's batch is its dataset's request count."""
    return f"{r.get('num_prompts', r['batch_size'])}x{r['input_len']}->{r['output_len']}"


def same_baseline(verdict: dict) -> bool:
    """The baseline is the reference (no accepted patches yet): one column says both."""
    return bool(verdict["scenarios"]) and all(
        r["baseline_median_s"] == r["reference_median_s"] for r in verdict["scenarios"])


def headers(verdict: dict) -> list[str]:
    if same_baseline(verdict):
        return [h if h != "reference" else "reference = baseline" for h in HEADERS
                if h != "baseline"]
    return HEADERS


def scenario_rows(verdict: dict) -> list[list[str]]:
    one = same_baseline(verdict)
    return [[
        r["name"], _shape(r), _ms(r["reference_median_s"]),
        *([] if one else [_ms(r["baseline_median_s"])]), _ms(r["median_s"]),
        f"{r['ratio']:.3f}", _ci(r), _outcome(r), f"{r['p_value']:.2g}", _detectable(r),
    ] for r in verdict["scenarios"]]


def latency_lines(verdict: dict) -> list[str]:
    """The pooled score change, the check against the fastest accepted state, the
    looks and the measured error rates (schema 2 verdicts)."""
    block = verdict.get("latency")
    if not block:
        return []
    out = []
    for key, what in (("score", "current baseline"), ("best", "fastest accepted state")):
        p = block.get(key)
        if not p:
            continue
        again = ""
        if p.get("confirmation"):
            c = p["confirmation"]
            again = f"; in fresh processes {100 * (c['ratio'] - 1):+.1f} % ({c['outcome']})"
        out.append(
            f"score vs the {what}: {100 * p['score_change']:+.1f} % "
            f"({together(len(verdict['scenarios']))} {100 * (p['ratio'] - 1):+.1f} %, "
            f"CI {_ci(p)}, p={p['p_value']:.2g}): "
            f"{p['outcome']}{again}")
    out.append(
        f"threshold {100 * block['threshold']:g} %, alpha {block['alpha']:g} over "
        f"{block['max_looks']} look(s) (each at {block['alpha_look']:.3g}, Holm over the "
        f"scenarios and the score); looks taken: {block['looks']}"
        + (f", {block['confirm_looks']} in fresh processes{_confirm_budget(block)}"
           if block.get("confirm_looks") else ""))
    cal = verdict.get("calibration")
    if block.get("noise") is not None:
        cal_noise = own_noise(cal)
        beside = (f"; {block['noise'] / cal_noise:.1f}x the {100 * cal_noise:.2f} % "
                  "calibrated on this runner" if cal_noise else "")
        out.append(f"noise: {100 * block['noise']:.2f} % a round (robust SD of the "
                   f"score-weighted log ratios){beside}")
    if block.get("inputs"):
        out.append(f"inputs: {block['inputs']}")
    if block.get("spread"):
        out.append(spread_line(block["spread"]))
    if cal:
        when = (cal.get("created") or "")[:10]
        here = cal.get("this_runner", True)  # older verdicts: their own class's
        out.append(f"measured on this runner ({when}): {cal['text']}" if here else
                   f"measured on another runner, not this one ({cal.get('runner')}, "
                   f"{when}; `patchgate calibrate` measures this one): {cal['text']}")
    for cp in (verdict.get("history") or {}).get("change_points", []):
        out.append(f"drift in the history: the accepted score moved from {cp['before']:.1f} "
                   f"to {cp['after']:.1f} at {', '.join(cp['patches']) or 'a re-run'} "
                   f"({(cp.get('date') or '')[:10]}, E-divisive p={cp['p_value']:.2g})")
    return out


def accuracy_lines(verdict: dict) -> list[str]:
    a = verdict["accuracy"]
    if a is None:
        return []
    lines = [
        f"accuracy {a['candidate']:.4f} vs reference {a['reference']:.4f}: "
        f"{100 * a['ratio']:.2f} % (95 % paired bootstrap CI {100 * a['ci_low']:.2f}-"
        f"{100 * a['ci_high']:.2f} %; limit {100 * a['threshold']:.0f} %)",
        f"items: {a['n']}, right->wrong {a['flipped_to_wrong']}, "
        f"wrong->right {a['flipped_to_right']}, McNemar exact p={a['p_value']:.3g}",
    ]
    if a.get("sequential"):  # the guard stopped as soon as the answer was certain
        lines.append(sequential_line(a))
    if a.get("mode"):
        lines.append(f"guard: {a['mode']}")
    for label, pool in (a.get("spread") or {}).items():
        lost = pool.get("lost_nodes") or []
        lines.append(f"accuracy of {label} in {pool['actors']} Ray actor(s) on "
                     f"{len(pool['nodes'])} node(s) of class {', '.join(pool['classes'])}"
                     + (f"; lost: {', '.join(n[:12] for n in lost)} (its batches answered "
                        "again by the others)" if lost else ""))
    return lines


def spread_line(sp: dict) -> str:
    """Where a ``--ray`` run's latency ran: the nodes, their class, the blocks, the nodes
    lost and where their blocks ran again."""
    again = [b for b in sp["blocks"] if b.get("rerun_of")]
    return (f"latency on {len(sp['nodes'])} Ray node(s) of class {', '.join(sp['classes'])}"
            f": {len(sp['blocks'])} block(s), every round on one node"
            + "".join(f"; node {b['rerun_of'][:12]} lost, its block (rounds from "
                      f"{b['first_round']}) ran again on {b['node'][:12]}" for b in again))


def sequential_line(a: dict) -> str:
    """How much of the suite the sequential guard evaluated, why it stopped, the full-set
    interval then and the time a full pass would have taken more."""
    low, high = a.get("interval") or (None, None)
    seq = a.get("sequential") or {}
    interval = (f"; full-set ratio {100 * low:.2f}-{100 * high:.2f} % "
                f"({100 * (1 - seq.get('delta', 0.01)):.0f} % confidence sequence)"
                if low is not None and high is not None and a["items_evaluated"] <
                a["items_total"] else "")
    saved = seq.get("saved_s_estimate")
    return (f"sequential guard: {a['items_evaluated']} of {a['items_total']} items, "
            f"{a['stopped']}{interval}"
            + (f"; about {saved:.0f} s saved" if saved else ""))


def _measure(metric: str, flt: str | None) -> str:
    return metric if flt in (None, "none") else f"{metric} / {flt}"


def task_rows(verdict: dict) -> list[list[str]]:
    """Per task its primary metric (/ filter), what the rule reads; below it the other
    filters and metrics lm-eval reported, marked "shown" (not judged)."""
    a = verdict["accuracy"] or {}
    rows = []
    for t, v in a.get("per_task", {}).items():
        rows.append([t, _measure(v["metric"], v.get("filter")), f"{v['reference']:.3f}",
                     f"{v['candidate']:.3f}", f"{100 * v['ratio']:.1f} %"])
        for o in v.get("others", []):
            ratio = f"{100 * o['candidate'] / o['reference']:.1f} %" if o["reference"] else "-"
            rows.append(["", f"{_measure(o['metric'], o['filter'])} (shown)",
                         f"{o['reference']:.3f}", f"{o['candidate']:.3f}", ratio])
    return rows


FLIPS_TERMINAL = 10  # flipped items printed by the terminal report
FLIPS_MARKDOWN = 5  # and by the PR comment


def _short(text, n: int = 60) -> str:
    text = "-" if text is None else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def flip_summary(verdict: dict, shown: int) -> str | None:
    a = verdict["accuracy"] or {}
    total = a.get("flips_total", 0)
    if not total:
        return None
    where = f"; all in {a['flips_file']}" if a.get("flips_file") else ""
    return (f"flipped items: {total} (the first {min(shown, len(a.get('flips', [])))} "
            f"below{where})")


def flip_rows(verdict: dict, shown: int, markdown: bool = False) -> list[list[str]]:
    """The first ``shown`` flipped items: task, item, direction, both outputs, target."""
    a = verdict["accuracy"] or {}
    rows = [[f["task"], f["id"], f["direction"], _short(f.get("reference_output")),
             _short(f.get("candidate_output")), _short(f.get("target"))]
            for f in a.get("flips", [])[:shown]]
    return [[c.replace("|", "\\|") for c in r] for r in rows] if markdown else rows


FLIP_HEADERS = ["task", "item", "flip", "reference", "new", "target"]


def attribution_rows(verdict: dict) -> list[list[str]]:
    """One row per new patch (``--attribute``): its effect on top of the patches before it."""
    rows = []
    for a in verdict.get("attribution") or []:
        worst = max(a["scenarios"].items(), key=lambda kv: kv[1]["ratio"])
        best = min(a["scenarios"].items(), key=lambda kv: kv[1]["ratio"])
        rows.append([a["patch"], f"{100 * a['score_change']:+.1f} %",
                     f"{best[0]} {best[1]['ratio']:.3f}", f"{worst[0]} {worst[1]['ratio']:.3f}",
                     f"{100 * a['accuracy_change']:+.2f} pts",
                     f"{100 * a['accuracy_ratio']:.2f} %"])
    return rows


ATTRIBUTION_HEADERS = ["patch (in stack order)", "score change", "fastest scenario",
                       "slowest scenario", "accuracy change", "accuracy after"]


SERVING_HEADERS = ["scenario", "configuration", "duration", "TTFT median", "TTFT p99",
                   "ITL median", "ITL p99", "runs"]


def serving_rows(verdict: dict) -> list[list[str]]:
    """The serving set's per-token latencies (``verdict["serving"]``): medians over the
    runs of each configuration, beside the duration the verdict decides on."""
    rows = []
    for sc in (verdict.get("serving") or {}).get("scenarios", []):
        for label, m in sc["configurations"].items():
            rows.append([sc["name"], label, _ms(m["duration_s"]),
                         f"{m['median_ttft_ms']:.2f} ms", f"{m['p99_ttft_ms']:.2f} ms",
                         f"{m['median_itl_ms']:.2f} ms", f"{m['p99_itl_ms']:.2f} ms",
                         str(m["runs"])])
    return rows


def serving_lines(verdict: dict) -> list[str]:
    sv = verdict.get("serving")
    if not sv:
        return []
    return [f"serving: {sv['num_prompts']} requests of {sv['input_len']} tokens in, "
            f"{sv['output_len']} out, per run ({sv['bench']}); S = {sv['S']}"]


EXPLAIN_HEAD = "why it is slower"


def explain_lines(verdict: dict) -> list[str]:
    """``--explain``: per scenario profiled, why, the profiled wall times and the largest
    changes between the current baseline and the candidate."""
    ex = verdict.get("explain")
    if not ex:
        return []
    out = [f"{EXPLAIN_HEAD} (one profile of each side; traces in {ex['folder']}/):"]
    if ex.get("note"):
        out.append(f"  {ex['note']}")
    for sc in ex.get("scenarios", []):
        walls = "; ".join(
            f"{src} {1000 * sc['wall_s']['current'][src]:.1f} -> "
            f"{1000 * sc['wall_s']['candidate'][src]:.1f} ms"
            for src in sc["wall_s"]["candidate"] if src in sc["wall_s"]["current"])
        out.append(f"  {sc['name']} ({sc['why']}); profiled: {walls}")
        out += [f"    {line}" for line in sc["top"]] or ["    no difference in the tables"]
    return out


def allowed_lines(verdict: dict) -> list[str]:
    allowed = verdict.get("allowed_slower")
    if not allowed:
        return []
    found = allowed.get("slowdowns") or []
    head = (f"slower, and allowed by the maintainer: {allowed['reason']}" if found else
            f"--allow-slower given ({allowed['reason']}), but nothing was slower")
    return [head] + [f"  {x}" for x in found]


def _summary(verdict: dict) -> str:
    if verdict["verdict"] == "error":
        return "ERROR"
    if verdict["verdict"] == "skipped":
        return "SKIPPED  (nothing was tested)"
    s = verdict["S"]
    return (f"{verdict['verdict'].upper()}  score {verdict['score']:.1f}  "
            f"(S1 {s['1']:.1f}, S8 {s['8']:.1f}, Sinf {s['inf']:.1f}, C {verdict['C']:.2f})")


def base_line(verdict: dict) -> str | None:
    """Which stored state the change was judged against, and what of the change's own
    edits to it was ignored (:mod:`patchgate.store.base`); None for older verdicts."""
    b = verdict.get("base") or {}
    return f"stored state: {b['note']}" if b.get("note") else None


def render_terminal(verdict: dict) -> str:
    out = []
    if verdict["scenarios"]:
        out.append(tabulate(scenario_rows(verdict), headers=headers(verdict),
                            tablefmt="simple", disable_numparse=True))
        out.append("")
    out += latency_lines(verdict)
    if serving_rows(verdict):
        out += serving_lines(verdict)
        out.append(tabulate(serving_rows(verdict), headers=SERVING_HEADERS,
                            tablefmt="simple", disable_numparse=True))
    out += explain_lines(verdict)
    out += accuracy_lines(verdict)
    if task_rows(verdict):
        out.append(tabulate(task_rows(verdict),
                            headers=["task", "metric", "reference", "new", "ratio"],
                            tablefmt="simple", disable_numparse=True))
    if flip_summary(verdict, FLIPS_TERMINAL):
        out.append(flip_summary(verdict, FLIPS_TERMINAL))
        out.append(tabulate(flip_rows(verdict, FLIPS_TERMINAL), headers=FLIP_HEADERS,
                            tablefmt="simple", disable_numparse=True))
    out += allowed_lines(verdict)
    if attribution_rows(verdict):
        out.append(tabulate(attribution_rows(verdict), headers=ATTRIBUTION_HEADERS,
                            tablefmt="simple", disable_numparse=True))
    if base_line(verdict):
        out.append(base_line(verdict))
    for note in verdict.get("notes", []):
        out.append(f"note: {note}")
    out.append("")
    took = time_line(verdict)
    where = f" on {device(verdict)}" if device(verdict) else ""
    out.append(_summary(verdict) + (f"  {took}" if took else "") + where)
    out += [f"  WARNING {c}" for c in caveats(verdict)]
    out += [f"  - {r}" for r in verdict["reasons"]]
    return "\n".join(out)


def render_results_table(verdicts: list[tuple[str, dict]]) -> str:
    """Markdown table, one row per verdict file: the new patches and the numbers."""
    rows = []
    for source, v in verdicts:
        new = ", ".join(f"`{n}`" for n in v.get("new_patches", [])) or "(none new)"
        if v["verdict"] == "error":
            rows.append([new, v.get("profile", "?"), "-", "-", "-", "-", "-", "error",
                         f"`{source}`"])
            continue
        rows.append([new, v.get("profile", "?"), f"{v['S']['1']:.1f}", f"{v['S']['8']:.1f}",
                     f"{v['S']['inf']:.1f}", f"{v['score']:.1f}",
                     f"{100 * v['accuracy']['ratio']:.2f} %", v["verdict"], f"`{source}`"])
    return tabulate(rows, headers=["patch", "profile", "S1", "S8", "Sinf", "score",
                                   "accuracy", "verdict", "verdict file"],
                    tablefmt="github", disable_numparse=True) + "\n"
