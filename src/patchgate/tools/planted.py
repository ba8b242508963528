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
  attention and the LM head are not scaled). The slice's row count is rounded to a
  multiple of 128 (of 8 below 128 rows): a product whose width is not a multiple of 8
  runs on slower GEMM kernels, and an unrounded 5 % (2,893 rows on the MiniCPM4-8B
  shape) cost 36 % of a layer's linear time in a 2,048-token prefill on an H100,
  5.5 % rounded, its tail included (docs/gpu-runs/2026-12-07c/planted-gemm.json).
  The product is kept alive by adding 0 x its first column into the output's first
  column (one tiny kernel; a sum over the whole output was 2 % of the layer's time).
  Calibration reports the slowdown each run actually measured beside the planted one.
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
weight, sized to {fraction} of the layer's linear weights in rows rounded to a
multiple of 128 (of 8 below 128: unaligned widths run on slower GEMM kernels); 0 x
the product's first column is added into the output's first column, so the product
stays in the computation. Runs on the GPU, so CUDA graphs capture it.
"""

import torch

ENGINES = ("sglang",)
FRACTION = {fraction!r}


def rows_for(exact, limit):
    """The slice's row count: ``exact`` rounded to a multiple of 128 (of 8 below 128),
    at least one such multiple, at most ``limit``."""
    align = 128 if exact >= 128 else 8
    return min(limit, align * max(1, round(exact / align)))


def apply(model):
    for layer in model.model.layers:
        mlp = layer.mlp
        weight = mlp.gate_up_proj.weight
        total = sum(p.numel() for p in layer.parameters() if p.dim() == 2)
        rows = rows_for(FRACTION * total / weight.shape[1], weight.shape[0])
        forward = mlp.forward

        def slow_forward(x, forward=forward, w=weight[:rows]):
            out = forward(x)
            extra = torch.nn.functional.linear(x, w)
            out[..., :1].add_(extra[..., :1], alpha=0)
            return out

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
