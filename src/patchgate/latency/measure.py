"""Timing: configurations measured side by side, rounds interleaved and counterbalanced.

One timed call is ``sync; perf_counter; generate; sync; perf_counter``, taken where
the model runs (``Engine.timed_generate``). For every round and scenario, each
configuration runs once, in an order that rotates from round to round (A B C,
B C A, C A B, ...), so drift of a shared machine falls on all configurations
alike.

Where a call stands in its round matters on a shared CPU: the call right after
another process's call is slower (that process's threads still spin for a few
milliseconds, and the caches hold its data), by up to 1.9x for a 5 ms call on 2
cores. Two measures keep that from turning into a difference between
configurations:

- counterbalancing: the number of timed rounds is rounded up to a multiple of the
  number of configurations, so each configuration takes each place in the order
  equally often (with 7 rounds and 2 configurations one of them would be first 4
  times out of 7, and its median would be a "first" sample);
- ``settle_s``: a short pause before each timed call, so the previous call's
  threads are asleep when the next one starts.

Every round draws fresh token ids (:func:`patchgate.latency.scenarios.prompt_ids` of
the round's index), the same for every configuration within the round, so the pairing
stays and a cache keyed by the input (a content cache in a patch, a prefix cache left
on) has nothing to remember. The gate also times every call from its own process
(:mod:`.clocks`): an engine that reports less time than passed is an error; and each
call's first tokens are kept (``answers``) for the gate to check against the
reference's on the same inputs (:mod:`.outputs`), and the machine's other CPU work
during each call is summed per configuration (:mod:`.offclock`): work that runs only
while the others are timed is an error.

The first ``warmup`` rounds are thrown away (their calls may stop after
``warmup_tokens``: the shapes warm up, the long decode is not paid for); the raw
samples of the others are kept. A scenario the profile ``repeats`` k times is sampled
as the mean of k back-to-back calls of one configuration, each on token ids of its own
(the same k for every configuration): a very short call's jitter shrinks, and a sample
still compares the same inputs. A scenario the profile lists as ``primed`` has one
untimed call of its own shape on the same engine right before each timed sample.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..engines.base import Engine
from . import clocks, offclock
from .scenarios import Scenario, prompt_ids


@dataclass(frozen=True)
class Rounds:
    """One measurement's schedule: ``timed`` rounds (rounded up by
    :func:`balanced_rounds`) after ``warmup`` thrown-away ones; ``seed`` draws the
    token batches; ``settle_s`` is the pause before each call."""

    timed: int
    warmup: int = 0
    seed: int = 0
    settle_s: float = 0.0
    first: int = 0  # the index of the first round: each round draws its own token ids
    warmup_tokens: int | None = None  # a warm-up call's output, at most (None: whole)
    repeats: dict = field(default_factory=dict)  # {scenario: calls a timed sample averages}
    primed: frozenset = frozenset()  # scenarios whose timed samples follow an untimed call

    @classmethod
    def of(cls, profile, warmup: bool = True, first: int = 0, rounds: int | None = None
           ) -> Rounds:
        """The profile's schedule (``warmup=False``: a further look, no warm-up), its
        rounds numbered from ``first`` (looks and confirmations use their own ranges);
        ``rounds`` timed rounds instead of the profile's (a confirmation's)."""
        return cls(rounds or profile.rounds, profile.warmup if warmup else 0, profile.seed,
                   profile.settle_s, first, profile.warmup_tokens, dict(profile.repeats),
                   frozenset(profile.primed))

    def calls(self, scenario: Scenario, timed: bool) -> int:
        """Back-to-back calls of one sample: the profile's ``repeats``, 1 in a warm-up."""
        return self.repeats.get(scenario.name, 1) if timed else 1

    def output_len(self, scenario: Scenario, timed: bool) -> int:
        """Tokens a call generates: the scenario's, or at most ``warmup_tokens`` in a
        warm-up call (the same prompt shape and batch, a short decode)."""
        if timed or self.warmup_tokens is None:
            return scenario.output_len
        return min(scenario.output_len, self.warmup_tokens)


def balanced_rounds(rounds: int, configurations: int) -> int:
    """``rounds`` rounded up to a multiple of ``configurations`` (at least one round)."""
    n = max(1, configurations)
    return max(n, math.ceil(rounds / n) * n)


def orders(labels: list[str], rounds: int) -> list[list[str]]:
    """The order of the configurations in each of ``rounds`` rounds: a rotation, so
    over any ``len(labels)`` consecutive rounds each label takes each place once."""
    n = len(labels)
    return [labels[r % n:] + labels[:r % n] for r in range(rounds)]


