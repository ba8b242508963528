"""``patchgate check``: validate a patch folder, fast (no model, no measurement)."""

from __future__ import annotations

from pathlib import Path

from .discover import discover


def add_command(sub, root: Path) -> None:
    ck = sub.add_parser("check", help="validate the patch folder only (fast: no model, no "
                        "measurement); for pre-commit and the first CI step")
    ck.add_argument("--patches", type=Path, default=root / "model_patches",
                    help="folder of NNNN-slug.py patches (default: model_patches/)")
    ck.set_defaults(handler=check)


def check(args) -> int:
    patches = discover(args.patches)
    for p in patches:
        engines = ", ".join(p.engines)
        args_ = f"; SERVER_ARGS {p.server_args}" if p.server_args else ""
        print(f"ok  {p.name}: {p.title} (engines: {engines}{args_})")
    print(f"{len(patches)} patch(es) in {args.patches}: valid")
    return 0
