"""The history of logged changes: ``baselines/<profile>/history.jsonl``.

One JSON object per line, appended by the gate for every change it logs
(``--accept`` or ``--record``). The trend plot, the badges and the drift check read
it. Fields of a record (``HISTORY_SCHEMA_VERSION`` 1; later fields are optional so
that older lines still load):

    schema_version  1
    date            ISO-8601 UTC time
    profile         the profile name
    verdict         "accepted" | "rejected" | "inconclusive"
    kept            true if the run was accepted and written as the new baseline
    new_patches     the names of the patches new in this change
    patches         the candidate's patch names
    score, S, C     the verdict's score and its parts
    accuracy_ratio  candidate / reference accuracy
    scenarios       {name: {"median_s", "reference_median_s"}}
    workload        the model files and task data fingerprint (optional)
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

from .. import stats
from ..errors import PatchgateError

HISTORY = "history.jsonl"
HISTORY_SCHEMA_VERSION = 1


def record(verdict: dict, kept: bool) -> dict:
    """The history line of a logged change, from its verdict."""
    rec = {
        "schema_version": HISTORY_SCHEMA_VERSION,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": verdict["profile"],
        "verdict": verdict["verdict"],
        "kept": kept,
        "new_patches": verdict["new_patches"],
        "patches": [p["name"] for p in verdict["patches"]["candidate"]],
        "score": verdict["score"], "S": verdict["S"], "C": verdict["C"],
        "accuracy_ratio": verdict["accuracy"]["ratio"],
        "scenarios": {r["name"]: {"median_s": r["median_s"],
                                  "reference_median_s": r["reference_median_s"]}
                      for r in verdict["scenarios"]},
    }
    if verdict.get("workload"):
        rec["workload"] = verdict["workload"]
    return rec


def line(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True) + "\n"


def read(path: Path) -> list[dict]:
    """The records of a history file; ``[]`` if there is none. Errors name the line."""
    if not path.exists():
        return []
    hint = f"fix or delete the line in {path} (the gate appends one per logged change)"
    records = []
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            raise PatchgateError(f"{path}:{n}: not valid JSON ({e.msg})", hint) from None
        if not isinstance(rec, dict):
            raise PatchgateError(f"{path}:{n}: expected a JSON object", hint)
        if rec.get("schema_version") != HISTORY_SCHEMA_VERSION:
            raise PatchgateError(
                f"{path}:{n}: schema_version {rec.get('schema_version')!r}, this patchgate "
                f"reads {HISTORY_SCHEMA_VERSION}", "upgrade patchgate or " + hint)
        for key in ("verdict", "score", "scenarios"):
            if key not in rec:
                raise PatchgateError(f"{path}:{n}: {key!r} missing", hint)
        if not _finite(rec["score"]):
            raise PatchgateError(f"{path}:{n}: score {rec['score']!r} is not a number", hint)
        records.append(rec)
    return records


def kept(records: list[dict]) -> list[dict]:
    """The records of accepted states: kept ones, or (older lines without ``kept``)
    accepted ones."""
    return [r for r in records if r.get("kept", r["verdict"] == "accepted")]


def change_points(records: list[dict], alpha: float = 0.05) -> list[dict]:
    """Where the score of the accepted states shifted (E-divisive over the kept
    records, in order): ``[{"index", "date", "patches", "before", "after", "p_value"}]``.
    ``index`` counts kept records from 0; ``date`` and ``patches`` are those of the
    first record after the shift."""
    series = kept(records)
    points = stats.e_divisive([r["score"] for r in series], alpha=alpha)
    return [{"index": cp.index, "date": series[cp.index].get("date"),
             "patches": series[cp.index].get("new_patches", []),
             "before": cp.before, "after": cp.after, "p_value": cp.p_value}
            for cp in points]


def _finite(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))
