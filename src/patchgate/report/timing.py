"""How long a run took, per phase, in one line: the verdict's ``timings_s``
(:class:`patchgate.report.console.Reporter` keeps them; ``total`` is the run's wall time
up to its judgement)."""

from __future__ import annotations

# The phases a reader of a verdict's time cares about, in the order they run (the
# accuracy guard's phases are summed under one name); the rest is "other".
_PHASES = (("engines", ("engines",)), ("latency", ("latency",)),
           ("confirm engines", ("confirm_engines",)), ("confirmation", ("confirm",)),
           ("explain", ("explain",)),
           ("accuracy", ("accuracy", "accuracy_candidate", "accuracy_reference")),
           ("attribution", ("attribution",)))


def time_line(verdict: dict) -> str | None:
    """How long the run took, per phase: ``in 346 s (engines 94, latency 235, ...)``, from
    the verdict's ``timings_s`` (None for a verdict without a total)."""
    t = verdict.get("timings_s") or {}
    total = t.get("total")
    if not total:
        return None
    parts, known = [], 0.0
    for name, keys in _PHASES:
        x = sum(t.get(k, 0.0) for k in keys)
        known += x
        if x >= 0.5:
            parts.append(f"{name} {x:.0f}")
    other = total - known
    if other >= 0.5:
        parts.append(f"other {other:.0f}")
    return f"in {total:.0f} s" + (f" ({', '.join(parts)})" if parts else "")
