"""GPU smoke test of the SGLang adapter (one engine per configuration, then closed).

    python docs/gpu-runs/smoke.py [--mem 0.2]

Loads the h200-default profile's model through SGLang unpatched and with the
patches of model_patches/ that apply to SGLang, and checks the engine verbs the
gate uses: fixed-length greedy generation, generate_until, log-likelihood (against
transformers on the same GPU), and that the patched model still answers the same.
Prints one JSON line per check; exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mem", type=float, default=0.2)
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from patchgate.profile import get_profile
    from patchgate.engines.sglang import SGLangEngine
    from patchgate.patches import discover

    prof = get_profile("h200-default")
    prof = prof.with_overrides(engine_args={**prof.engine_args, "mem_fraction_static": args.mem})
    items = [json.loads(x) for x in (ROOT / "guards/tasks/addition.jsonl").open()][:8]
    failures = 0

    def report(name, ok, **kw):
        nonlocal failures
        failures += not ok
        print(json.dumps({"check": name, "ok": bool(ok), **kw}), flush=True)

    t = time.time()
    ref = SGLangEngine(prof, [], "reference")
    report("engine start", True, seconds=round(time.time() - t, 1))
    tok = ref.tokenizer
    prompts = [tok(it["prompt"], add_special_tokens=False)["input_ids"] for it in items]
    try:
        out = ref.generate(prompts, 16)
        report("fixed lengths", all(len(o) == 16 for o in out))
        until = ref.generate_until(prompts, 8, frozenset({tok.convert_tokens_to_ids(".")}))
        texts = [tok.decode(o, skip_special_tokens=True).split(".")[0].strip() for o in until]
        right = sum(t_ == it["answer"] for t_, it in zip(texts, items, strict=True))
        report("generate_until answers", right >= 1, right=right, of=len(items), texts=texts[:3])
        pairs = [(p, tok(" " + it["answer"], add_special_tokens=False)["input_ids"])
                 for p, it in zip(prompts, items, strict=True)]
        sgl = ref.loglikelihood(pairs)
        hf = AutoModelForCausalLM.from_pretrained(prof.model_path(), trust_remote_code=True,
                                                  dtype=torch.float32).cuda().eval()
        diffs = []
        with torch.no_grad():
            for (ctx, cont), (ll, _) in zip(pairs, sgl, strict=True):
                ids = torch.tensor([ctx + cont], device="cuda")
                lp = hf(ids).logits[0, :-1].log_softmax(-1)
                want = sum(lp[len(ctx) - 1 + i, c].item() for i, c in enumerate(cont))
                diffs.append(abs(want - ll))
        report("loglikelihood vs transformers fp32", max(diffs) < 0.1,
               max_abs_diff=round(max(diffs), 4), sglang=[round(x, 3) for x, _ in sgl[:3]])
        del hf
        torch.cuda.empty_cache()
    finally:
        ref.close()
    patches = [p for p in discover(ROOT / "model_patches") if p.applies_to("sglang")]
    t = time.time()
    cand = SGLangEngine(prof, patches, "candidate")
    report("patched engine start", True, patches=[p.name for p in patches],
           seconds=round(time.time() - t, 1))
    try:
        out2 = cand.generate(prompts, 16)
        same = sum(a == b for a, b in zip(out, out2, strict=True))
        report("patched outputs equal unpatched", same >= len(out) - 1, same=same, of=len(out))
    finally:
        cand.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
