"""The profile commands: ``profiles`` (what there is) and ``model grow`` (a grown
checkpoint, built into the cache)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_command(sub, root: Path) -> None:
    """``patchgate profiles`` and ``patchgate model grow``."""
    p = sub.add_parser("profiles", help="list the profiles of profiles/ with their descriptions")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one line each; json: a list of {name, engine, description}")
    p.set_defaults(handler=profiles)

    mg = sub.add_parser("model", help="model folders: `model grow` builds a grown checkpoint")
    grow = mg.add_subparsers(dest="model_command", required=True).add_parser(
        "grow", help="grow a small MiniCPM, function-preserving, to a larger shape (bf16, "
        "into the cache); prints the folder")
    grow.add_argument("--shape", required=True, help="a shape of patchgate.profile.grow.SHAPES "
                      "(minicpm4-8b)")
    grow.add_argument("--source", type=Path, default=root / "models" / "default",
                      help="the small model folder (default: models/default)")
    grow.add_argument("--cache", type=Path, help="folder of grown models (default: "
                      "$PATCHGATE_CACHE, else ~/.cache/patchgate/grown)")
    grow.set_defaults(handler=model_grow)


def profiles(args) -> int:
    from .load import listing

    rows = listing()
    if args.format == "json":
        print(json.dumps([{"name": n, "engine": e, "description": d} for n, e, d in rows],
                         indent=1))
        return 0
    for name, engine, description in rows:
        print(f"{name:22s} {engine:12s} {description}")
    return 0


def model_grow(args) -> int:
    from .grown import ensure

    done = ensure(args.source, args.shape, args.cache)
    how = "built" if done.built else "found in the cache"
    print(f"{args.shape}: {how} in {done.seconds:.1f} s", file=sys.stderr)
    print(done.path)
    return 0
