"""What an accuracy number was measured on: the model's files, the task data, and
the engine's settings where the profile sets any.

A stored reference accuracy (per item) stands in for a new measurement only when the
model and the task files are the very same bytes: a retrained model or regenerated
task data makes it stale, and the gate then measures the reference again and says
why. The fingerprint is stored with every baseline (``extra.workload``) and written
into the verdict.

Model folders are hashed file by file (relative path and content; ``*.md`` files,
``train_log.json`` and caches left out: documentation does not change a number).
Files over :data:`FULL_HASH_LIMIT` bytes, the weights of a real model, are hashed
by size plus their first and last MiB, so a many-GB checkpoint costs milliseconds,
not a minute, on every run. A model that is not a local folder (a hub id) is
recorded by name.

A grown model (``Profile.grow``) is fingerprinted as the folder the engines load, not
as its source: that folder's ``grown.json`` (hashed in full) names the source files'
sha256, the shape and the growth version, and the build is deterministic, so the
same source grown on another machine gives the same fingerprint, while a new source,
shape or growth rule gives another.

A profile's ``engine_args`` (SGLang's settings: which CUDA graphs it captures, say)
can change the numbers a model computes, if only in the last bits (a padded graph
shape runs other GEMM tiles than eager), so they are part of the fingerprint, as the
key ``engine_args``, present only when the profile sets any: the fingerprints stored
by profiles without settings stay what they were.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

FULL_HASH_LIMIT = 64 * 2**20
_EDGE = 2**20
_SKIP_NAMES = frozenset({"train_log.json"})
_SKIP_DIRS = frozenset({"__pycache__", ".git"})


def fingerprint(model: Path | str, task_path: Path | str | None,
                name: str | None = None, engine_args: dict | None = None) -> dict:
    """``{"model": ..., "tasks": ...}``: a sha256 of each folder (``None`` for no tasks),
    or ``name`` (the profile's model setting) when the model is not a local folder; and
    ``"engine_args"`` (a sha256 of them) when ``engine_args`` sets anything."""
    model = Path(model)
    found = {
        "model": _digest(model) if model.is_dir() else f"name:{name or model}",
        "tasks": _digest(Path(task_path)) if task_path and Path(task_path).is_dir() else None,
    }
    if engine_args:
        text = json.dumps(engine_args, sort_keys=True, default=str)
        found["engine_args"] = hashlib.sha256(text.encode()).hexdigest()
    return found


def differences(stored: dict | None, here: dict) -> list[str]:
    """Lines naming what differs between a stored fingerprint and this one; a baseline
    from before fingerprints were stored differs in every key."""
    stored = stored or {}
    return [f"{key}: stored {_short(stored.get(key))}, here {_short(here.get(key))}"
            for key in sorted(set(stored) | set(here)) if stored.get(key) != here.get(key)]


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(_files(folder)):
        rel = path.relative_to(folder).as_posix()
        h.update(rel.encode() + b"\0")
        h.update(_file_digest(path).encode() + b"\n")
    return h.hexdigest()


def _files(folder: Path):
    for path in folder.rglob("*"):
        if any(part in _SKIP_DIRS for part in path.relative_to(folder).parts):
            continue
        if path.is_file() and path.suffix != ".md" and path.name not in _SKIP_NAMES:
            yield path


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode() + b"\0")
    with path.open("rb") as f:
        if size <= FULL_HASH_LIMIT:
            for block in iter(lambda: f.read(2**20), b""):
                h.update(block)
        else:
            h.update(f.read(_EDGE))
            f.seek(size - _EDGE)
            h.update(f.read(_EDGE))
    return h.hexdigest()


def _short(value) -> str:
    if value is None:
        return "none recorded"
    text = str(value)
    return text if text.startswith("name:") else text[:12] + "..."
