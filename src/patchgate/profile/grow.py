"""Grow a small MiniCPM, function-preserving, to a larger shape (pure: tensors in, out).

The grown model costs what a model of the larger shape costs and answers as the
small one answers, so one profile is real in both halves of a verdict: latency
(the kernels run at the real shape) and accuracy (the weights answer tasks).
:mod:`patchgate.profile.grown` writes the result to the cache; ``patchgate model grow``
is the command. The rules follow from ``models/default/modeling_minicpm.py``
(h, l, d: the small hidden size, layers, head size; H, L, D: the grown ones):

- hidden dimensions are zero-padded: the residual stream is ``[x, 0]``;
- RMSNorm over the padded vector sees ``mean(x^2) * h/H``: weights are divided by
  ``sqrt(H/h)`` and eps by ``H/h``, so every norm gives back ``[norm(x), 0]``;
- rotary pairs keep their frequencies: a head of size D gives pair j the frequency
  ``base^(-2j/D)``, the small head gives pair i ``base^(-2i/d)``, so small pair i
  (neox: dims i and i + d/2) becomes pair ``i*D/d`` (dims ``i*D/d`` and
  ``i*D/d + D/2``); D must be a multiple of d;
- each small query head stays in its KV group (small KV head g -> grown KV head
  ``g*KV/kv``, its query heads -> the first heads of that grown group);
- q is multiplied by ``sqrt(D/d)``: attention scales by ``1/sqrt(head_dim)``;
- o_proj and down_proj are multiplied by ``sqrt(L/l)``: each block adds its output
  times ``scale_depth/sqrt(num_hidden_layers)``;
- small layer i is grown layer i (names such as ``model.layers.1.self_attn.q_proj``
  keep their meaning, so per-layer lists like patch 0005's carry over); layers l..L-1
  grow from an empty layer (linear weights 0, norms 1): their output is ~0, so they
  are near-identity and cost what a layer costs;
- muP: embeddings times ``scale_emb/scale_emb'`` and the LM head times
  ``(H/dim_model_base') / (h/dim_model_base)``. The shape sets the target's values
  (MiniCPM4-8B: scale_emb 12, dim_model_base 256) so the grown config is the
  target's in every field but ``vocab_size`` and ``rms_norm_eps``: patches that read
  them see real values; the LM-head factor (8) is a power of 2, exact in bf16;
- every padded entry holds uniform noise in +-1e-5 (seeded per tensor, from integer
  draws, so identical on every machine): no row or tensor is all zero, so
  quantizers that divide by max-abs stay finite. Each row of a matrix is a distinct
  window of one per-tensor pool (no per-element Python loop, no RNG call per element).

The vocabulary stays the source's (448 tokens, not MiniCPM4-8B's 73,448: a token
the small model never saw could still be predicted). The 8B's LM head is 3.82 % of
the weights a decode step reads (300.8M of 7,884M; the embedding is a row gather),
the grown model's 0.02 %: decode leaves out 3.79 % of the 8B's weight traffic.
Embedding plus LM head are 7.35 % of the 8B's 8,185M weights.

Measured on CPU, 1 thread (``PYTHONPATH=src python -m models.grow_check --per-task 10``):
``models/default`` grown to hidden 1024, 8 layers, 8 heads of 128, 2 KV heads, FFN 2048
(MiniCPM4-8B's muP), the first 10 items of each default-suite task (60 prompts, the
task's answer length generated greedily):

====================================  ===============  ==================  ============
compared                              max abs(logit)   same continuation   equal tokens
====================================  ===============  ==================  ============
fp32 grown vs fp32 default            1.7e-3           60/60               100 %
fp32 grown vs grown without noise     1.7e-3           60/60               100 %
bf16 grown vs bf16 default            1.0              59/60               99.4 %
bf16 default vs fp32 default          1.2              60/60               100 %
bf16 grown, source's muP (scale 1)    1.1              59/60               99.0 %
====================================  ===============  ==================  ============

Logits reach 27. Without noise the grown model is within 7e-5 of the default (fp32
rounding); the 1.7e-3 is the noise, mostly (all but 3.5e-4) the o_proj columns of the
added query heads: they attend over the real KV heads of their group and pass real-sized
values through noise weights into the real dims. bf16 moves the logits by about 1 either
way; the growth adds roundings of its own (q x sqrt(2), o/down x sqrt(L/l), the
embedding / 12), which flip one continuation in 60. Keeping the source's muP does no
better, so the target's is kept. ``tests/test_grow.py`` (hidden 768, 6 heads of 128):
greedy continuations identical on 30 items per task, logits within 1e-2 (fp32). Build
time (bf16 safetensors, page cache): 0.4 s for the hidden-1024 shape (145 MB); 5.8 s
for 4 layers of the MiniCPM4-8B width (0.95 G parameters, 1.9 GB), so about 46 s for
the full 7.59 G parameters on one core of this machine (disk speed aside).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass

import torch

from ..errors import PatchgateError

NOISE = 1e-5  # half-width of the uniform noise in padded entries
GROWTH_VERSION = 1  # part of the cache key: bump when a rule or the noise changes
_POOL_EXTRA = 65536  # noise pool = row length + this many window starts


@dataclass(frozen=True)
class Shape:
    """A grown model's dimensions; the muP fields are None to keep the source's."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    scale_emb: float | None = None
    dim_model_base: int | None = None
    max_position_embeddings: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


