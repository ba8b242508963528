"""Badges: two SVG files for the README, from ``baselines/<profile>/current.json``.

    patchgate badges --profile h200-default
    # -> docs/badges/h200-default-score.svg, docs/badges/h200-default-accuracy.svg

The files are committed, so the README shows them without calling a badge service.
They read the ``extra`` block the gate writes into ``current.json`` on ``--accept``
(``score``, ``accuracy_ratio``). Colours: score >= 100 green, 97-100 yellow, else
red; accuracy (fraction of the reference) green at or above the profile's limit
(``thresholds.accuracy_reject``, 0.99 by default), yellow down to where the contest's C
reaches 0 (``thresholds.c_low``, 0.97), else red.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from xml.sax.saxutils import escape

from ..errors import PatchgateError
from ..files import atomic_write_many
from ..profile import Profile, Thresholds
from ..store.baselines import BaselineStore

GREEN, YELLOW, RED = "#4c1", "#dfb317", "#e05d44"
LABEL_COLOR = "#555"
FONT_SIZE = 11  # px, as shields.io
PAD = 6  # px on each side of a text


@dataclass(frozen=True)
class Badge:
    label: str
    value: str
    color: str


def score_color(score: float) -> str:
    return GREEN if score >= 100 else YELLOW if score >= 97 else RED


def accuracy_color(ratio: float, thresholds: Thresholds) -> str:
    """Green at or above the profile's accuracy limit, yellow above C's zero, else red."""
    return GREEN if ratio >= thresholds.accuracy_reject else \
        YELLOW if ratio >= thresholds.c_low else RED


def badges_for(current: dict, path: Path, thresholds: Thresholds) -> dict[str, Badge]:
    """``{"score": Badge, "accuracy": Badge}`` from a current.json envelope, coloured by
    the profile's ``thresholds``."""
    extra = current.get("extra")
    hint = (f"re-create it with `patchgate guard --profile {current.get('profile', '?')} "
            "--accept` (the gate writes extra.score and extra.accuracy_ratio)")
    values = {}
    for key in ("score", "accuracy_ratio"):
        value = extra.get(key) if isinstance(extra, dict) else None
        if not isinstance(value, int | float) or isinstance(value, bool) \
                or not math.isfinite(value):
            raise PatchgateError(f"{path}: extra.{key}: expected a number, got {value!r}", hint)
        values[key] = float(value)
    score, ratio = values["score"], values["accuracy_ratio"]
    profile = current.get("profile", "?")
    return {
        "score": Badge(f"score {profile}", f"{score:.1f}", score_color(score)),
        "accuracy": Badge(f"accuracy {profile}", f"{100 * ratio:.1f} % of ref",
                          accuracy_color(ratio, thresholds)),
    }


@cache
def _font():
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    font = FT2Font(font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans")))
    font.set_size(FONT_SIZE, 72)  # 72 dpi: one point is one pixel
    return font


def text_width(text: str) -> int:
    """Width in px of ``text`` at 11 px DejaVu Sans (the SVG's first font choice)."""
    font = _font()
    font.set_text(text, 0.0)
    return math.ceil(font.get_width_height()[0] / 64)


def render_svg(badge: Badge) -> str:
    """A flat shields.io-style badge; ``textLength`` keeps each text inside its box
    whatever font the viewer substitutes."""
    lw, vw = text_width(badge.label), text_width(badge.value)
    left, right = lw + 2 * PAD, vw + 2 * PAD
    width = left + right
    label, value = escape(badge.label), escape(badge.value)
    title = f"{label}: {value}"
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" \
role="img" aria-label="{title}">
<title>{title}</title>
<linearGradient id="s" x2="0" y2="100%">
<stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/>
</linearGradient>
<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>
<g clip-path="url(#r)">
<rect width="{left}" height="20" fill="{LABEL_COLOR}"/>
<rect x="{left}" width="{right}" height="20" fill="{badge.color}"/>
<rect width="{width}" height="20" fill="url(#s)"/>
</g>
<g fill="#fff" text-anchor="middle" \
font-family="DejaVu Sans,Verdana,Geneva,sans-serif" font-size="{FONT_SIZE}">
<text x="{left / 2}" y="15" fill="#010101" fill-opacity=".3" textLength="{lw}">{label}</text>
<text x="{left / 2}" y="14" textLength="{lw}">{label}</text>
<text x="{left + right / 2}" y="15" fill="#010101" fill-opacity=".3" \
textLength="{vw}">{value}</text>
<text x="{left + right / 2}" y="14" textLength="{vw}">{value}</text>
</g>
</svg>
"""


def write_badges(baselines_dir: Path, profile: Profile, out_dir: Path) -> list[Path]:
    """Write ``<out_dir>/<profile>-score.svg`` and ``-accuracy.svg``; returns the paths."""
    thresholds, profile = profile.thresholds, profile.name
    store = BaselineStore(baselines_dir, profile)
    path = store.path("current")
    current = store.load("current")
    if current is None:
        raise PatchgateError(f"{path} does not exist",
                             f"accept a change first: `patchgate guard --profile {profile} "
                             "--accept`")
    files = {Path(out_dir) / f"{profile}-{kind}.svg": render_svg(badge)
             for kind, badge in badges_for(current, path, thresholds).items()}
    atomic_write_many(files)
    return list(files)


VERDICT_COLORS = {"accepted": GREEN, "rejected": RED, "inconclusive": YELLOW}


def verdict_badge(verdict: dict) -> Badge:
    """The state of one run (a pull request's): accepted, rejected, inconclusive (its own
    state, never shown as accepted), skipped or error."""
    status = verdict["verdict"]
    return Badge(f"patchgate {verdict.get('profile', '?')}", status,
                 VERDICT_COLORS.get(status, LABEL_COLOR))


def write_verdict_badge(verdict: dict, out_dir: Path) -> Path:
    """Write ``<out_dir>/<profile>-verdict.svg``; returns the path."""
    path = Path(out_dir) / f"{verdict.get('profile', 'unknown')}-verdict.svg"
    atomic_write_many({path: render_svg(verdict_badge(verdict))})
    return path
