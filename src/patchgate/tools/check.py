"""``patchgate check``: validate a patch folder, fast (no model, no measurement).

Every file is parsed and checked (:mod:`patchgate.patches.discover`), then imported once
in a scratch process within the profile's ``import_timeout_s`` (60 s by default)
(:mod:`patchgate.patches.probe`): an import that fails, exits, hangs or writes into
``baselines/`` or CHANGELOG.md is an error naming the patch.
"""

from __future__ import annotations

from pathlib import Path

from .. import sandbox
from ..patches.discover import discover
from ..patches.probe import probe
from ..profile import get_profile


def add_command(sub, root: Path) -> None:
    ck = sub.add_parser("check", help="validate the patch folder only (fast: no model, no "
                        "measurement); for pre-commit and the first CI step")
    ck.add_argument("--patches", type=Path, default=root / "model_patches",
                    help="folder of NNNN-slug.py patches (default: model_patches/)")
    ck.add_argument("--profile", default="default",
                    help="the profile whose import_timeout_s limits each import (default: "
                    "default)")
    ck.add_argument("--baselines", type=Path, default=root / "baselines",
                    help="stored results a patch must not write (default: baselines/)")
    ck.add_argument("--changelog", type=Path, default=root / "CHANGELOG.md")
    ck.set_defaults(handler=check)


def check(args) -> int:
    profile = get_profile(args.profile)
    patches = discover(args.patches)
    stored = [args.baselines, args.changelog]
    probe([p for p in patches if p.has_apply], profile.import_timeout_s, stored,
          restore=stored)
    for p in patches:
        engines = ", ".join(p.engines)
        args_ = f"; SERVER_ARGS {p.server_args}" if p.server_args else ""
        print(f"ok  {p.name}: {p.title} (engines: {engines}{args_})")
    print(f"{len(patches)} patch(es) in {args.patches} (parsed, and imported once in a "
          "scratch process): valid")
    if any(p.has_apply for p in patches):
        print(sandbox.status()["text"].replace("patch code ran", "the import ran"))
    return 0
