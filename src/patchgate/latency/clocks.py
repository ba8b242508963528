"""Time outside the patch's reach: the engine's clock checked against the gate's.

A timed call is measured where the model runs (``Engine.timed_generate``): the precise
number. For the transformers engine that is the worker process, the process that runs
the patch, so a patch can swap its clock (``time.perf_counter = ...``) and report any
time it likes. The gate therefore also times every call from its own process, around
the call to the engine. The difference, the **gap**, is the transport to the worker and
back: it depends on the payload (the same for every configuration in a scenario), not
on how long the model computes, and nothing a patch does shortens it.

:func:`check` takes, per configuration and scenario, the median gap over the rounds (a
median, so a call the machine delayed now and then moves nothing), and sums it over the
scenarios. The configuration with the smallest sum shows what the transport costs. One
whose gaps exceed that by more than :data:`SLACK_S` a scenario or :data:`SHARE` of
its own measured time, plus :data:`Z` standard errors of the two sums (on a busy
machine the gate's side wakes late now and then: under two busy processes on 2 cores
single calls showed gaps of 13 ms, and the median of a look of one scenario moved by
2.3 ms), reported time the gate did not see pass, and the run ends with an error
naming its patch set. A configuration that is honestly faster has the same gaps, so a
real speed-up of any size passes. A swapped clock hides a share of every call, so its
gaps are steady and the allowance stays small.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from ..errors import PatchgateError
from ..stats import median_se

SLACK_S = 0.002  # per scenario: a loaded machine delays the gate's side by milliseconds
SHARE = 0.05  # of the configuration's own time: what a patch could hide below the check
Z = 4.0  # standard errors of the gaps' medians: a busy machine's late wake-ups


def gaps(engine_s: Mapping[str, Mapping[str, list[float]]],
         wall_s: Mapping[str, Mapping[str, list[float]]]) -> dict[str, dict[str, float]]:
    """``{configuration: {scenario: median of (gate's seconds - engine's seconds)}}``."""
    return {label: {name: statistics.median(w - e for e, w in zip(xs, wall_s[label][name],
                                                                    strict=False))
                    for name, xs in per.items() if xs and wall_s[label][name]}
            for label, per in engine_s.items()}


def spread(engine_s, wall_s) -> dict[str, float]:
    """``{configuration: standard error of its summed median gaps}``: per scenario the
    median's error from the gaps' spread (1.2533 x 1.4826 x MAD / sqrt(n)), added in
    squares. A busy machine wakes the gate late now and then; this is how much that
    moves the medians."""
    out = {}
    for label, per in engine_s.items():
        total = 0.0
        for name, xs in per.items():
            g = [w - e for e, w in zip(xs, wall_s[label][name], strict=False)]
            if len(g) > 1:
                total += median_se(g) ** 2
        out[label] = math.sqrt(total)
    return out


def check(engine_s, wall_s, describe: Mapping[str, str] | None = None) -> None:
    """Raise if a configuration's engine reported less time than the gate saw pass,
    beyond the transport the other configurations show and beyond :data:`Z` standard
    errors of the two sums (see the module docstring); ``describe`` names each
    configuration's patch set."""
    gap = gaps(engine_s, wall_s)
    if len(gap) < 2:
        return
    total = {label: sum(per.values()) for label, per in gap.items()}
    base_label = min(total, key=total.get)
    base = total[base_label]
    err = spread(engine_s, wall_s)
    for label, per in gap.items():
        measured = sum(statistics.median(xs) for xs in wall_s[label].values() if xs)
        excess = total[label] - base
        noise = Z * math.hypot(err[label], err[base_label])
        if excess > max(SLACK_S * len(per), SHARE * measured) + noise:
            who = (describe or {}).get(label, label)
            raise PatchgateError(
                f"latency: the engine of {who} reported {1000 * excess:.1f} ms a round less "
                f"than the gate measured around its calls ({100 * excess / measured:.0f} % "
                f"of its time), beyond the transport the other configurations show "
                f"({1000 * base:.1f} ms): it did not run on the gate's clock, so its "
                "timings cannot be trusted",
                hint="a patch must not change the timer (time.perf_counter and the like) or "
                "the engine's timing code; nothing was written")
