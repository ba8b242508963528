"""Timing: configurations measured side by side, rounds interleaved.

One timed call is ``sync; perf_counter; generate; sync; perf_counter``, taken where
the model runs (``Engine.timed_generate``). For every
round and scenario, each configuration runs once, in an order that rotates from
round to round (A B C, B C A, C A B, ...), so drift of a shared machine falls on
all configurations alike. The first ``warmup`` rounds are thrown away; the raw
samples of the others are kept.
"""

from __future__ import annotations

from collections.abc import Mapping

from .engines.base import Engine
from .scenarios import Scenario, prompt_ids


def measure(engines: Mapping[str, Engine], scenarios: list[Scenario], rounds: int,
            warmup: int, seed: int = 0, progress=None) -> dict[str, dict[str, list[float]]]:
    """Raw latency samples: ``{config: {scenario name: [seconds, ...]}}``.

    ``progress`` (optional) is a tqdm-like object with ``update(n)`` and
    ``set_postfix_str(s)``; it advances once per timed or warm-up call.
    """
    labels = list(engines)
    vocab = min(e.vocab_size for e in engines.values())
    batches = {s.name: prompt_ids(s, vocab, seed) for s in scenarios}
    samples: dict[str, dict[str, list[float]]] = {c: {s.name: [] for s in scenarios}
                                                  for c in labels}
    for r in range(warmup + rounds):
        tag = f"warm-up {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{rounds}"
        for s in scenarios:
            k = r % len(labels)
            for label in labels[k:] + labels[:k]:
                if progress is not None:
                    progress.set_postfix_str(f"{tag} {s.name} {label}")
                dt = engines[label].timed_generate(batches[s.name], s.output_len)
                if r >= warmup:
                    samples[label][s.name].append(dt)
                if progress is not None:
                    progress.update(1)
    return samples
