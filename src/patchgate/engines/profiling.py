"""Profiling one call where the model runs, for ``--explain`` (:mod:`patchgate.latency.explain`).

:func:`profile_call` runs the call twice: once under torch.profiler (operators, and
kernels on CUDA; a Chrome trace is kept) and once under cProfile (Python functions,
including pure-Python time torch.profiler cannot see; the ``.prof`` file is kept,
readable with ``python -m pstats``). Two passes, so neither profiler's overhead lands
in the other's table. The files go to ``out_dir``; the tables come back as plain
rows (they cross the worker's pipe). None of this is a timing the gate decides on.

:func:`sglang_traces` finds the trace files SGLang's profiler wrote into a folder
(``*.trace.json.gz``, one per GPU rank), for the SGLang engine and server.
"""

from __future__ import annotations

import cProfile
import gzip
import json
import pstats
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def profile_call(fn: Callable[[], object], out_dir: Path, cuda: bool = False) -> dict:
    """Profile ``fn()`` (see the module docstring): ``{"tables": {"torch": rows,
    "python": rows[, "gpu": rows]}, "wall_s": {...}, "files": [names in out_dir]}``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    torch_wall = time.perf_counter() - t0
    prof.export_chrome_trace(str(out_dir / "torch.trace.json"))
    ops, kernels = op_rows(prof.key_averages())

    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    try:
        fn()
    finally:
        pr.disable()
    python_wall = time.perf_counter() - t0
    pr.dump_stats(str(out_dir / "python.prof"))
    funcs = python_rows(pstats.Stats(pr).stats)

    tables = {"torch": ops, "python": funcs}
    wall = {"torch": torch_wall, "python": python_wall}
    if kernels:
        tables["gpu"] = kernels
        wall["gpu"] = torch_wall
    return {"tables": tables, "wall_s": wall, "files": ["torch.trace.json", "python.prof"]}


def sglang_traces(folder: Path, since: float, timeout_s: float = 120.0,
                  poll_s: float = 1.0) -> list[Path]:
    """The trace files SGLang's profiler wrote into ``folder`` after ``since`` (a
    ``time.time()``), once their sizes stop changing; [] if none came within
    ``timeout_s`` (SGLang writes them after ``stop_profile`` returns)."""
    deadline = time.monotonic() + timeout_s
    sizes: dict[Path, int] = {}
    while time.monotonic() < deadline:
        found = [p for p in Path(folder).rglob("*.trace.json*")
                 if p.stat().st_mtime >= since - 1]
        now = {p: p.stat().st_size for p in found}
        if found and now == sizes:
            return sorted(found)
        sizes = now
        time.sleep(poll_s)
    return sorted(sizes)


def trace_tables(paths: list[Path]) -> dict:
    """One table over SGLang's trace files (ranks summed): ``gpu`` (kernels), or ``torch``
    (operators) for a trace without kernels."""
    rows: dict[str, dict] = {}
    for path in paths:
        for r in trace_rows(read_trace(path)):
            into = rows.setdefault(r["name"], dict(r, count=0, total_s=0.0))
            into["count"] += r["count"]
            into["total_s"] += r["total_s"]
    kernels = any(r["kind"] == "kernel" for r in rows.values())
    return {"gpu" if kernels else "torch": list(rows.values())}


# ------------------------------------- profiles as rows {name, where, kind, count, total_s}
def _short(path: str) -> str:
    return Path(path).name if path not in ("~", "") else ""


def _func_name(func: str) -> str:
    """cProfile's ``<built-in method time.sleep>`` as ``time.sleep``."""
    for prefix in ("<built-in method ", "<method "):
        if func.startswith(prefix) and func.endswith(">"):
            return func[len(prefix):-1].split(" of ")[0].strip("'")
    return func


def python_rows(stats: Mapping) -> list[dict]:
    """Rows of a cProfile ``pstats.Stats(...).stats`` dict: ``{(file, line, func): (cc,
    nc, tt, ct, callers)}``. ``total_s`` is the function's self time; ``caller`` names
    the caller that spent the most time in it (a builtin's culprit)."""
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, callers) in stats.items():
        caller = None
        if callers:
            (cfile, cline, cfunc), _ = max(callers.items(), key=lambda kv: kv[1][3])
            where = _short(cfile)
            caller = f"{_func_name(cfunc)}" + (f" ({where}:{cline})" if where else "")
        where = _short(file)
        rows.append({"name": _func_name(func), "where": f"{where}:{line}" if where else "",
                     "kind": "function", "count": int(nc), "total_s": float(tt),
                     "cum_s": float(ct), "caller": caller})
    return rows


def op_rows(averages: Iterable) -> tuple[list[dict], list[dict]]:
    """(operator rows, kernel rows) of torch.profiler's ``key_averages()``: self CPU time
    per operator; self device time where there is any (CUDA kernels)."""
    ops, kernels = [], []
    for e in averages:
        cpu = float(getattr(e, "self_cpu_time_total", 0.0)) / 1e6
        dev = float(getattr(e, "self_device_time_total", 0.0) or 0.0) / 1e6
        if cpu > 0:
            ops.append({"name": e.key, "where": "", "kind": "op", "count": int(e.count),
                        "total_s": cpu})
        if dev > 0:
            kernels.append({"name": e.key, "where": "", "kind": "kernel",
                            "count": int(e.count), "total_s": dev})
    return ops, kernels


def trace_rows(trace: Mapping) -> list[dict]:
    """Rows of a Chrome trace (torch.profiler's ``export_chrome_trace``, SGLang's
    ``*.trace.json.gz``): complete events of GPU kernels summed by name (``kind``
    "kernel"); a trace without kernels (CPU only) gives its operators' inclusive time
    (``kind`` "op")."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") in KERNEL_CATEGORIES]
    chosen, kind = (kernels, "kernel") if kernels else \
        ([e for e in events if e.get("cat") == "cpu_op"], "op")
    out: dict[str, dict] = {}
    for e in chosen:
        row = out.setdefault(e["name"], {"name": e["name"], "where": "", "kind": kind,
                                         "count": 0, "total_s": 0.0})
        row["count"] += 1
        row["total_s"] += float(e.get("dur", 0.0)) / 1e6
    return list(out.values())


def read_trace(path: Path) -> dict:
    """A Chrome trace file, gzipped or not."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)
