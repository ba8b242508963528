"""FP8 weights and activations (W8A8) on SGLang: online quantization at load time.

SGLang's own switch (``quantization="fp8"``): every linear layer of the decoder gets
e4m3 weights, quantized from the bf16 checkpoint as it loads (on Hopper one scale per
output channel, for SGLang's CUTLASS FP8 matmul), and its input is quantized to e4m3
on the fly with a dynamic scale, so each matmul runs on the H200's FP8 tensor cores.
Half the weight bytes of bf16 for every decode step, twice the peak matmul rate for
prefill. The LM head and the embeddings stay bf16. Limited to SGLang: the
transformers engine has no FP8 matmul on the CPU. On `h200-minicpm8b` (2026-12-05),
with 0001-0003, every scenario was 0.59-0.71x of the reference's time at 99.8 % of its
accuracy (docs/gpu-runs/2026-12-05).
"""

ENGINES = ("sglang",)
SERVER_ARGS = {"quantization": "fp8"}
