"""The report commands: ``report``, ``table``, ``badges`` and ``plot``.

Each reads what the gate wrote (verdict files through
:func:`patchgate.verdict.document.load`, stored results through the baseline store)
and renders it; none measures anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..files import atomic_write_text
from ..verdict import document


def add_command(sub, root: Path) -> None:
    """``patchgate report | table | badges | plot``."""
    r = sub.add_parser("report", help="render a verdict JSON as markdown or text")
    r.add_argument("verdict", type=Path, help="a verdict file (`patchgate guard --json`)")
    r.add_argument("--format", choices=("markdown", "text"), default="markdown",
                   help="markdown: the PR comment; text: as the terminal shows it")
    r.add_argument("--output", type=Path, help="write here instead of stdout")
    r.set_defaults(handler=report)

    tb = sub.add_parser("table", help="one markdown row per verdict file: patch, S1, S8, "
                        "Sinf, score, accuracy ratio, verdict")
    tb.add_argument("verdicts", type=Path, nargs="+", help="verdict files, one row each")
    tb.add_argument("--output", type=Path, help="write here instead of stdout")
    tb.set_defaults(handler=table)

    b = sub.add_parser("badges", help="write SVG badges (score, accuracy) from "
                       "baselines/<profile>/current.json")
    b.add_argument("--profile", default="default", help="profile name (a baselines/ folder)")
    b.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results (default: baselines/)")
    b.add_argument("--out", type=Path, default=root / "docs" / "badges",
                   help="folder for <profile>-score.svg and <profile>-accuracy.svg "
                   "(default: docs/badges/)")
    b.add_argument("--verdict", type=Path,
                   help="also write <profile>-verdict.svg: this run's state (accepted, "
                   "rejected, inconclusive), e.g. for a pull request")
    b.set_defaults(handler=badges)

    t = sub.add_parser("plot", help="draw the trend of logged changes: score and latency "
                       "relative to the reference")
    t.add_argument("--profile", default="default", help="profile name (a baselines/ folder)")
    t.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results (default: baselines/)")
    t.add_argument("--verdict", type=Path,
                   help="a verdict JSON (`guard --json`) to add as the last point")
    t.add_argument("--out", type=Path, action="append",
                   help="a .png or .svg to write; repeat for both "
                   "(default: docs/trend-<profile>.png)")
    t.set_defaults(handler=plot, root=root)


def emit(text: str, output: Path | None) -> int:
    """Write ``text`` as it is to ``output`` (atomically), or to stdout ending in a newline."""
    if output:
        atomic_write_text(output, text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def report(args) -> int:
    from .markdown import render_markdown
    from .render import render_terminal

    verdict = document.load(args.verdict)
    text = render_markdown(verdict) if args.format == "markdown" else render_terminal(verdict)
    return emit(text, args.output)


def table(args) -> int:
    from .render import render_results_table

    return emit(render_results_table([(p.name, document.load(p)) for p in args.verdicts]),
                args.output)


def badges(args) -> int:
    from ..profile import get_profile
    from .badges import write_badges, write_verdict_badge

    profile = get_profile(args.profile)  # its limits colour the accuracy badge
    if args.verdict:
        print(write_verdict_badge(document.load(args.verdict), args.out))
    for path in write_badges(args.baselines, profile, args.out):
        print(path)
    return 0


def plot(args) -> int:
    from .plot import write_plot

    verdict = document.load(args.verdict) if args.verdict else None
    outputs = args.out or [args.root / "docs" / f"trend-{args.profile}.png"]
    for path in write_plot(args.baselines, args.profile, outputs, verdict):
        print(path)
    return 0
