"""Time the planted slowdown's extra GEMM beside a MiniCPM4-8B layer's own linears.

ON THE GPU MACHINE (torch only, no SGLang): python3 docs/gpu-runs/planted-gemm.py
Prints, for a decode step (1, 8, 64 tokens) and a prefill (2048, 8x2048 tokens), the
layer's linears' time and the extra work's share for a planted fraction, with the
extra GEMM's row count as computed (unaligned) and rounded to a multiple of 128, and
with the keep-alive tail (``out + 0 * extra[..., :1]``), one add with alpha 0, one
in-place add into the output's first column, or without a tail.
"""

import json
import sys

import torch
import torch.nn.functional as F

HIDDEN, INTER, QKV = 4096, 16384, 4608
LINEARS = [(QKV, HIDDEN), (HIDDEN, HIDDEN), (2 * INTER, HIDDEN), (HIDDEN, INTER)]
TOTAL = sum(n * k for n, k in LINEARS)


def timed(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    best = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best.append(start.elapsed_time(end) / reps)
    best.sort()
    return best[len(best) // 2]  # ms, median of 7 replays


def main():
    dev = "cuda"
    torch.manual_seed(0)
    weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / 64 for n, k in LINEARS]
    gate_up = weights[2]
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": {}}
    for fraction in (0.02, 0.05):
        raw = round(fraction * TOTAL / HIDDEN)
        aligned = max(128, 128 * round(fraction * TOTAL / HIDDEN / 128))
        results["rows"][str(fraction)] = {"raw": raw, "aligned": aligned}
    rows_out = []
    for tokens in (1, 8, 64, 2048, 16384):
        x = torch.randn(tokens, HIDDEN, device=dev, dtype=torch.bfloat16)
        xi = torch.randn(tokens, INTER, device=dev, dtype=torch.bfloat16)
        out = torch.randn(tokens, HIDDEN, device=dev, dtype=torch.bfloat16)

        def layer():
            F.linear(x, weights[0]); F.linear(x, weights[1]); F.linear(x, weights[2])
            F.linear(xi, weights[3])
        base = timed(layer)
        row = {"tokens": tokens, "layer_ms": round(base, 4)}
        for fraction in (0.02, 0.05):
            for name in ("raw", "aligned"):
                rows = results["rows"][str(fraction)][name]
                w = gate_up[:rows]
                bare = timed(lambda: F.linear(x, w))
                tail = timed(lambda: out + 0 * F.linear(x, w)[..., :1])
                add = timed(lambda: torch.add(out, F.linear(x, w)[..., :1], alpha=0))
                first = timed(lambda: out[..., :1].add_(F.linear(x, w)[..., :1], alpha=0))
                row[f"{fraction}/{name}"] = {
                    "rows": rows, "bare": round(bare / base, 4),
                    "tail": round(tail / base, 4), "add_alpha0": round(add / base, 4),
                    "first_column": round(first / base, 4)}
        rows_out.append(row)
        print(json.dumps(row), flush=True)
    results["by_tokens"] = rows_out
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
