"""When a stored reference accuracy may stand in for measuring the reference now.

Only from this very environment (or with ``--force-environment``, the differences
noted) and only for the same model files and task data (never forced): otherwise the
reference is measured now, beside the candidate.
"""

from __future__ import annotations

from ..errors import PatchgateError
from ..store import baselines, workload


def reusable(stored: dict | None, env: dict, work: dict, force: bool, notes: list[str]
             ) -> bool:
    """Whether ``stored`` (a ``reference.json`` envelope) stands in for a measurement;
    the reasons it does not, or the environments it was forced across, go to ``notes``."""
    if not stored or not stored.get("accuracy"):
        return False
    changed = workload.differences((stored.get("extra") or {}).get("workload"), work)
    if changed:
        notes.append("stored reference accuracy not used: it was measured on other "
                     f"model files or task data ({'; '.join(changed)}); measured now")
        return False
    try:
        differences = baselines.check_comparable(stored, env, force)
    except PatchgateError:
        return False  # another environment: measure it now instead
    if differences:
        notes.append("stored reference accuracy from another environment used "
                     f"(--force-environment): {'; '.join(differences)}")
    return True