def measure(engines: Mapping[str, Engine], scenarios: list[Scenario], rounds: Rounds,
            progress=None, answers: dict | None = None, meter: offclock.Meter | None = None
            ) -> dict[str, dict[str, list[float]]]:
    """Raw latency samples: ``{config: {scenario name: [seconds, ...]}}``, with
    :func:`balanced_rounds` samples per configuration and scenario, each round on fresh
    token ids; the engines' clocks checked against the gate's (:func:`clocks.check`).
    ``answers`` (optional): ``{config: {scenario: [...]}}`` gets each timed call's first
    tokens appended (what :func:`patchgate.latency.outputs.check` reads). ``meter``
    (optional) sums the other work met by the calls over several measurements (a
    phase's looks); after each, its ``finding`` is the off-clock error over all of them
    (:mod:`.offclock`), for the caller to raise. Without one, that error is raised here.

    ``progress`` (optional) is a tqdm-like object with ``update(n)`` and
    ``set_postfix_str(s)``; it advances once per timed or warm-up call.
    """
    vocab = min(e.vocab_size for e in engines.values())
    batch: dict[tuple[str, int], list[list[list[int]]]] = {}
    wall: dict[str, dict[str, list[float]]] = {c: {s.name: [] for s in scenarios}
                                               for c in engines}
    own_meter = meter is None
    meter = meter or offclock.Meter()
    meter.bind({c: e.cpu_seconds for c, e in engines.items()})

    def call(label: str, s: Scenario, r: int, timed: bool) -> float:
        k = rounds.calls(s, timed)
        primer = timed and s.name in rounds.primed
        key = (s.name, rounds.first + r)
        if key not in batch or len(batch[key]) < k + primer:  # the same for every config
            batch.clear()
            batch[key] = [prompt_ids(s, vocab, rounds.seed, rounds.first + r, part=j)
                          for j in range(k + primer)]
        if primer:  # untimed, on ids of its own (the last part), just before the sample
            engines[label].timed_generate(batch[key][k], rounds.output_len(s, timed))
        before = meter.start(label) if timed else None
        t0 = time.perf_counter()
        timings = [engines[label].timed_generate(ids, rounds.output_len(s, timed))
                   for ids in batch[key][:k]]
        if timed:  # a sample of k calls: their mean, on the gate's clock and the engine's
            wall[label][s.name].append((time.perf_counter() - t0) / k)
            meter.stop(label, s.name, rounds.first + r, before)
            if answers is not None:
                answers.setdefault(label, {}).setdefault(s.name, []).append(timings[0].first)
        return sum(t.seconds for t in timings) / k

    samples = interleave(list(engines), scenarios, rounds, call, progress)
    described = {c: _describe(e, c) for c, e in engines.items()}
    clocks.check(samples, wall, described)
    meter.finding = offclock.finding(meter, described)
    if own_meter and meter.finding is not None:
        raise meter.finding
    return samples


def _describe(engine, label: str) -> str:
    describe = getattr(engine, "describe", None)
    return describe() if callable(describe) else label


def interleave(labels: list[str], scenarios: list, rounds: Rounds,
               call: Callable[[str, object, bool], float], progress=None
               ) -> dict[str, dict[str, list[float]]]:
    """The schedule itself, for any kind of call: ``rounds.warmup`` rounds, then
    :func:`balanced_rounds` timed ones; per round and scenario each label once, in the
    rotating :func:`orders`. ``call(label, scenario, round, timed)`` returns seconds
    (``round`` counts from 0, warm-up rounds included); the timed ones are the samples
    ``{label: {scenario name: [seconds, ...]}}``."""
    warmup, settle_s = rounds.warmup, rounds.settle_s
    timed = balanced_rounds(rounds.timed, len(labels))
    samples: dict[str, dict[str, list[float]]] = {c: {s.name: [] for s in scenarios}
                                                  for c in labels}
    plan = orders(labels, warmup) + orders(labels, timed)
    for r, order in enumerate(plan):
        tag = f"warm-up {r + 1}/{warmup}" if r < warmup else f"round {r - warmup + 1}/{timed}"
        for s in scenarios:
            for label in order:
                if progress is not None:
                    progress.set_postfix_str(f"{tag} {s.name} {label}")
                if settle_s:
                    time.sleep(settle_s)
                dt = call(label, s, r, r >= warmup)
                if r >= warmup:
                    samples[label][s.name].append(dt)
                if progress is not None:
                    progress.update(1)
    return samples
