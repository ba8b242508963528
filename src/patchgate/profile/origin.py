"""Where a run's profile came from: its file, the file's content hash, whether it is one
of the repository's own (``profiles/``), and what the command line changed.

A verdict carries this (``profile_source``), so a reader knows exactly what ran: a
profile file from elsewhere that reuses a built-in profile's name (a shortened GPU
profile in ``docs/gpu-runs/profiles/``, say) is a caveat the report shows first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .load import folder, is_path


def origin(ref: str, overrides: list[str], root: Path | None = None) -> dict:
    """``{"file", "sha256", "builtin", "overrides"}`` of the profile ``ref`` (a name of
    ``profiles/`` or a file path); ``file`` relative to the checkout where it lies inside."""
    base = folder(root)
    path = Path(ref).expanduser() if is_path(ref) else base / f"{ref}.toml"
    path = path.resolve()
    builtin = path.parent == base.resolve()
    try:
        shown = path.relative_to(base.resolve().parent).as_posix()
    except ValueError:
        shown = str(path)
    return {"file": shown, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "builtin": builtin, "overrides": list(overrides)}
