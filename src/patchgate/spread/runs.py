"""Whole runs spread over a Ray cluster, one per node at a time.

A calibration is many whole verdicts (A/A runs and planted slowdowns, each with engines
started afresh). Each is independent, so they spread: every run is a Ray task that
holds its node's ``bench_slot`` (:mod:`.cluster`), so a node times one run at a time
and a run's configurations are compared on one node. Each result names the node and its
hardware class.

A node lost mid-run: Ray runs the task again on another node that offers a slot (a whole
run again, never half of one); when none can, the run is an error naming it, and
nothing is written. Nothing is left behind: a task's engines close with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..errors import PatchgateError
from .cluster import SLOT, node_here, ray_module

RETRIES = 2  # a run on a node that died is run again, on another node, this many times
HEARTBEAT_S = 60.0  # a line at least this often while runs are out (a GPU run is minutes)


def _on_node(fn: Callable, args: tuple, engine: str, device: str) -> dict:
    """One run, where Ray put it: ``fn(*args)`` with the node it ran on added."""
    record = fn(*args)
    record["node"] = node_here(engine, device)
    return record


def longest_first(jobs: Sequence[tuple], long: Callable[[tuple], bool]) -> list[int]:
    """The order in which the runs go to the nodes (indices into ``jobs``): the ``long``
    ones first, each kind in job order. Longest first leaves the short runs to fill the
    last wave, where job order can leave one node with two long runs after the others
    have finished (list scheduling: a makespan of about p + a, not 2p)."""
    return sorted(range(len(jobs)), key=lambda i: (not long(jobs[i]), i))


def spread(fn: Callable[..., dict], jobs: Sequence[tuple], *, engine: str, device: str,
           said: Callable[[int, dict], None] = lambda i, r: None,
           long: Callable[[tuple], bool] = lambda job: False,
           waiting: Callable[[int, int, float], None] = lambda done, total, s: None
           ) -> list[dict]:
    """``[fn(*job) for job in jobs]``, each a Ray task holding one bench slot, results in
    job order, each with its ``node`` (id and hardware class); the ``long`` jobs go to
    the nodes first (:func:`longest_first`). ``said(i, record)`` hears each result as it
    comes in (progress; ``i`` its index in ``jobs``); ``waiting(done, total, seconds)``
    every :data:`HEARTBEAT_S` without one (the nodes' own output stays on the nodes)."""
    ray = ray_module()
    t0 = time.perf_counter()
    task = ray.remote(num_cpus=0, resources={SLOT: 1}, max_retries=RETRIES)(_on_node)
    order = longest_first(jobs, long)
    refs = [task.remote(fn, tuple(jobs[i]), engine, device) for i in order]
    index = {ref: i for ref, i in zip(refs, order, strict=True)}
    out: dict[int, dict] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=HEARTBEAT_S)
            if not done:
                waiting(len(out), len(refs), time.perf_counter() - t0)
                continue
            i = index[done[0]]
            try:
                out[i] = ray.get(done[0])
            except ray.exceptions.RayError as e:
                raise PatchgateError(
                    f"run {i + 1} of {len(refs)} failed on the Ray cluster "
                    f"({type(e).__name__}: {str(e).splitlines()[0][:200]}); nothing was "
                    "written", hint="see the cluster's logs (ray logs); a node that died "
                    f"takes its run to another node {RETRIES} times, then the run fails"
                ) from e
            said(i, out[i])
    except BaseException:
        for ref in pending:  # Ctrl-C or a failed run: the others end too
            ray.cancel(ref, force=True)
        raise
    return [out[i] for i in range(len(refs))]
