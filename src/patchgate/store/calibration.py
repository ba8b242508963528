"""The calibration file: a profile's measured latency error rates, and how reports
quote them.

``patchgate calibrate`` (:mod:`patchgate.tools.calibrate`) measures the rates and writes
``baselines/<profile>/calibration.json`` (:meth:`BaselineStore.calibration_path`);
every verdict of that profile quotes it ("on this runner: 1/20 false alarms, 20/20
caught at 5 %"). The file has ``kind`` and ``schema_version``; :func:`load` refuses
others and says what to do.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PatchgateError
from ..files import read_json
from .baselines import BaselineStore

SCHEMA_VERSION = 1
KIND = "patchgate.calibration"


def load(path: Path) -> dict | None:
    """A calibration file, or None if there is none; a broken one is an error naming it."""
    if not path.exists():
        return None
    hint = f"run `patchgate calibrate` again, or delete {path}"
    doc = read_json(path, hint=hint)
    if doc.get("kind") != KIND or doc.get("schema_version") != SCHEMA_VERSION:
        raise PatchgateError(f"{path}: not a calibration file of schema {SCHEMA_VERSION}",
                             hint=hint)
    if not isinstance(doc.get("summary"), dict) or "kinds" not in doc["summary"]:
        raise PatchgateError(f"{path}: summary.kinds missing", hint=hint)
    return doc


def quote(store: BaselineStore) -> dict | None:
    """What a verdict says about the measured error rates of its profile, or None."""
    doc = load(store.calibration_path())
    if doc is None:
        return None
    kinds = doc["summary"]["kinds"]
    parts = []
    for label, k in sorted(kinds.items(), key=lambda kv: kv[1]["planted"]):
        if k["planted"] == 0:
            parts.append(f"{k['rejected']}/{k['runs']} false alarms")
        else:
            parts.append(f"{k['rejected']}/{k['runs']} caught at {label}")
    return {"text": "; ".join(parts), "created": doc.get("created"),
            "settings": doc.get("settings"),
            "cpu": (doc.get("environment") or {}).get("cpu"), "kinds": kinds}
