"""Round-to-nearest weight-only fake quantization of linear layers.

Used by the model card's precision measurements (``models/eval_default.py``) and by
the quantization patches: each ``nn.Linear`` weight is replaced by its quantized and
dequantized value (symmetric, per output channel or per group of input columns), so
the model computes exactly what an int-N weight-only kernel would compute, in the
original dtype.
"""

from __future__ import annotations

import torch
from torch import nn


def rtn_quantize(weight: torch.Tensor, bits: int, group_size: int | None = None) -> torch.Tensor:
    """Symmetric round-to-nearest quantize/dequantize of a [out, in] weight.

    ``group_size=None`` uses one scale per output channel; otherwise one scale per
    ``group_size`` consecutive input columns of each row.
    """
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(weight.shape)}")
    out_f, in_f = weight.shape
    w = weight.detach().to(torch.float32)
    if group_size is not None:
        if in_f % group_size:
            raise ValueError(f"in_features {in_f} is not a multiple of group size {group_size}")
        w = w.reshape(out_f, in_f // group_size, group_size)
    qmax = 2 ** (bits - 1) - 1
    scale = w.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / qmax
    q = torch.clamp(torch.round(w / scale), -qmax - 1, qmax)
    return (q * scale).reshape(out_f, in_f).to(weight.dtype)


def quantize_linears(model: nn.Module, bits: int, group_size: int | None = None,
                     skip: frozenset[str] = frozenset()) -> list[str]:
    """Fake-quantize every ``nn.Linear`` of ``model`` in place; returns the names done.

    Layers whose qualified name is in ``skip`` keep their precision (by default
    none: the LM head is quantized too).
    """
    done = []
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Linear) and name not in skip:
                mod.weight.copy_(rtn_quantize(mod.weight, bits, group_size))
                done.append(name)
    return done
