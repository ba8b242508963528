"""FP8 weights and activations (W8A8) on SGLang: online quantization at load time.

SGLang's own switch (``quantization="fp8"``): every linear layer of the decoder gets
e4m3 weights with one scale per tensor, computed from the bf16 checkpoint as it
loads, and its input is quantized to e4m3 per token on the fly, so each matmul runs
on the H200's FP8 tensor cores (CUTLASS / ``torch._scaled_mm``). Half the weight
bytes of bf16 for every decode step, twice the peak matmul rate for prefill. The
LM head and the embeddings stay bf16. Limited to SGLang: the transformers engine
has no FP8 matmul on the CPU.
"""

ENGINES = ("sglang",)
SERVER_ARGS = {"quantization": "fp8"}
