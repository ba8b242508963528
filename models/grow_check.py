"""How close a grown default model stays to the default model, on CPU.

    python -m models.grow_check                      # 30 items per task, 1 thread
    python -m models.grow_check --per-task 100 --threads 2

Grows ``models/default`` to a reduced shape with the MiniCPM4-8B ratios that matter
(head size 64 -> 128, 2 -> 4 query heads per KV head, hidden and layers larger,
MiniCPM4-8B's scale_emb 12 and dim_model_base 256), then runs the default suite's
prompts (the first ``--per-task`` items of each task in ``guards/tasks``) through the
small and the grown model: the largest logit difference over every prompt position,
and the greedy continuation of each item (the task's ``max_gen_toks`` tokens, 4 for
the multiple-choice fact_mc), in fp32 and in bf16 (weights and compute). It also
times the build of that shape into a temporary cache (bf16 safetensors).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "models" / "default"
TASKS = ROOT / "guards" / "tasks"
TASK_NAMES = ("needle", "common_word", "common_word_long", "fact_mc", "addition", "var_track")


def reduced_shape():
    """hidden 1024, 8 layers, 8 heads of 128, 2 KV heads, FFN 2048, MiniCPM4-8B's muP."""
    from patchgate.profile.grow import Shape

    return Shape(hidden_size=1024, num_hidden_layers=8, num_attention_heads=8,
                 num_key_value_heads=2, intermediate_size=2048, scale_emb=12.0,
                 dim_model_base=256)


def suite_items(per_task: int) -> list[tuple[str, str, int]]:
    """(task, prompt, tokens to generate) for the first ``per_task`` items of each task."""
    items = []
    for task in TASK_NAMES:
        found = re.search(r"max_gen_toks:\s*(\d+)", (TASKS / f"{task}.yaml").read_text())
        n = int(found.group(1)) if found else 4
        lines = (TASKS / f"{task}.jsonl").read_text().splitlines()[:per_task]
        items += [(task, json.loads(line)["prompt"], n) for line in lines]
    return items


def load_small(dtype=torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(SOURCE, trust_remote_code=True, dtype=dtype)
    return model.eval(), AutoTokenizer.from_pretrained(SOURCE)


def grown_model(small, shape, dtype=torch.float32, scale=None):
    """The small model grown in memory (patchgate.grow.grow), as the same model class."""
    from patchgate.profile import grow

    cfg = json.loads((SOURCE / "config.json").read_text())
    state = {k: v.float() for k, v in small.state_dict().items()}
    kw = {} if scale is None else {"scale": scale}
    new_cfg, new_state = grow.grow(state, cfg, shape, dtype=dtype, **kw)
    conf = type(small.config)(**new_cfg)
    with torch.device("meta"):
        big = type(small)(conf)
    big.load_state_dict(new_state, strict=True, assign=True)
    return big.eval()


@torch.no_grad()
def greedy(model, ids: list[int], n: int) -> tuple[torch.Tensor, list[int]]:
    """Logits of every prompt position (fp32) and the greedy continuation of n tokens."""
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    logits, cache = out.logits[0].float(), out.past_key_values
    toks = [int(logits[-1].argmax())]
    for _ in range(n - 1):
        out = model(input_ids=torch.tensor([[toks[-1]]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        toks.append(int(out.logits[0, -1].argmax()))
    return logits, toks


def compare(a, b, tok, items) -> dict:
    """Largest |logit difference|, share of items with the same greedy continuation and
    share of equal tokens (position by position) between models a and b."""
    worst, same, equal, total = 0.0, 0, 0, 0
    for _, prompt, n in items:
        ids = tok(prompt)["input_ids"]
        la, ta = greedy(a, ids, n)
        lb, tb = greedy(b, ids, n)
        worst = max(worst, float((la - lb).abs().max()))
        same += ta == tb
        equal += sum(x == y for x, y in zip(ta, tb, strict=True))
        total += n
    return {"max_abs_logit_diff": round(worst, 6), "same_continuation": same / len(items),
            "equal_tokens": equal / total, "items": len(items)}


def build_seconds(shape) -> float:
    from patchgate.profile import grow
    from patchgate.profile import grown as grow_build

    grow.SHAPES["grow-check"] = shape
    try:
        with tempfile.TemporaryDirectory() as cache:
            return grow_build.ensure(SOURCE, "grow-check", cache, log=lambda m: None).seconds
    finally:
        del grow.SHAPES["grow-check"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-task", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    shape = reduced_shape()
    items = suite_items(args.per_task)
    small, tok = load_small()
    small_bf16 = load_small(torch.bfloat16)[0]
    rows = {"build_seconds_bf16": round(build_seconds(shape), 2)}
    big = grown_model(small, shape)
    rows["fp32 grown vs default"] = compare(small, big, tok, items)
    rows["fp32 grown vs grown without noise"] = compare(
        grown_model(small, shape, scale=0.0), big, tok, items)
    big_bf16 = grown_model(small, shape, torch.bfloat16)
    rows["bf16 grown vs bf16 default"] = compare(small_bf16, big_bf16, tok, items)
    rows["bf16 default vs fp32 default"] = compare(small, small_bf16, tok, items)
    rows["bf16 grown vs fp32 default"] = compare(small, big_bf16, tok, items)
    keep = type(shape)(**{**shape.__dict__, "scale_emb": None, "dim_model_base": None})
    rows["bf16 grown (muP of the source) vs bf16 default"] = compare(
        small_bf16, grown_model(small, keep, torch.bfloat16), tok, items)
    print(json.dumps({"shape": shape.__dict__, "per_task": args.per_task, **rows}, indent=1))


if __name__ == "__main__":
    main()
