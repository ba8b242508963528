"""Work off the clock: the machine's other CPU work while each configuration is timed.

The configurations are timed one call at a time; while one runs, the others' engines
wait. A patch can use that: work that competes for the CPU only while its own engine
waits (a thread in the engine's process, a child process, a detached daemon) leaves the
candidate's calls a quiet machine and gives every other configuration a busy one. Its
own timings show nothing, and the others' slow down a lot: beside one busy process,
torch's spinning threads made a forward pass 100x slower (:mod:`patchgate.engines.cpu`).

So around every timed call the gate reads the CPU time the whole machine has used
(``/proc/stat``, over this process's CPUs) and the CPU time of the timed engine's own
process (all its threads, read from outside: :meth:`Engine.cpu_seconds`). The
difference is the **other work** during the call; divided by the call's time, it is
how many cores other work kept busy while that configuration was timed. The order of
the configurations rotates from round to round and honest engines sleep while they
wait, so every configuration meets the same background, whatever the load.
:func:`check` compares the candidate with each configuration it is compared with,
round by round, per scenario and for the six scenarios together, and raises when the
candidate met less other work by more than :data:`MARGIN` cores on average and by
more than :data:`Z` standard errors of that average (more with fewer than 15 rounds:
Student's t at 1e-4): something worked while the others were timed and rested while
the candidate was. The rounds of every look of the phase count together.

Measured on the 2-core runner (8 rounds, the embedded model; ``/proc/stat`` counts
whole 10 ms ticks, which the standard error allows for): honest pairs differed by at
most 0.02 cores over the six scenarios together (quiet, under one busy process, a
candidate with 1 thread against 2); a helper process that spins whenever the
candidate's engine is idle made the candidate look 3-18x faster and differed by 0.8
cores (0.43 under load); one that spins a tenth of that time faked 5-14 % in some
scenarios and differed by 0.07. A candidate that is itself busier during its own
calls (work it hands to a child process) can only look slower, so that is not checked.
Where an engine cannot tell its CPU time (SGLang's server processes), the check is off.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping

from ..engines import cpu
from ..errors import PatchgateError
from ..stats import mean_se, student_t_1e4

MARGIN = 0.05  # cores: a twentieth of a core of work that only the others meet
Z = 5.0  # standard errors of the per-round average: background drift does not reach it
MIN_ROUNDS = 3  # rounds before the rounds' own spread means anything


def bar(rounds: int) -> float:
    """How many standard errors a difference over ``rounds`` rounds must reach: with few
    rounds their spread is itself uncertain, so Student's t at 1e-4 where it is above Z."""
    return max(Z, student_t_1e4(rounds - 1)) if rounds >= 2 else Z


class Meter:
    """Other work around each timed call, by configuration, scenario and round, over a
    whole latency phase (every look; round numbers are the phase's own)."""

    def __init__(self, cpu_seconds: Mapping[str, Callable[[], float | None]] | None = None,
                 machine: Callable[[], float | None] = cpu.busy_seconds):
        self._machine = machine
        # {label: {scenario: {round: (other CPU seconds, seconds)}}}
        self.calls: dict[str, dict[str, dict[int, tuple[float, float]]]] = {}
        self.on = False
        # the error over every call so far (:func:`finding`), set after each measurement
        self.finding: PatchgateError | None = None
        self.bind(cpu_seconds or {})

    def bind(self, cpu_seconds: Mapping[str, Callable[[], float | None]]) -> None:
        """The engines of the next measurement (a later look may time fewer, a
        confirmation fresh ones); on only where the machine and every engine can tell."""
        self._own = dict(cpu_seconds)
        for label in cpu_seconds:
            self.calls.setdefault(label, {})
        self.on = self._machine() is not None and \
            all(f() is not None for f in cpu_seconds.values())

    def start(self, label: str) -> tuple[float, float, float] | None:
        """Readings before a call of ``label`` (None when the meter is off)."""
        if not self.on:
            return None
        return time.perf_counter(), self._machine(), self._own[label]()

    def stop(self, label: str, scenario: str, r: int,
             before: tuple[float, float, float] | None) -> None:
        """Readings after the call: its other work and its time."""
        if before is None:
            return
        machine, own, t = self._machine(), self._own[label](), time.perf_counter()
        if machine is None or own is None:
            self.on = False
            return
        t0, machine0, own0 = before
        other = max(0.0, (machine - machine0) - (own - own0))
        self.calls[label].setdefault(scenario, {})[r] = (other, t - t0)


