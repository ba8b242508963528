"""One run of a calibration (:mod:`patchgate.tools.calibrate`), wherever it runs (here,
or as a Ray task on a node): a planted patch (:mod:`patchgate.tools.planted`) written
into a scratch folder, busy processes beside it for the "load" condition, and the latency
phase of a gate run against the unpatched model, engines started afresh. The record says
what the gate would answer, what it measured, and how long each phase took."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from .. import stats
from ..engines.configurations import Configurations
from ..latency import decide, looks
from ..latency.measure import balanced_rounds
from ..patches import discover
from ..report.console import Reporter, Silent
from ..verdict import evidence
from . import planted
from .calibration_replay import first_look
from .load import cpu_load


def _patches(folder: Path, fraction: float, engine: str):
    sub = folder / ("neutral" if fraction == 0 else f"slow-{100 * fraction:g}")
    if fraction == 0:
        planted.neutral(sub)
    else:
        planted.slowdown(sub, fraction, engine)
    return discover(sub)


def one_run(prof, patches, reporter) -> dict:
    """One latency phase of the candidate ``patches`` against the unpatched model: what
    the gate would answer (:func:`patchgate.verdict.evidence.status`, the verdict's own
    latency rule: accepted, rejected or inconclusive), and what it measured (the first
    look's rounds too, for ``calibrate --replay``)."""
    t0 = time.perf_counter()
    sets = {"candidate": patches, "current": [], "reference": []}
    with Configurations(prof, sets, lambda _s: None) as configs:
        reporter.phase("engines")
        configs.start()
        reporter.phase("latency")
        result = looks.run(configs, prof, reporter)
        threads = configs.cpu_threads
        # the timed calls ran with the gate's garbage collector off (engines.base.Timed;
        # SGLang since 2026-12-07): runs from before and after stay told apart
        collector_off = any(getattr(e, "collector_off", False)
                            for e in configs.by_name().values())
        reporter.phase("close")
    reporter.phase("done")
    outcome = evidence.status(result)
    slower = [item for item in result.decisions["current"]
              if result.final("current", item) == stats.SLOWER]
    first = result.decisions["current"]
    widths = {}
    a = result.alpha_look
    k = balanced_rounds(prof.rounds, 2)  # the first look's rounds (two configurations)
    for s in result.scenarios:
        c, b = result.samples["candidate"][s.name], result.samples["current"][s.name]
        paired = stats.hodges_lehmann(stats.log_ratios(c[:k], b[:k]), a)
        _, lo, hi = stats.shift_interval(c[:k], b[:k], a)
        widths[s.name] = {"paired": _finite(paired.high - paired.low),
                          "unpaired": _finite(hi - lo)}
    return {
        "outcome": outcome, "rejected": outcome == evidence.REJECTED, "slower": slower,
        "score_ratio": first[decide.SCORE].comparison.ratio,
        "ratios": {s.name: first[s.name].comparison.ratio for s in result.scenarios},
        "outcomes": {item: result.final("current", item) for item in first},
        "noise": evidence.noise(result),
        "looks": result.looks, "confirm_looks": result.confirm_looks,
        "alone": None if result.alone is None else {
            "item": result.alone.item, "outcome": result.alone.decision.outcome},
        "ci_widths": widths, "threads": threads, "collector_off": collector_off,
        "first_look_s": first_look(result.samples, result.scenarios, k),
        "wall_s": round(time.perf_counter() - t0, 1),
        "timings_s": {k: round(v, 1) for k, v in getattr(reporter, "timings", {}).items()},
    }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def run_job(prof, fraction: float, cond: str, load: int, run: int, reporter=None) -> dict:
    """One run of a calibration, wherever it runs (here, or on a Ray node): the planted
    patch of ``fraction`` written into a scratch folder, ``load`` busy processes beside it
    (the "load" condition), the latency phase of a gate run (:func:`one_run`)."""
    with tempfile.TemporaryDirectory(prefix="patchgate-calibrate-") as tmp:
        patches = _patches(Path(tmp), fraction, prof.engine)
        with cpu_load(load):
            rec = one_run(prof, patches, _Quiet(reporter))
    return rec | {"planted": fraction, "run": run, "condition": cond}


class _Quiet(Reporter):
    """A run's reporter inside a calibration: its bars and its seconds per phase
    (``timings``), none of its step lines."""

    def __init__(self, reporter=None):
        super().__init__(quiet=True)
        self.progress = reporter.progress if reporter else lambda total, desc: Silent(total)

    def say(self, text: str) -> None:
        pass
