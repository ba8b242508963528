"""The optimization log in CHANGELOG.md: one short entry per evaluated change.

The file has a header, a ``## Optimization log`` section the gate appends to (newest
last), and possibly other sections (``## Release notes``, ...) that are kept as they
are. An entry reads::

    ### 2025-06-01 — Fuse the residual add into RMSNorm (accepted)

    One fused kernel instead of an add and a norm: saves a pass over the hidden state.

    Patches: `0001-fuse-add-rmsnorm.py` (profile `default`)

    Accepted: score 104.2, accuracy 100.0 % of reference; largest changes: ...
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from .. import files

SECTION = "## Optimization log"
MAX_DESCRIPTION = 300  # characters: about two lines

_NEW_FILE = (
    "# Changelog\n\n"
    "Every change evaluated by `patchgate guard` gets an entry in the optimization log "
    "(newest last).\n\n"
)
_HEADING = re.compile(r"^(#{1,2}) ")  # a heading that ends a level-2 section
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Entry:
    """One change: its date, title and description, the verdict, the result sentence
    (:func:`result_sentence`), the patches, and the gate's profile."""

    date: str
    title: str
    description: str
    verdict: str
    sentence: str
    patch_names: list[str]
    profile: str | None = None


def format_entry(e: Entry) -> str:
    """One log entry in markdown, ending with a newline.

    ``description`` may be a whole docstring body: only its first paragraph is kept,
    on one line, cut to about :data:`MAX_DESCRIPTION` characters. ``profile`` (the
    gate's profile, e.g. ``h200-default``) is named after the patches, so entries of
    several profiles can share one log.
    """
    date, title, description, verdict, sentence, patch_names, profile = (
        e.date, e.title, e.description, e.verdict, e.sentence, e.patch_names, e.profile)
    lines = [f"### {date} — {_one_line(title)} ({verdict})", ""]
    summary = _short_description(description)
    if summary:
        lines += [summary, ""]
    names = ", ".join(f"`{name}`" for name in patch_names) or "none"
    where = f" (profile `{profile}`)" if profile else ""
    lines += [f"Patches: {names}{where}", "", _one_line(sentence)]
    return "\n".join(lines) + "\n"


def append_entry(path: Path, entry: str) -> None:
    """Add ``entry`` at the end of the optimization log in ``path``, atomically.

    Creates the file, or the section (before the first other ``## `` section), if
    missing. Every other section is kept as it is.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    files.atomic_write_text(path, with_entry(text, entry))


def with_entry(text: str, entry: str) -> str:
    """``text`` (a CHANGELOG.md's content, maybe empty) with ``entry`` added to the log."""
    lines = (text if text.strip() else _NEW_FILE).removesuffix("\n").split("\n")
    block = entry.strip("\n").split("\n")
    headings = _headings(lines)
    start = next((i for i, line in headings if line.rstrip() == SECTION), None)
    if start is None:  # no log yet: put one before the first section, or at the end
        at = next((i for i, line in headings if line.startswith("## ")), len(lines))
        before = _strip_blank_end(lines[:at])
        new = before + ([""] if before else []) + [SECTION, ""] + block
        rest = lines[at:]
    else:
        end = next((i for i, _ in headings if i > start), len(lines))
        body = _strip_blank_end(lines[:end])
        new = body + ([""] if body else []) + block
        rest = lines[end:]
    if rest:
        new += [""] + rest
    return "\n".join(new) + "\n"


def result_sentence(verdict: dict) -> str:
    """One sentence saying what a verdict was and why, for the log and summaries.

    E.g. ``Accepted: score 104.2, accuracy 100.0 % of reference; largest changes:
    decode_b64 0.91x, prefill_b1 0.95x.`` A scenario's ratio is candidate / baseline
    latency (above 1: slower); the two largest changes either way are named.
    """
    head = str(verdict.get("verdict") or "unknown").capitalize()
    reasons = [str(r).strip().rstrip(".") for r in verdict.get("reasons") or [] if str(r).strip()]
    if reasons:
        head += f" ({'; '.join(reasons)})"
    numbers = []
    if verdict.get("score") is not None:
        numbers.append(f"score {verdict['score']:.1f}")
    accuracy = verdict.get("accuracy")
    if accuracy and accuracy.get("ratio") is not None:
        numbers.append(f"accuracy {100 * accuracy['ratio']:.1f} % of reference")
    parts = [", ".join(numbers)] if numbers else []
    allowed = verdict.get("allowed_slower")
    if allowed and allowed.get("slowdowns"):
        parts.append(f"slower, acknowledged: {allowed['reason']}")
    changes = [s for s in verdict.get("scenarios") or []
               if isinstance(s.get("ratio"), int | float) and math.isfinite(s["ratio"])
               and s["ratio"] > 0]
    changes.sort(key=lambda s: (-abs(math.log(s["ratio"])), str(s["name"])))
    if changes:
        parts.append("largest changes: "
                     + ", ".join(f"{s['name']} {s['ratio']:.2f}x" for s in changes[:2]))
    return f"{head}: {'; '.join(parts)}." if parts else f"{head}."


def _headings(lines: list[str]) -> list[tuple[int, str]]:
    """(index, line) of each level-1 or level-2 heading outside code fences."""
    found, fenced = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            found.append((i, line))
    return found


def _strip_blank_end(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _short_description(text: str) -> str:
    """The first paragraph of ``text`` on one line, cut at a word to MAX_DESCRIPTION."""
    paragraphs = [p for p in re.split(r"\n\s*\n", str(text).strip()) if p.strip()]
    summary = _one_line(paragraphs[0]) if paragraphs else ""
    if len(summary) <= MAX_DESCRIPTION:
        return summary
    cut = summary[: MAX_DESCRIPTION - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"
