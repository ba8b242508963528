"""Accuracy of the default model on the default suite, through lm-eval, on CPU.

Usage (from the repository root)::

    python -m models.eval_default                      # fp32, as `lm_eval --model hf ...`
    python -m models.eval_default --quant int8         # RTN int8, per output channel
    python -m models.eval_default --quant int4         # RTN int4, per output channel
    python -m models.eval_default --quant int4-g32     # RTN int4, groups of 32 columns
    python -m models.eval_default --quant all --json out.json

Every linear layer (the LM head included) is quantized round-to-nearest and
dequantized in place (``models/quantize.py``); the model then runs in fp32 through
lm-eval's own HF model class, with the suite of ``guards/tasks``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUANTS = {"none": None, "int8": (8, None), "int4": (4, None), "int4-g32": (4, 32)}


def evaluate(model_dir: Path, quant: str, batch_size: int = 1) -> dict:
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.quantize import quantize_linears

    model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True,
                                                 dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_dir)
    if QUANTS[quant] is not None:
        bits, group = QUANTS[quant]
        quantize_linears(model, bits, group)
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size, device="cpu")
    t0 = time.time()
    res = simple_evaluate(model=lm, tasks=["default_suite"],
                          task_manager=TaskManager(include_path=str(ROOT / "guards/tasks")))
    scores = {}
    for task, r in res["results"].items():
        for key in ("exact_match,none", "acc,none"):
            if key in r:
                scores[task] = r[key]
    return {"quant": quant, "scores": scores, "mean": sum(scores.values()) / len(scores),
            "seconds": round(time.time() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models/default")
    ap.add_argument("--quant", default="none", choices=[*QUANTS, "all"])
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    quants = list(QUANTS) if args.quant == "all" else [args.quant]
    out = [evaluate(args.model, q, args.batch_size) for q in quants]
    base = out[0]["mean"]
    for r in out:
        per = " ".join(f"{t}={v:.3f}" for t, v in sorted(r["scores"].items()))
        print(f"{r['quant']:9s} mean={r['mean']:.4f} rel={r['mean'] / base:.4f} {per} "
              f"({r['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
