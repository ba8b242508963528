"""How many CPU threads a run's engines use when the profile leaves it open.

torch's CPU thread pool (OpenMP) makes its threads spin at every barrier. With as many
threads as cores and another busy process on the machine, a thread that shares its core
with that process holds every barrier up while the others spin. Measured on the 2-core
runner (the embedded model, median of 30 forward passes, 2026-12-05):

| | decode, batch 8 | prefill, 256 tokens |
| --- | --- | --- |
| quiet, 2 threads | 1.7 ms | 10-13 ms |
| quiet, 1 thread | 2.4 ms | 17-19 ms |
| one busy process beside it, 2 threads | 215 ms | 732 ms |
| one busy process beside it, 1 thread | 2.3 ms | 16 ms |

So a run whose profile sets no ``threads`` gives its engines one thread per core that
is free when the engines first start: the cores this process may run on, less the CPU
time other processes used over a short window, rounded, at least one. It is decided
once per run (:class:`patchgate.engines.configurations.Configurations`), so every
configuration, a confirmation's fresh processes included, runs with the same count and
the paired comparison stays fair. A patch's ``SERVER_ARGS`` ``threads`` still wins for
its own configuration, and a profile that sets ``threads`` is taken as it is.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

WINDOW_S = 0.5
_STAT = Path("/proc/stat")


def usable_cores() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy so far, over this process's CPUs
    (/proc/stat); None where it cannot tell. Resolution: one clock tick (10 ms) a CPU."""
    t = _ticks(usable_cores())
    return None if t is None else t[0] / CLK_TCK


def process_seconds(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used so far, all its threads, read from outside
    to the nanosecond (``clock_getcpuclockid``); None where the system cannot tell."""
    try:
        clock = ctypes.c_int()
        if _libc().clock_getcpuclockid(int(pid), ctypes.byref(clock)) != 0:
            return None
        ts = _Timespec()
        if _libc().clock_gettime(clock.value, ctypes.byref(ts)) != 0:
            return None
        return ts.tv_sec + ts.tv_nsec / 1e9
    except (OSError, AttributeError):
        return None


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


try:
    CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):
    CLK_TCK = 100


def _ticks(cpus: list[int]) -> tuple[int, int] | None:
    """(busy, total) jiffies summed over ``cpus`` from /proc/stat; None where unreadable.
    Busy is everything but idle and iowait; steal (a VM's host took the core) is busy."""
    try:
        lines = _STAT.read_text().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    busy = total = 0
    for line in lines:
        parts = line.split()
        if not parts or parts[0] not in wanted:
            continue
        values = [int(v) for v in parts[1:9]]  # user nice system idle iowait irq softirq steal
        idle = values[3] + values[4]
        total += sum(values)
        busy += sum(values) - idle
    return (busy, total) if total else None


def busy_cores(window_s: float = WINDOW_S) -> float | None:
    """How many of the usable cores other work kept busy over ``window_s`` (this process
    sleeps meanwhile); None where /proc/stat cannot tell (not Linux)."""
    cpus = usable_cores()
    first = _ticks(cpus)
    if first is None:
        return None
    time.sleep(window_s)
    second = _ticks(cpus)
    if second is None or second[1] <= first[1]:
        return None
    return len(cpus) * (second[0] - first[0]) / (second[1] - first[1])


def threads_for(cores: int, busy: float | None) -> int:
    """One thread per free core: ``cores - busy`` rounded, at least 1, at most ``cores``
    (all of them when ``busy`` is unknown)."""
    if busy is None:
        return max(1, cores)
    return max(1, min(cores, int(cores - busy + 0.5)))


def pin(profile) -> tuple[object, str | None]:
    """``(profile, note)``: the profile with ``threads`` fixed for this run, and a
    sentence when other work took cores (None when every core was free, or when the
    profile already sets threads or does not run on the CPU)."""
    if profile.threads is not None or profile.device != "cpu":
        return profile, None
    cores = len(usable_cores())
    busy = busy_cores()
    threads = threads_for(cores, busy)
    pinned = profile.with_overrides(threads=threads)
    if threads >= cores:
        return pinned, None
    return pinned, (f"other processes kept {busy:.1f} of the {cores} cores busy when the "
                    f"engines started: they ran with {threads} CPU thread"
                    f"{'s' if threads != 1 else ''} instead of {cores} (torch's spinning "
                    "threads would wait on the busy cores); every configuration used the "
                    "same count")
