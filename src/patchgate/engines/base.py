"""The engine protocol: the handful of verbs the gate needs from an inference engine.

One engine instance holds one loaded, patched model (one configuration). Every verb
takes and returns token ids; the accuracy guard and the latency scenarios use the
same instance. An engine is built as ``Engine(profile, patches, label, share)``
(``share``: the fraction of the device it may take, several configurations being
loaded side by side) and registered by name in :mod:`patchgate.registry`; it may
load in the background until :meth:`Engine.ready`.
"""

from __future__ import annotations

import time
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
    Their CPU time is not told apart from the gate's (``cpu_seconds`` is None)."""

    def cpu_seconds(self) -> float | None:
        return None

    def timed_generate(self, batch: list[list[int]], max_new_tokens: int) -> Timing:
        self.synchronize()
        t0 = time.perf_counter()
        out = self.generate(batch, max_new_tokens)
        self.synchronize()
        dt = time.perf_counter() - t0
        check_lengths(out, len(batch), max_new_tokens, getattr(self, "label", self.name))
        return Timing(dt, tuple(int(row[0]) for row in out))


def check_lengths(out: list[list[int]], rows: int, n: int, who: str) -> None:
    """Every request returned exactly ``n`` tokens, or the engine is broken."""
    if len(out) != rows or any(len(r) != n for r in out):
        got = sorted({len(r) for r in out})
        raise PatchgateError(
            f"engine {who} returned {len(out)} rows with lengths {got}; expected {rows} x {n}",
            hint="the engine must honour fixed output lengths (ignore EOS); check its settings",
        )
