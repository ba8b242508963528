"""``patchgate check``: validate a patch folder, fast (no model, no measurement).

Every file is parsed and checked (:func:`patchgate.patches.discover.survey`), then each
valid one is imported once in a scratch process within the profile's
``import_timeout_s`` (60 s by default; :mod:`patchgate.patches.probe`). Every problem is
reported in one run, as ruff and pytest do: a bad name, a number taken twice, a file
that fails to parse or validate, an import that fails, exits, hangs or writes into
``baselines/`` or CHANGELOG.md (put back as it was). Exit 0 when every file is valid,
2 otherwise. ``--format json`` prints the same as one JSON document; the repository's
``.pre-commit-hooks.yaml`` runs it as a pre-commit hook.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import sandbox
from ..errors import EXIT_ACCEPTED, EXIT_ERROR
from ..patches.discover import survey
from ..patches.probe import probe
from ..profile import get_profile


def add_command(sub, root: Path) -> None:
    ck = sub.add_parser("check", help="validate the patch folder only (fast: no model, no "
                        "measurement); every problem in one run; for pre-commit and the "
                        "first CI step")
    ck.add_argument("--patches", type=Path, default=root / "model_patches",
                    help="folder of NNNN-slug.py patches (default: model_patches/)")
    ck.add_argument("--profile", default="default",
                    help="the profile whose import_timeout_s limits each import (default: "
                    "default)")
    ck.add_argument("--baselines", type=Path, default=root / "baselines",
                    help="stored results a patch must not write (default: baselines/)")
    ck.add_argument("--changelog", type=Path, default=root / "CHANGELOG.md",
                    help="the change log a patch must not write")
    ck.add_argument("--format", choices=("text", "json"), default="text",
                    help="text: one line per patch and per problem; json: one document "
                    "(patches, problems, sandbox)")
    ck.add_argument("-q", "--quiet", action="store_true",
                    help="print the problems only (text)")
    ck.set_defaults(handler=check)


def check(args) -> int:
    profile = get_profile(args.profile)
    patches, problems = survey(args.patches)
    stored = [args.baselines, args.changelog]
    problems += probe([p for p in patches if p.has_apply], profile.import_timeout_s, stored,
                      restore=stored, keep_going=True)
    bad = {name for e in problems for name in _named(e.message, patches)}
    ran = any(p.has_apply for p in patches)
    where = sandbox.status()["text"].replace("patch code ran", "the import ran")
    if args.format == "json":
        print(json.dumps({
            "folder": str(args.patches), "valid": not problems,
            "patches": [{"name": p.name, "title": p.title, "engines": list(p.engines),
                         "server_args": p.server_args, "ok": p.name not in bad}
                        for p in patches],
            "problems": [{"message": e.message, "hint": e.hint} for e in problems],
            "sandbox": where if ran else None}, indent=1))
        return EXIT_ERROR if problems else EXIT_ACCEPTED
    for p in patches:
        if p.name in bad or args.quiet:
            continue
        engines = ", ".join(p.engines)
        args_ = f"; SERVER_ARGS {p.server_args}" if p.server_args else ""
        print(f"ok  {p.name}: {p.title} (engines: {engines}{args_})")
    for e in problems:  # as the CLI prints an error: ERROR and a hint, on stderr
        print(f"ERROR {e.message}", file=sys.stderr)
        if e.hint:
            print(f"  hint: {e.hint}", file=sys.stderr)
    if not args.quiet or problems:
        summary = (f"{len(problems)} problem(s)" if problems else "valid")
        print(f"{len(patches)} valid patch(es) in {args.patches} (parsed, and imported once "
              f"in a scratch process): {summary}")
    if ran and not args.quiet:
        print(where)
    return EXIT_ERROR if problems else EXIT_ACCEPTED


def _named(message: str, patches) -> list[str]:
    return [p.name for p in patches if p.name in message]
