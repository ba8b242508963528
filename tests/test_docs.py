"""Docs that stay true: every number the docs quote next to a link to a committed verdict
(an accuracy-stop file, a calibration) is that file's number. A status statement that falls behind
the files it cites fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "docs" / "gpu-runs" / "README.md"]
LINK = re.compile(r"\]\(([^)#\s]+?\.(?:md|json))(?:#[^)]*)?\)")
CHECKS = {  # a quoted number, and where the verdict keeps it
    "score": (re.compile(r"score \**(\d+\.\d)\b"), lambda v: f"{v['score']:.1f}"),
    "S1": (re.compile(r"\bS1 (\d+\.\d)\b"), lambda v: f"{v['S']['1']:.1f}"),
    "S8": (re.compile(r"\bS8 (\d+\.\d)\b"), lambda v: f"{v['S']['8']:.1f}"),
    "Sinf": (re.compile(r"\bSinf (\d+\.\d)\b"), lambda v: f"{v['S']['inf']:.1f}"),
    "accuracy": (re.compile(r"accuracy \**(\d+\.\d\d) ?%"),
                 lambda v: f"{100 * v['accuracy']['ratio']:.2f}"),
}
OF_REFERENCE = re.compile(r"(\d+\.\d\d) % of the reference")
SCORE_RATIO = re.compile(r"score ratio (\d\.\d{3})\b")  # a calibration run's
NOISE = re.compile(r"noise (\d+\.\d\d) % a round")


def units(text: str) -> list[str]:
    """Paragraphs, each table row and each top-level list item on its own."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if lines and all(x.lstrip().startswith("|") for x in lines):
            out += lines
        else:
            out += re.split(r"\n(?=[-*] )", block)
    return out


def cited(doc: Path, unit: str) -> list[dict]:
    """The committed result files a unit of ``doc`` links to, loaded."""
    out = []
    for target in LINK.findall(unit):
        path = (doc.parent / target).resolve()
        data = path.with_suffix(".json") if path.suffix == ".md" else path
        if {"gpu-runs", "verdicts", "calibrations"} & set(data.parts):
            if data.is_file():
                out.append(json.loads(data.read_text()))
    return out


CASES = [(doc, unit) for doc in DOCS for unit in units(doc.read_text(encoding="utf-8"))
         if cited(doc, unit)]


def test_the_docs_cite_committed_results():
    assert len(CASES) >= 3  # the README's GPU table at least


@pytest.mark.parametrize(("doc", "unit"), CASES,
                         ids=[f"{d.relative_to(ROOT)}:{u[:40]}" for d, u in CASES])
def test_every_number_quoted_beside_a_result_file_is_that_files(doc, unit):
    files = cited(doc, unit)
    verdicts = [f for f in files if "verdict" in f and "S" in f]  # schema 2 has no kind
    wrong = []
    for name, (pattern, value) in CHECKS.items():
        for quoted in pattern.findall(unit):
            have = {value(v) for v in verdicts if v["S"]}
            if verdicts and quoted not in have:
                wrong.append(f"{name} {quoted}, the file says {sorted(have)}")
    ratios = {f"{100 * r['full_ratio']:.2f}" for f in files for r in f.get("rows", [])
              if isinstance(r, dict)}  # accuracy-stop rows (other files' "rows" are not)
    for quoted in OF_REFERENCE.findall(unit):
        if ratios and quoted not in ratios:
            wrong.append(f"{quoted} % of the reference, the file says {sorted(ratios)}")
    calibrations = [f for f in files if f.get("kind") == "patchgate.calibration"]
    runs = [r for f in calibrations for r in f["runs"]]
    have = ({f"{r['score_ratio']:.3f}" for r in runs}
            | {f"{k['median_score_ratio']:.3f}" for f in calibrations
               for k in f["summary"]["kinds"].values()})
    for quoted in SCORE_RATIO.findall(unit) if calibrations else ():
        if quoted not in have:
            wrong.append(f"score ratio {quoted}, the calibration says {sorted(have)}")
    noises = ({f"{100 * r['noise']:.2f}" for r in runs if r.get("noise")}
              | {f"{100 * x:.2f}" for f in calibrations
                 for x in (f["summary"].get("noise") or {}).values() if x})  # medians
    for quoted in NOISE.findall(unit) if calibrations and not verdicts else ():
        if quoted not in noises:
            wrong.append(f"noise {quoted} %, the calibration says {sorted(noises)}")
    assert not wrong, f"{doc.relative_to(ROOT)}: {wrong}"
