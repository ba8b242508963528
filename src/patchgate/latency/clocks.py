"""Time outside the patch's reach: the engine's clock checked against the gate's.

A timed call is measured where the model runs (``Engine.timed_generate``): the precise
number. For the transformers engine that is the worker process, the process that runs
the patch, so a patch can swap its clock (``time.perf_counter = ...``) and report any
time it likes. The gate therefore also times every call from its own process, around
the call to the engine: that wall time includes the transport to the worker and back,
which is the same for every configuration (the same payloads), and nothing a patch
can change.

:func:`check` compares, per configuration, the engine's seconds with the gate's, call
by call: the median share of the wall time that the engine reports (a median, so a
call the machine delayed now and then moves nothing). Honest configurations report
nearly the same share, since they have the same calls and the same transport; one
whose share is lower than the highest by more than the transport could explain
(twice the highest configuration's own gap, plus 2 points) reported time the gate did
not see pass, and the run ends with an error naming its patch set.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from ..errors import PatchgateError

SLACK = 0.02  # beyond twice the measured transport share


def shares(engine_s: Mapping[str, Mapping[str, list[float]]],
           wall_s: Mapping[str, Mapping[str, list[float]]]) -> dict[str, float]:
    """Per configuration: the median over its timed calls of the engine's seconds over
    the gate's (capped at 1: an engine cannot take longer than the call around it)."""
    out = {}
    for label, per in engine_s.items():
        pairs = [(x, w) for name, xs in per.items()
                 for x, w in zip(xs, wall_s[label][name], strict=False) if w > 0]
        if pairs:
            out[label] = statistics.median(min(1.0, x / w) for x, w in pairs)
    return out


def check(engine_s, wall_s, describe: Mapping[str, str] | None = None) -> None:
    """Raise if a configuration's engine reported less time than the gate saw pass
    (see the module docstring); ``describe`` names each configuration's patch set."""
    share = shares(engine_s, wall_s)
    if len(share) < 2:
        return
    best = max(share.values())
    allowed = best - (SLACK + 2 * max(0.0, 1 - best))
    low = {label: s for label, s in share.items() if s < allowed}
    if low:
        label, s = min(low.items(), key=lambda kv: kv[1])
        who = (describe or {}).get(label, label)
        raise PatchgateError(
            f"latency: the engine of {who} reported {100 * s:.0f} % of the time the gate "
            f"measured around its calls (the other configurations: up to {100 * best:.0f} "
            "%): it did not run on the gate's clock, so its timings cannot be trusted",
            hint="a patch must not change the timer (time.perf_counter and the like) or "
            "the engine's timing code; nothing was written")
