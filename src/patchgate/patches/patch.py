"""A patch as the gate knows it: one validated file, its identity and its settings.

Identity is the file's name and the sha256 of its bytes; :func:`content_key` names a
patch set (a configuration). Engine names come from :mod:`patchgate.registry`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..errors import PatchgateError


@dataclass(frozen=True)
class Patch:
    """One validated patch file; identity is its name and the hash of its bytes."""

    path: Path
    name: str  # the file name, e.g. "0001-fuse-add-rmsnorm.py"
    order: int  # NNNN
    title: str  # first line of the docstring
    description: str  # the rest of the docstring, dedented
    engines: tuple[str, ...]  # engines it applies to
    server_args: dict = field(hash=False)  # engine settings it changes (str keys)
    has_apply: bool
    sha256: str  # hex digest of the file's bytes

    def applies_to(self, engine: str) -> bool:
        return engine in self.engines

    def record(self) -> dict:
        """The patch as stored in results and the change log (JSON-ready)."""
        return {
            "name": self.name,
            "title": self.title,
            "sha256": self.sha256,
            "engines": list(self.engines),
            "server_args": dict(self.server_args),
        }


def merged_server_args(patches: Sequence[Patch], engine: str) -> dict:
    """SERVER_ARGS of the patches for ``engine``, merged in order; conflicts are errors."""
    check_engine(engine)
    merged: dict = {}
    set_by: dict[str, Patch] = {}
    for patch in patches:
        if not patch.applies_to(engine):
            continue
        for key, value in patch.server_args.items():
            if key in merged and merged[key] != value:
                first = set_by[key]
                raise PatchgateError(
                    f"patches {first.name} and {patch.name} set server arg {key!r} to "
                    f"different values ({merged[key]!r} and {value!r})",
                    hint=f"make them agree, or drop {key!r} from one of them "
                    f"in {patch.path.parent}",
                )
            merged[key] = value
            set_by.setdefault(key, patch)
    return merged


def skipped(patches: Sequence[Patch], engine: str) -> list[Patch]:
    """The patches that do not apply to ``engine`` (their ENGINES leave it out)."""
    check_engine(engine)
    return [patch for patch in patches if not patch.applies_to(engine)]


def content_key(patches: Sequence[Patch]) -> str:
    """sha256 over the ordered (name, sha256) pairs: identifies a patch set."""
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(f"{patch.name}\0{patch.sha256}\n".encode())
    return digest.hexdigest()


def check_engine(engine: str) -> None:
    """``engine`` is a registered engine name, or an error that lists them."""
    known = registry.names("engine")
    if engine not in known:
        raise PatchgateError(
            f"unknown engine {engine!r}; known engines: {', '.join(known)}",
            hint="set the profile's engine to one of them",
        )
