"""Planted patches for calibration: a harmless one and slowdowns of a known size.

``patchgate calibrate`` needs changes whose truth is known: one that changes nothing
(an A/A run: any rejection is a false alarm) and ones that slow every forward pass
down by a fraction f (a rejection is a catch). They are written as ordinary patch
files into a folder, so they go through the same discovery, validation and engines
as a user's patch.

- transformers: after every forward pass, busy-wait for f times that pass's own
  time (exact: every scenario gets f slower, prefill and decode alike);
- sglang: the forward runs inside CUDA graphs, where a host-side wait is not
  replayed, so each decoder layer's MLP also multiplies its input by a slice of its
  own gate/up weight, sized to f of the layer's linear weights (about f: memory-bound
  decode reads f more weight bytes, compute-bound prefill does f more matmul work;
  attention and the LM head are not scaled). Calibration reports the slowdown each
  run actually measured beside the planted one.
"""

from __future__ import annotations

from pathlib import Path

NEUTRAL = '''"""Planted by patchgate calibrate: a harmless patch (apply changes nothing).

Any rejection of this patch is a false alarm.
"""


def apply(model):
    return None
'''

_SLOW_TRANSFORMERS = '''"""Planted by patchgate calibrate: every forward pass {percent} % slower.

After each forward pass, busy-wait for {fraction} of that pass's own time.
"""

import time

ENGINES = ("transformers",)
FRACTION = {fraction!r}


def apply(model):
    forward = model.forward

    def slow_forward(*args, **kwargs):
        t0 = time.perf_counter()
        out = forward(*args, **kwargs)
        end = time.perf_counter() + FRACTION * (time.perf_counter() - t0)
        while time.perf_counter() < end:
            pass
        return out

    model.forward = slow_forward
'''

_SLOW_SGLANG = '''"""Planted by patchgate calibrate: about {percent} % more work in every layer.

Each decoder layer's MLP also multiplies its input by a slice of its own gate/up
weight, sized to {fraction} of the layer's linear weights; the product is discarded.
Runs on the GPU, so CUDA graphs capture it.
"""

import torch

ENGINES = ("sglang",)
FRACTION = {fraction!r}


def apply(model):
    for layer in model.model.layers:
        mlp = layer.mlp
        weight = mlp.gate_up_proj.weight
        total = sum(p.numel() for p in layer.parameters() if p.dim() == 2)
        rows = max(1, min(weight.shape[0], round(FRACTION * total / weight.shape[1])))
        forward = mlp.forward

        def slow_forward(x, forward=forward, w=weight[:rows]):
            out = forward(x)
            extra = torch.nn.functional.linear(x, w)
            return out + 0 * extra[..., :1]

        mlp.forward = slow_forward
'''


def neutral(folder: Path) -> Path:
    """Write the harmless patch into ``folder`` (created); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0001-planted-neutral.py").write_text(NEUTRAL, encoding="utf-8")
    return folder


def slowdown(folder: Path, fraction: float, engine: str) -> Path:
    """Write a patch that makes ``engine``'s forward passes ``fraction`` slower
    (0.05 = 5 %) into ``folder`` (created); returns the folder."""
    if not 0 < fraction < 10:
        raise ValueError(f"a planted slowdown must be in (0, 10), got {fraction}")
    template = {"transformers": _SLOW_TRANSFORMERS, "sglang": _SLOW_SGLANG}.get(engine)
    if template is None:
        raise ValueError(f"no planted slowdown for engine {engine!r}")
    folder.mkdir(parents=True, exist_ok=True)
    percent = f"{100 * fraction:g}"
    text = template.format(percent=percent, fraction=fraction)
    (folder / f"0001-planted-slow-{percent.replace('.', '_')}pct.py").write_text(
        text, encoding="utf-8")
    return folder
