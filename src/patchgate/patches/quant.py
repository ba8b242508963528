"""Real low-precision kernels for patches that run inside SGLang's worker.

A patch's ``apply(model)`` receives SGLang's model, whose decoder projections are
SGLang's parallel linear layers (``qkv_proj``, ``o_proj``, ``gate_up_proj``,
``down_proj``; their forward ends in ``F.linear``). :func:`int4_weight_only` swaps
their weights for torchao tensors that run int4 kernels through that call.

SGLang's own switch for this (``torchao_config="int4wo-128"``) imports
``int4_weight_only``, which torchao 0.17 (the release SGLang 0.5.16 pins) no longer
has; these helpers call torchao's current API with the same kernel (tinygemm,
``aten._weight_int4pack_mm``).
"""

from __future__ import annotations

PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def projection_layers(model, keep=()) -> list[str]:
    """Names of the decoder projections of an SGLang model, except those in ``keep``.

    Raises ``RuntimeError`` when a layer is already quantized by SGLang (a
    ``quantization`` server argument): its weights are no longer bf16."""
    keep = set(keep)
    out = []
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] not in PROJECTIONS:
            continue
        method = type(getattr(mod, "quant_method", None)).__name__
        if method not in ("UnquantizedLinearMethod", "NoneType"):
            raise RuntimeError(f"{name} is already quantized by SGLang ({method}): int4 "
                               "weight-only needs bf16 weights; drop the quantization "
                               "server argument or this patch")
        if name not in keep:
            out.append(name)
    unknown = keep - {n for n, _ in model.named_modules()}
    if unknown:
        raise RuntimeError(f"layers to keep are not in the model: {sorted(unknown)}")
    if not out:
        raise RuntimeError(f"no layer named {'/'.join(PROJECTIONS)} in {type(model).__name__}")
    return out


def int4_weight_only(model, group: int, keep=()) -> list[str]:
    """Int4 weights (asymmetric, one scale and zero point per ``group`` input columns,
    tinygemm layout) for every decoder projection but those in ``keep``; returns the
    names quantized."""
    from torchao.quantization import Int4WeightOnlyConfig, quantize_

    names = projection_layers(model, keep)
    chosen = set(names)
    config = Int4WeightOnlyConfig(group_size=group, int4_packing_format="tile_packed_to_4d")
    quantize_(model, config, filter_fn=lambda mod, fqn: fqn in chosen)
    print(f"int4 weight-only (group {group}, tinygemm): {len(names)} layers; kept in "
          f"bf16: {', '.join(sorted(keep)) or 'none'}", flush=True)
    return names
