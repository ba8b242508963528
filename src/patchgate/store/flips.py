"""The flipped-items file beside a verdict: ``<verdict>.flips.jsonl``.

Every item judged right in one run and wrong in the other, with both outputs, the
target and the prompt (the verdict keeps the first few, clipped). The first line is a
header (``kind``, ``schema_version``, the item count); :func:`load` refuses another
version and says what to do.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import PatchgateError

SCHEMA_VERSION = 1
KIND = "patchgate.flips"
HINT = "re-run `patchgate guard --json` to write it again"


def path_for(verdict_path: Path) -> Path:
    """The file of all flipped items next to a verdict: ``verdict.flips.jsonl``."""
    verdict_path = Path(verdict_path)
    return verdict_path.with_name(verdict_path.stem + ".flips.jsonl")


def text(items: list[dict]) -> str:
    """The flips file: a header line (kind, version, count), then one flipped item per
    line (JSON), prompts included."""
    head = {"kind": KIND, "schema_version": SCHEMA_VERSION, "items": len(items)}
    lines = [head, *items]
    return "".join(json.dumps(i, ensure_ascii=False, sort_keys=True) + "\n" for i in lines)


def load(path: Path) -> list[dict]:
    """The flipped items of a flips file (of this version), or an error naming it."""
    path = Path(path)
    try:
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()
                if x.strip()]
    except (OSError, ValueError) as e:
        raise PatchgateError(f"{path}: not a flips file ({e})", hint=HINT) from None
    head = rows[0] if rows else {}
    if head.get("kind") != KIND or head.get("schema_version") != SCHEMA_VERSION:
        raise PatchgateError(f"{path}: flips file of another version "
                             f"({head.get('schema_version')!r})",
                             hint=HINT)
    return rows[1:]
