"""Mixed precision on SGLang: int4 (tinygemm) where the model is insensitive, bf16 where
it is not.

The sensitivity ranking is patch 0005's (``python -m models.sensitivity``: each layer
alone to int4, ranked by the answers' NLL increase on a calibration split). Its six
sensitive layers, in SGLang's fused names, are the five projections in ``KEEP``
(layers 0 and 1 of the grown model are the small model's layers 0 and 1); they stay
bf16. Every other decoder projection gets int4 weights with one scale and zero point
per group of 32 input columns (0005's group), run by torchao's tinygemm kernel
inside SGLang's worker (``patchgate.patches.quant``). Real kernels: the speed is measured,
not simulated.
"""

from patchgate.patches.quant import int4_weight_only

ENGINES = ("sglang",)
# SGLang captures prefill CUDA graphs for 58 token counts; with torchao's int4 tensors
# each capture takes about 7 s on the H200 (measured 2026-12-05), so they are off
# (decode graphs stay on; a 2048-token prefill is bound by its matmuls, not by launches).
SERVER_ARGS = {"disable_prefill_cuda_graph": True}
KEEP = (
    "model.layers.0.self_attn.qkv_proj", "model.layers.1.self_attn.qkv_proj",
    "model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj",
    "model.layers.1.mlp.gate_up_proj",
)


def apply(model):
    int4_weight_only(model, group=32, keep=KEEP)