SHAPES: dict[str, Shape] = {
    # models/minicpm4-8b-dummy/config.json, vocabulary aside
    "minicpm4-8b": Shape(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=2, intermediate_size=16384, scale_emb=12.0,
                         dim_model_base=256, max_position_embeddings=32768),
}


def get_shape(name: str) -> Shape:
    try:
        return SHAPES[name]
    except KeyError:
        raise PatchgateError(f"unknown shape {name!r}",
                             hint=f"choose one of: {', '.join(sorted(SHAPES))}") from None


def _dims(cfg: Mapping) -> Shape:
    return Shape(**{f.name: cfg[f.name] for f in dataclasses.fields(Shape)})


def check(cfg: Mapping, shape: Shape, where: str = "source") -> None:
    """Raise a PatchgateError naming the first reason ``cfg`` cannot grow to ``shape``."""
    for key, want in (("hidden_act", "silu"), ("tie_word_embeddings", False),
                      ("attention_bias", False), ("rope_scaling", None)):
        if cfg.get(key, want) != want:
            raise PatchgateError(f"{where}: config sets {key}={cfg[key]!r}; growth handles "
                                 f"{key}={want!r} only", hint="grow a plain MiniCPM config")
    try:
        s = _dims(cfg)
    except KeyError as e:
        raise PatchgateError(f"{where}: config.json has no {e.args[0]!r}",
                             hint="the source must be a MiniCPM config (models/default)") from e
    t = shape
    if t.hidden_size % t.num_attention_heads or t.num_attention_heads % t.num_key_value_heads \
            or t.head_dim % 2:
        raise PatchgateError(f"shape {t}: hidden_size must be heads x an even head size and "
                             "heads a multiple of the KV heads", hint="fix the shape")
    pairs = [("hidden_size", s.hidden_size, t.hidden_size),
             ("num_hidden_layers", s.num_hidden_layers, t.num_hidden_layers),
             ("num_attention_heads", s.num_attention_heads, t.num_attention_heads),
             ("num_key_value_heads", s.num_key_value_heads, t.num_key_value_heads),
             ("intermediate_size", s.intermediate_size, t.intermediate_size),
             ("head size", s.head_dim, t.head_dim),
             ("query heads per KV head", s.num_attention_heads // s.num_key_value_heads,
              t.num_attention_heads // t.num_key_value_heads)]
    for what, small, big in pairs:
        if small > big:
            raise PatchgateError(f"{where}: {what} {small} does not fit the shape's {big}",
                                 hint="growth only adds; choose a larger shape or a smaller "
                                 "source")
    if t.head_dim % s.head_dim or t.num_key_value_heads % s.num_key_value_heads:
        raise PatchgateError(f"{where}: head size {s.head_dim} / KV heads "
                             f"{s.num_key_value_heads} do not divide the shape's "
                             f"{t.head_dim} / {t.num_key_value_heads}",
                             hint="rotary frequencies and KV groups map only by whole factors")


def grown_config(cfg: Mapping, shape: Shape, dtype: torch.dtype = torch.bfloat16) -> dict:
    """The source's config.json with the shape's dimensions (vocabulary kept)."""
    out = dict(cfg)
    kept = {k: v for k, v in asdict(shape).items() if v is not None}
    out.update(kept)
    out["rms_norm_eps"] = cfg["rms_norm_eps"] * cfg["hidden_size"] / shape.hidden_size
    out["torch_dtype"] = str(dtype).removeprefix("torch.")
    return out


def tensor_plan(cfg: Mapping) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor name of a MiniCPM checkpoint with this config, with its shape."""
    s, v = _dims(cfg), cfg["vocab_size"]
    h, q, kv = s.hidden_size, s.num_attention_heads * s.head_dim, \
        s.num_key_value_heads * s.head_dim
    f = s.intermediate_size
    plan = [("model.embed_tokens.weight", (v, h))]
    for i in range(s.num_hidden_layers):
        p = f"model.layers.{i}."
        plan += [(p + "input_layernorm.weight", (h,)), (p + "self_attn.q_proj.weight", (q, h)),
                 (p + "self_attn.k_proj.weight", (kv, h)),
                 (p + "self_attn.v_proj.weight", (kv, h)),
                 (p + "self_attn.o_proj.weight", (h, q)),
                 (p + "post_attention_layernorm.weight", (h,)),
                 (p + "mlp.gate_proj.weight", (f, h)), (p + "mlp.up_proj.weight", (f, h)),
                 (p + "mlp.down_proj.weight", (h, f))]
    return plan + [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]


def check_state(state: Mapping[str, torch.Tensor], cfg: Mapping, where: str = "source") -> None:
    """Every tensor the config implies is there with its shape, and nothing else."""
    plan = dict(tensor_plan(cfg))
    for name, shp in plan.items():
        if name not in state:
            raise PatchgateError(f"{where}: tensor {name} is missing",
                                 hint="the checkpoint does not match its config.json")
        if tuple(state[name].shape) != shp:
            raise PatchgateError(f"{where}: tensor {name} has shape {tuple(state[name].shape)}, "
                                 f"the config implies {shp}",
                                 hint="the checkpoint does not match its config.json")
    extra = sorted(set(state) - set(plan))
    if extra:
        raise PatchgateError(f"{where}: tensor {extra[0]} is not part of a plain MiniCPM "
                             f"({len(extra)} such)", hint="growth would drop it; remove it or "
                             "extend patchgate.profile.grow")


def noise(name: str, shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0,
          scale: float = NOISE) -> torch.Tensor:
    """Uniform noise in +-scale, the same for the same name and seed on every machine."""
    if scale == 0:
        return torch.zeros(shape, dtype=dtype)
    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    cols = shape[-1]
    rows = math.prod(shape[:-1])
    pool = torch.randint(-32767, 32768, (cols + max(rows, _POOL_EXTRA),), generator=g)
    pool = (pool.to(torch.float32) * (scale / 32768)).to(dtype)
    if len(shape) == 1:
        return pool[:cols].clone()
    starts = torch.randperm(pool.numel() - cols + 1, generator=g)[:rows]
    return pool.unfold(0, cols, 1)[starts].reshape(shape)  # row r: a window of the pool


def _index(src: Shape, dst: Shape) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of the grown q_proj (and k/v_proj) that hold the small heads, in small order."""
    d, D = src.head_dim, dst.head_dim
    i = torch.arange(d)
    dim = torch.where(i < d // 2, i * (D // d), (i - d // 2) * (D // d) + D // 2)
    g_small = src.num_attention_heads // src.num_key_value_heads
    g_big = dst.num_attention_heads // dst.num_key_value_heads
    kv_head = torch.arange(src.num_key_value_heads) * (dst.num_key_value_heads
                                                         // src.num_key_value_heads)
    j = torch.arange(src.num_attention_heads)
    q_head = kv_head[j // g_small] * g_big + j % g_small
    return (q_head[:, None] * D + dim).reshape(-1), (kv_head[:, None] * D + dim).reshape(-1)


def iter_grown(state: Mapping[str, torch.Tensor], cfg: Mapping, shape: Shape, *,
               dtype: torch.dtype = torch.float32, seed: int = 0,
               scale: float = NOISE) -> Iterator[tuple[str, torch.Tensor]]:
    """The grown checkpoint, tensor by tensor in :func:`tensor_plan` order of the grown
    config (one tensor in memory at a time). ``scale=0`` leaves padding at zero."""
    check(cfg, shape)
    check_state(state, cfg)
    src, new = _dims(cfg), grown_config(cfg, shape)
    h, l_small, f = src.hidden_size, src.num_hidden_layers, src.intermediate_size
    q_rows, kv_rows = _index(src, shape)
    norm_c = 1 / math.sqrt(shape.hidden_size / h)
    depth_c = math.sqrt(shape.num_hidden_layers / l_small)
    emb_c = cfg["scale_emb"] / new["scale_emb"]
    head_c = (shape.hidden_size / new["dim_model_base"]) / (h / cfg["dim_model_base"])
    put = {  # suffix -> (index of the small tensor in the grown one, factor)
        "input_layernorm.weight": ((slice(0, h),), norm_c),
        "post_attention_layernorm.weight": ((slice(0, h),), norm_c),
        "self_attn.q_proj.weight": ((q_rows, slice(0, h)), math.sqrt(shape.head_dim
                                                                      / src.head_dim)),
        "self_attn.k_proj.weight": ((kv_rows, slice(0, h)), 1.0),
        "self_attn.v_proj.weight": ((kv_rows, slice(0, h)), 1.0),
        "self_attn.o_proj.weight": ((slice(0, h), q_rows), depth_c),
        "mlp.gate_proj.weight": ((slice(0, f), slice(0, h)), 1.0),
        "mlp.up_proj.weight": ((slice(0, f), slice(0, h)), 1.0),
        "mlp.down_proj.weight": ((slice(0, h), slice(0, f)), depth_c),
        "model.embed_tokens.weight": ((slice(None), slice(0, h)), emb_c),
        "model.norm.weight": ((slice(0, h),), norm_c),
        "lm_head.weight": ((slice(None), slice(0, h)), head_c),
    }
    for name, shp in tensor_plan(new):
        out = noise(name, shp, dtype, seed, scale)
        suffix = name.split(".", 3)[-1] if name.startswith("model.layers.") else name
        index, factor = put[suffix]
        if name in state:
            out[index] = (state[name].to(torch.float32) * factor).to(dtype)
        elif suffix.endswith("layernorm.weight"):  # an added layer: norms of ones
            out[index] = torch.full((h,), norm_c, dtype=dtype)
        yield name, out


def grow(state: Mapping[str, torch.Tensor], cfg: Mapping, shape: Shape, *,
         dtype: torch.dtype = torch.float32, seed: int = 0,
         scale: float = NOISE) -> tuple[dict, dict[str, torch.Tensor]]:
    """The grown config and state dict in memory (small shapes, tests)."""
    return grown_config(cfg, shape, dtype), dict(iter_grown(state, cfg, shape, dtype=dtype,
                                                            seed=seed, scale=scale))
