"""The PR comment and job summary: a verdict as GitHub markdown.

The first lines carry the decision (with the profile and the machine), the score and
every caveat (:mod:`.caveats`) as a warning; then the time and the reasons; the tables
follow, the long ones folded (``<details>``). Pure: a verdict dict in, a string out.
"""

from __future__ import annotations

from tabulate import tabulate

from .caveats import FORCED, caveats, device
from .render import (
    ATTRIBUTION_HEADERS,
    FLIP_HEADERS,
    FLIPS_MARKDOWN,
    SERVING_HEADERS,
    accuracy_lines,
    allowed_lines,
    attribution_rows,
    base_line,
    explain_lines,
    flip_rows,
    flip_summary,
    headers,
    latency_lines,
    legend,
    scenario_rows,
    serving_lines,
    serving_rows,
    task_rows,
)
from .timing import time_line


def render_markdown(verdict: dict) -> str:
    """The PR comment / job summary. Starts with a marker so a bot can update it in place."""
    icon = {"accepted": "✅", "rejected": "❌", "inconclusive": "❔",
            "skipped": "⏭️"}.get(verdict["verdict"], "⚠️")
    what = ", ".join(x for x in (verdict.get("profile", "?"), device(verdict)) if x)
    out = ["<!-- patchgate-report -->", f"## {icon} patchgate: {verdict['verdict']} ({what})"]
    if verdict["verdict"] not in ("error", "skipped"):
        s = verdict["S"]
        out.append(f"**score {verdict['score']:.1f}** = (0.4 x S1 {s['1']:.1f} + 0.3 x S8 "
                   f"{s['8']:.1f} + 0.3 x Sinf {s['inf']:.1f}) x C {verdict['C']:.2f}")
    out += [f"> ⚠️ {c[0].upper()}{c[1:]}." for c in caveats(verdict)]
    out.append("")
    if time_line(verdict):
        out += [f"Verdict {time_line(verdict)}.", ""]
    if verdict["reasons"]:
        out += [f"- {r}" for r in verdict["reasons"]] + [""]
    if allowed_lines(verdict):
        out += ["- " + allowed_lines(verdict)[0]] + [f"  - {x.strip()}" for x in
                                                     allowed_lines(verdict)[1:]] + [""]
    if verdict["scenarios"]:
        out.append(tabulate(scenario_rows(verdict), headers=headers(verdict),
                            tablefmt="github", disable_numparse=True))
        out += ["", legend(verdict), ""]
        out += [f"- {line}" for line in latency_lines(verdict)]
        out.append("")
    if serving_rows(verdict):
        out += [f"- {line}" for line in serving_lines(verdict)] + [""]
        out += [tabulate(serving_rows(verdict), headers=SERVING_HEADERS, tablefmt="github",
                         disable_numparse=True), ""]
    if explain_lines(verdict):
        head, *rest = explain_lines(verdict)
        out += [f"**{head[0].upper()}{head[1:]}**", ""]
        out += [f"- {line.strip()}" if not line.startswith("    ") else f"  - {line.strip()}"
                for line in rest] + [""]
    if verdict["accuracy"]:
        out += [f"- {line}" for line in accuracy_lines(verdict)] + [""]
        out += _details("accuracy per task", tabulate(
            task_rows(verdict), headers=["task", "metric", "reference", "new", "ratio"],
            tablefmt="github", disable_numparse=True))
        if flip_summary(verdict, FLIPS_MARKDOWN):
            out += _details(flip_summary(verdict, FLIPS_MARKDOWN), tabulate(
                flip_rows(verdict, FLIPS_MARKDOWN, markdown=True), headers=FLIP_HEADERS,
                tablefmt="github", disable_numparse=True))
    if attribution_rows(verdict):
        out += ["Each new patch on top of the ones before it (`--attribute`; descriptive, "
                "the verdict is on the whole change):", "",
                tabulate(attribution_rows(verdict), headers=ATTRIBUTION_HEADERS,
                         tablefmt="github", disable_numparse=True), ""]
    patches = verdict.get("patches", {})
    new = set(verdict.get("new_patches", []))
    if patches.get("candidate"):
        out.append("Patches: " + ", ".join(f"`{p['name']}`" + (" (new)" if p["name"] in new
                                                              else "")
                                           for p in patches["candidate"]))
    if base_line(verdict):
        out.append(f"- {base_line(verdict)}")
    for note in verdict.get("notes", []):
        if not note.startswith(SAID_ELSEWHERE):
            out.append(f"- {note}")
    return "\n".join(out).rstrip() + "\n"


# notes the report says elsewhere already: the new patches (the Patches line marks
# them), the items evaluated (the accuracy lines), the forced environment (a caveat)
SAID_ELSEWHERE = ("new: ", "accuracy: ", FORCED)


def _details(summary: str, table: str) -> list[str]:
    """A table folded under its summary line (GitHub renders ``<details>``)."""
    return ["<details>", f"<summary>{summary}</summary>", "", table, "", "</details>", ""]
