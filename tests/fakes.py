"""Fake engines for unit tests of the pipeline's plumbing: no model, exact times.

A :class:`FakeEngine` answers ``timed_generate`` with a time of its own (and a first token per
row that is a function of the row, as a real model's is), from its
patches' names, and sleeps that long (the gate checks the engine's clock against its
own): a patch named ``*-slow-NN.py`` makes every call NN % slower, a
``*-faster-NN.py`` NN % faster, a ``*-once-NN.py`` NN % slower in the first engine of
its label only (a steady per-process difference: fresh processes run at full speed).
Each instance draws a tiny jitter from its label, so
paired rounds are not all ties. :func:`use_fake_engines` makes the registry build them.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

from patchgate.engines.base import Timing

BASE_S = float(os.environ.get("PATCHGATE_FAKE_BASE_S", "0.002"))  # a Ray worker's too
# an accuracy batch (loglikelihood, generate_until) sleeps this long: spreading is timed
BATCH_S = float(os.environ.get("PATCHGATE_FAKE_BATCH_S", "0.0"))


def factor(patches, first: bool = True) -> float:
    """How much slower an engine of ``patches`` runs (``first``: the first of its label)."""
    f = 1.0
    for p in patches:
        m = re.search(r"-(slow|faster|once)-(\d+)", p.name)
        if m and (m.group(1) != "once" or first):
            f *= 1 + int(m.group(2)) / 100 * (-1 if m.group(1) == "faster" else 1)
    return f


class FakeEngine:
    name = "fake"
    vocab_size = 100
    tokenizer = None
    built: list[FakeEngine] = []

    def __init__(self, profile, patches, label, share=1.0):
        self.profile, self.patches, self.label, self.share = profile, list(patches), label, share
        self.factor = factor(patches, not any(e.label == label for e in FakeEngine.built))
        self.closed = False
        self.calls = 0
        self._rng = random.Random(f"{label}:{len(FakeEngine.built)}")
        FakeEngine.built.append(self)

    def ready(self):
        return self

    def cpu_seconds(self):
        return None  # in the gate's process: not told apart (the off-clock check is off)

    def timed_generate(self, batch, max_new_tokens) -> Timing:
        self.calls += 1
        dt = BASE_S * self.factor * (1 + 0.002 * self._rng.random())
        time.sleep(dt)
        return Timing(dt, tuple(row[-1] % self.vocab_size for row in batch))

    def loglikelihood(self, requests):
        """A score per (context, continuation) that is a function of the ids alone."""
        time.sleep(BATCH_S)
        return [(-float(sum(cont) % 97) - 0.01 * len(ctx), sum(cont) % 2 == 0)
                for ctx, cont in requests]

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        """Three tokens per prompt, a function of the prompt alone."""
        time.sleep(BATCH_S)
        return [[(p[-1] + k) % self.vocab_size for k in range(min(3, max_new_tokens))]
                for p in prompts]

    def close(self) -> None:
        self.closed = True


def use_fake_engines(monkeypatch) -> list[FakeEngine]:
    """Every engine the run starts is a :class:`FakeEngine`, on a machine whose cores
    are all free (:mod:`patchgate.engines.cpu`); returns the list of those built (in
    order)."""
    from patchgate.engines import cpu, factory

    FakeEngine.built = []
    monkeypatch.setattr(cpu, "busy_cores", lambda *a, **k: 0.0)  # every core free
    monkeypatch.setattr(factory, "start",
                        lambda profile, patches, label, share=1.0:
                        FakeEngine(profile, patches, label, share))
    return FakeEngine.built


def install_in_worker() -> None:
    """In a Ray worker (``runtime_env={"worker_process_setup_hook":
    "fakes.install_in_worker"}``): every engine it starts is a :class:`FakeEngine`,
    unless the worker's environment sets ``PATCHGATE_REAL_ENGINES=1`` (an actor that
    runs the real model: its own runtime_env)."""
    if os.environ.get("PATCHGATE_REAL_ENGINES") == "1":
        return
    from patchgate.engines import cpu, factory

    cpu.busy_cores = lambda *a, **k: 0.0
    factory.start = lambda profile, patches, label, share=1.0: FakeEngine(profile, patches,
                                                                          label, share)


def write_patch(folder: Path, name: str) -> Path:
    """A patch file that does nothing (its name tells a FakeEngine how fast it is)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f'"""{name}."""\n\n\ndef apply(model):\n    return None\n')
    return folder


# apply() of a patch that makes every forward pass 20 ms slower (twice as slow on the
# default model's decode): the attack tests' slow patches end with it
SLOW_APPLY = """def apply(model):
    forward = model.forward

    def slow(*args, **kwargs):
        out = forward(*args, **kwargs)
        time.sleep(0.02)
        return out

    model.forward = slow
"""


class LinesReporter:
    """A reporter for calibrations in tests: no bars, and the lines it was told kept in
    ``lines``."""

    def __init__(self):
        self.lines: list[str] = []

    def say(self, text):
        self.lines.append(text)

    def progress(self, total, desc):
        from patchgate.report.console import Silent

        return Silent(total)
