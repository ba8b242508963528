"""A calibration file's document, built from its runs, and the check that runs measured
apart may join one file (:mod:`.calibrate`'s ``--append``, :mod:`.calibration_merge`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ..errors import PatchgateError
from ..store import baselines, environment
from ..store.calibration import KIND, SCHEMA_VERSION
from .calibration_summary import summarize


def same_calibration(where: Path, head: dict, other: dict, hint: str) -> None:
    """Runs of ``head`` (a calibration file's or journal's, read from ``where``) may join
    those of ``other`` only with the same profile, settings and environment; else an
    error naming the file and what differs."""
    if head.get("profile") != other["profile"]:
        raise PatchgateError(f"{where}: calibrated for profile {head.get('profile')!r}, "
                             f"not {other['profile']!r}", hint=hint)
    if head.get("settings") != other["settings"]:
        raise PatchgateError(f"{where}: other settings {head.get('settings')} than "
                             f"{other['settings']}", hint=hint)
    differs = environment.same_environment(head.get("environment") or {},
                                           other["environment"])
    if differs:
        raise PatchgateError(f"{where}: measured in another environment "
                             f"({', '.join(differs)})", hint=hint)


def document(head: dict, records: list[dict], baselines_dir: Path) -> dict:
    """A calibration file's document: ``head`` (profile, environment, settings, load,
    wall_s), the summary of the ``records`` and the records, stamped now and with the
    commit of the checkout holding ``baselines_dir``."""
    kinds = sorted({r["planted"] for r in records} - {0.0})
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "profile": head["profile"],
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": baselines.git_commit(Path(baselines_dir).parent),
            "environment": head["environment"], "settings": head["settings"],
            "load": head["load"], "wall_s": head["wall_s"],
            "summary": summarize(records, kinds), "runs": records}
