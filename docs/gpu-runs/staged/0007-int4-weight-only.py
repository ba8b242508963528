"""Int4 weight-only (group 128) on SGLang, with torchao's tinygemm kernel.

Every linear projection of the decoder (``qkv_proj``, ``o_proj``, ``gate_up_proj``,
``down_proj``) gets int4 weights, asymmetric, one scale and zero point per group of
128 input columns, packed for ``aten._weight_int4pack_mm`` (tinygemm): a quarter of
the bf16 weight bytes per decode step. The LM head and the embeddings stay bf16.
Applied inside SGLang's worker once the weights are in (``patchgate.patches.quant``: SGLang's
own ``torchao_config="int4wo-128"`` fails to import with the torchao it pins).
tinygemm is a decode kernel and runs at every batch size, so long prefills may be
slower than bf16.
"""

from patchgate.patches.quant import int4_weight_only

ENGINES = ("sglang",)
# prefill CUDA-graph capture takes about 7 s per token count with torchao's int4 tensors
# (58 counts; measured with 0008 on 2026-12-05): off, decode graphs stay on
SERVER_ARGS = {"disable_prefill_cuda_graph": True}


def apply(model):
    int4_weight_only(model, group=128)
