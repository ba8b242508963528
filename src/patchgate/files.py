"""Atomic file writes, strict JSON reads and file fingerprints, shared by every module
that stores files.

A write goes to a temporary file in the target's folder, is flushed to disk, and
replaces the target with ``os.replace``: a reader sees the old file or the new one,
never half of one, and a failure (a full disk, NaN in the data, Ctrl-C) leaves the
old file as it was. :func:`atomic_write_many` extends this to several files: all are
replaced or none. :func:`fingerprint` and :func:`changed` tell whether files changed
since a moment (the gate's stored files, while patch code ran); :func:`code_state`
does the same by file status for the code every process of a run may import.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .errors import PatchgateError

_NEW_FILE_MODE = 0o644  # temp files are created 0600; a stored result is not secret


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically; creates parent folders."""
    atomic_write_many({Path(path): text})


def atomic_write_many(files: dict[Path, str]) -> None:
    """Replace every ``path`` with its text, so that either all are replaced or none.

    Every temp file is written and synced first; only then is each moved into
    place. If a move fails midway (an OS error), the files already moved are put
    back to their old contents (or removed, if they did not exist) and the error
    is re-raised.
    """
    temps: dict[Path, Path] = {}
    try:
        for path, text in files.items():
            temps[Path(path)] = _write_temp(Path(path), text.encode("utf-8"))
        # what to put back if a later move fails (one file: nothing to undo)
        old = {p: p.read_bytes() if p.exists() else None for p in temps} if len(temps) > 1 else {}
    except BaseException:
        for temp in temps.values():
            temp.unlink(missing_ok=True)
        raise
    done: list[Path] = []
    try:
        for path, temp in temps.items():
            os.replace(temp, path)
            done.append(path)
    except BaseException:
        for path in done:
            _restore(path, old[path])
        for path, temp in temps.items():
            if path not in done:
                temp.unlink(missing_ok=True)
        raise
    for folder in {path.parent for path in temps}:
        _fsync_dir(folder)


def json_text(obj: object, path: Path) -> str:
    """``obj`` as the JSON text stored at ``path``: indent 1, sorted keys, final newline.

    NaN and infinity are refused (strict JSON readers reject them) with a
    :class:`PatchgateError` naming ``path``.
    """
    try:
        return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as e:
        raise PatchgateError(
            f"cannot write {path}: the data holds NaN or infinity ({e})",
            "a measurement or score came out undefined; check the run's log, then run again",
        ) from e


def atomic_write_json(path: Path, obj: object) -> None:
    """Write ``obj`` to ``path`` as JSON (see :func:`json_text`), atomically."""
    atomic_write_text(path, json_text(obj, path))


def read_json(path: Path, hint: str = "", invalid_hint: str | None = None) -> dict:
    """The JSON object stored at ``path``.

    Raises :class:`PatchgateError` if the file is missing (with ``hint``: how to
    create it is the caller's business), unreadable, not valid JSON (with line and
    column), or not an object; those use ``invalid_hint`` (default: ``hint``).
    """
    path = Path(path)
    bad_hint = hint if invalid_hint is None else invalid_hint
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchgateError(f"{path} does not exist", hint) from None
    except UnicodeDecodeError as e:
        raise PatchgateError(f"{path} is not valid UTF-8 text ({e.reason})", bad_hint) from None
    except OSError as e:
        raise PatchgateError(f"cannot read {path}: {e.strerror or e}", bad_hint) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise PatchgateError(
            f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}", bad_hint
        ) from None
    if not isinstance(obj, dict):
        raise PatchgateError(
            f"{path} holds a JSON {type(obj).__name__}, expected an object", bad_hint
        )
    return obj


def _write_temp(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        mode = path.stat().st_mode & 0o777 if path.exists() else _NEW_FILE_MODE
        os.chmod(temp, mode)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _restore(path: Path, data: bytes | None) -> None:
    """Best effort: put back the bytes ``path`` held before (``None``: remove it)."""
    try:
        if data is None:
            path.unlink(missing_ok=True)
        else:
            os.replace(_write_temp(path, data), path)
    except OSError:
        pass


def _fsync_dir(folder: Path) -> None:
    """Make the renames durable; not every platform lets a folder be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fingerprint(paths: Iterable[Path]) -> dict[Path, str | None]:
    """``{path: sha256 of its bytes}`` for every file under ``paths`` (files, or folders
    walked whole); a path that does not exist maps to None."""
    out: dict[Path, str | None] = {}
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and not f.name.startswith(".") and "__pycache__" not in f.parts:
                    out[f] = _digest(f)
        else:
            out[path] = _digest(path) if path.is_file() else None
    return out


def changed(before: dict[Path, str | None], roots: Iterable[Path]) -> list[Path]:
    """The files under ``roots`` that differ from ``before`` (changed, added, removed)."""
    now = fingerprint(roots)
    return sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))


LARGE = 64 * 2**20  # files above this are fingerprinted by size, mtime and their ends


def _digest(path: Path) -> str | None:
    """sha256 of the bytes; for a large file (a model's weights) of its size, its
    modification time and its first and last MiB, so a 15 GB checkpoint costs nothing."""
    try:
        st = path.stat()
        if st.st_size <= LARGE:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode())
        with path.open("rb") as f:
            h.update(f.read(2**20))
            f.seek(st.st_size - 2**20)
            h.update(f.read(2**20))
        return h.hexdigest()
    except OSError:
        return None


def check_writable(paths: Iterable[Path]) -> None:
    """Every path can be written (the file, or the nearest folder that exists), or a
    :class:`PatchgateError` naming the first that cannot: checked before a run spends
    its time, so a read-only CHANGELOG.md is found at the start, not replaced at the end."""
    for path in paths:
        path = Path(path)
        if path.exists():
            # the mode too: root may write anything, and an atomic replace ignores the
            # file's own mode, but a file marked read-only is meant to stay as it is
            if path.is_dir() or not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222:
                raise PatchgateError(f"cannot write {path}: it is read-only"
                                     + (" (a folder)" if path.is_dir() else ""),
                                     "make it writable (chmod u+w) or choose another path")
            continue
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PatchgateError(f"cannot write {path}: the folder {parent} is read-only",
                                 "make it writable or choose another path")


def code_roots() -> list[Path]:
    """The folders Python imports from here (``sys.path``: the standard library, the
    site-packages, this package's source): every process of a run, the engines' workers
    included, loads its code from them."""
    out: list[Path] = []
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        # not the working folder (the gate writes its results there), nor transformers'
        # cache of a model's own code (copies of the model folder, which is watched)
        if path.is_dir() and path != Path.cwd().resolve() and path not in out \
                and not (path / "transformers_modules").is_dir():
            out.append(path)
    return out


def code_state(roots: Iterable[Path]) -> dict[str, tuple[int, int, int, int]]:
    """``{file: (inode, size, mtime_ns, ctime_ns)}`` for every file under ``roots``
    (``__pycache__`` left out: Python writes it as it imports). Status, not content, so
    the whole of site-packages costs about a second: a write, a rename or a copy over a
    file changes its ctime, which no program can set back."""
    out: dict[str, tuple[int, int, int, int]] = {}
    stack = [str(r) for r in roots]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif e.is_file(follow_symlinks=False) and not e.name.endswith(".pyc"):
                    st = e.stat(follow_symlinks=False)
                    out[e.path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            except OSError:
                continue
    return out


def code_changes(before: dict[str, tuple[int, int, int, int]],
                 roots: Iterable[Path]) -> list[str]:
    """The files under ``roots`` changed, added or removed since ``before``."""
    now = code_state(roots)
    return sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))
