"""Profiling one call where the model runs, for ``--explain`` (:mod:`patchgate.explain`).

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
import pstats
import time
from collections.abc import Callable
from pathlib import Path

from . import explain


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
    ops, kernels = explain.op_rows(prof.key_averages())

    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    try:
        fn()
    finally:
        pr.disable()
    python_wall = time.perf_counter() - t0
    pr.dump_stats(str(out_dir / "python.prof"))
    funcs = explain.python_rows(pstats.Stats(pr).stats)

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
        for r in explain.trace_rows(explain.read_trace(path)):
            into = rows.setdefault(r["name"], dict(r, count=0, total_s=0.0))
            into["count"] += r["count"]
            into["total_s"] += r["total_s"]
    kernels = any(r["kind"] == "kernel" for r in rows.values())
    return {"gpu" if kernels else "torch": list(rows.values())}