def _pooled(calls: Mapping[str, Mapping[int, tuple[float, float]]]
            ) -> dict[int, tuple[float, float]]:
    """Every scenario's call of a round together: the round's other work and time."""
    out: dict[int, tuple[float, float]] = {}
    for per_round in calls.values():
        for r, (other, wall) in per_round.items():
            o, w = out.get(r, (0.0, 0.0))
            out[r] = (o + other, w + wall)
    return out


def compare(mine: Mapping[int, tuple[float, float]], theirs: Mapping[int, tuple[float, float]],
            cpus: int) -> tuple[float, float, int]:
    """``(mean, standard error, rounds)`` of the per-round difference in cores of other
    work, theirs less mine. The error is the larger of the rounds' own spread and what
    the counting alone leaves (``/proc/stat`` counts whole ticks on each CPU)."""
    rounds = sorted(r for r in set(mine) & set(theirs) if mine[r][1] > 0 and theirs[r][1] > 0)
    if not rounds:
        return 0.0, math.inf, 0
    diffs = [theirs[r][0] / theirs[r][1] - mine[r][0] / mine[r][1] for r in rounds]
    n = len(diffs)
    mean, spread = mean_se(diffs)
    tick = 1 / cpu.CLK_TCK * math.sqrt(cpus / 12)  # one window's counting error, seconds
    walls = [w for r in rounds for w in (mine[r][1], theirs[r][1])]
    counting = tick * math.sqrt(2) / statistics.fmean(walls) / math.sqrt(n)
    return mean, max(spread, counting), n


def check(meter: Meter, describe: Mapping[str, str] | None = None) -> None:
    """Raise :func:`finding`'s error, if there is one."""
    error = finding(meter, describe)
    if error is not None:
        raise error


def finding(meter: Meter, describe: Mapping[str, str] | None = None
            ) -> PatchgateError | None:
    """The error to raise if the candidate met less other work than a configuration it
    is compared with, in a scenario or in the round as a whole (module docstring); None
    when it did not, when the meter was off or the candidate shares its engine with
    every configuration."""
    if not meter.on:
        return None
    names = list(meter.calls)
    cand = next((n for n in names if "candidate" in n.split("+")), None)
    if cand is None:
        return None
    cpus = len(cpu.usable_cores())
    for other in names:
        if other == cand:
            continue
        items = {s: (meter.calls[cand].get(s, {}), meter.calls[other][s])
                 for s in meter.calls[other]}
        items[f"all {len(items)} scenarios together"] = (_pooled(meter.calls[cand]),
                                                         _pooled(meter.calls[other]))
        for item, (mine, theirs) in items.items():
            mean, se, n = compare(mine, theirs, cpus)
            if n >= MIN_ROUNDS and mean > MARGIN and mean > bar(n) * se:
                who = (describe or {}).get(cand, cand)
                them = (describe or {}).get(other, other)
                return PatchgateError(
                    f"latency: in {item}, other work kept {mean:.2f} more CPU cores busy "
                    f"while {them} was timed than while {who} was (+-{se:.2f}, {n} rounds):"
                    f" something ran while {who}'s engine waited and rested while it was "
                    "timed, so the comparison cannot be trusted",
                    hint="a patch must not start threads or processes that work while its "
                    "engine is idle; if another job on this machine does, rerun when it has "
                    "ended; nothing was written")
    return None


def after_judgement(error: PatchgateError | None, rejected: bool) -> list[str]:
    """A :func:`finding` is raised unless the candidate is ``rejected`` anyway: work off
    the clock only makes the others slower, so it cannot have caused a rejection (and a
    slower candidate meets less of the others' leftover work per second, which is no
    attack). A rejection keeps the finding as a note."""
    if error is None:
        return []
    if not rejected:
        raise error
    return [f"{error.message} (the candidate is rejected all the same: work that only "
            "slows the others cannot have caused that)"]
