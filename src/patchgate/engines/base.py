"""The engine protocol: the handful of verbs the gate needs from an inference engine.

One engine instance holds one loaded, patched model (one configuration). Every verb
takes and returns token ids; the accuracy guard and the latency scenarios use the
same instance. An engine is built as ``Engine(profile, patches, label, share)``
(``share``: the fraction of the device it may take, several configurations being
loaded side by side) and registered by name in :mod:`patchgate.registry`; it may
load in the background until :meth:`Engine.ready`.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import NamedTuple, Protocol

from ..errors import PatchgateError


class Timing(NamedTuple):
    """One timed call: its seconds, and each row's first generated token (what the call
    computed: the gate checks it against the reference's, :mod:`patchgate.latency.outputs`)."""

    seconds: float
    first: tuple[int, ...]


def described(label: str, patch_names) -> str:
    """A configuration and its patches, for messages: ``candidate (0001-x.py)``."""
    return f"{label} ({', '.join(patch_names) or 'no patches'})"


class Engine(Protocol):
    name: str  # its name in patchgate.registry.ENGINES
    label: str  # the configuration it runs ("candidate", "reference", ...)
    vocab_size: int
    tokenizer: object  # a transformers tokenizer, or None where none is loaded

    def ready(self) -> Engine:
        """Wait until the model is loaded and patched (engines load in parallel)."""

    def describe(self) -> str:
        """The configuration and its patches, for messages: ``candidate (0001-x.py)``."""

    def generate(self, batch: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Greedy, exactly ``max_new_tokens`` new tokens per row (EOS ignored)."""

    def generate_until(self, prompts: list[list[int]], max_new_tokens: int,
                       stop_ids: frozenset[int]) -> list[list[int]]:
        """Greedy; a row ends after a token in ``stop_ids`` or ``max_new_tokens``."""

    def loglikelihood(self, requests: list[tuple[list[int], list[int]]]
                      ) -> list[tuple[float, bool]]:
        """For each (context, continuation): sum of log p(continuation | context), and
        whether greedy decoding would produce the continuation."""

    def synchronize(self) -> None:
        """Wait until queued device work is done (timing boundary)."""

    def timed_generate(self, batch: list[list[int]], max_new_tokens: int) -> Timing:
        """One :meth:`generate` call timed where the model runs: seconds, first tokens."""

    def profile_generate(self, batch: list[list[int]], max_new_tokens: int, out_dir
                         ) -> dict:
        """One :meth:`generate` call under a profiler (``--explain``): the tables of
        :func:`patchgate.engines.profiling.trace_tables` and the trace files."""

    def cpu_seconds(self) -> float | None:
        """CPU seconds used so far by the process that runs the model (all its threads),
        read from the gate's side (:mod:`patchgate.latency.offclock`); None where the
        engine cannot tell (the model runs in the gate's process, or in a server's)."""

    def close(self) -> None:
        """Release the model and any worker processes; safe to call twice."""


class Timed:
    """``timed_generate`` for engines that run in this process:
    ``sync; perf_counter; generate; sync; perf_counter``, output lengths checked.
    Their CPU time is not told apart from the gate's (``cpu_seconds`` is None).

    ``collector_off``: Python's cyclic garbage collector is off during the timed call
    (timeit's practice) where this process only drives a model that runs in processes of
    its own (SGLang's scheduler, where the patch runs too). On an H100
    (docs/gpu-runs/2026-12-07e) a pause of about half a second landed on the same call in
    every run: the fourth candidate prefill_b64 call took 3.95-4.07 s against 3.44-3.63 s,
    in 3 of 3 calibration runs (and a reference decode_b64 call 2.18 s against 1.70 s in
    an earlier verdict). A full collection fits: a fixed pause whatever the call, at an
    allocation count the same sequence of calls reaches at the same call (one of this
    process's heap with torch, transformers and lm-eval loaded takes 0.2 s on the 2-core
    CPU runner; SGLang's heap is larger). Off, a collection runs at the first allocation
    after the call, off the clock. Where the patch runs in the timed process (the
    transformers engine), the collector stays on: the garbage a patch makes is part of
    its cost."""

    collector_off = False

    def cpu_seconds(self) -> float | None:
        return None

    def timed_generate(self, batch: list[list[int]], max_new_tokens: int) -> Timing:
        with collector_paused(self.collector_off):
            self.synchronize()
            t0 = time.perf_counter()
            out = self.generate(batch, max_new_tokens)
            self.synchronize()
            dt = time.perf_counter() - t0
        check_lengths(out, len(batch), max_new_tokens, getattr(self, "label", self.name))
        return Timing(dt, tuple(int(row[0]) for row in out))


@contextlib.contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block (when ``pause``), and back
    on after it, also when the block raises, unless it was off before."""
    was = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was:
            gc.enable()


def check_lengths(out: list[list[int]], rows: int, n: int, who: str) -> None:
    """Every request returned exactly ``n`` tokens, or the engine is broken."""
    if len(out) != rows or any(len(r) != n for r in out):
        got = sorted({len(r) for r in out})
        raise PatchgateError(
            f"engine {who} returned {len(out)} rows with lengths {got}; expected {rows} x {n}",
            hint="the engine must honour fixed output lengths (ignore EOS); check its settings",
        )
