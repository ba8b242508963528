"""FP8 KV cache (e4m3) on SGLang.

Stores keys and values in 8 bits instead of 16: half the KV-cache memory and
bandwidth per decode step, so larger batches fit and long decodes read less.
Limited to SGLang: the transformers engine's cache has no FP8 storage (its
quantized caches need optional quantization backends this project does not ship).
"""

ENGINES = ("sglang",)
SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}
