"""Per-layer int4 sensitivity of the default model, and the mixed-precision layer choice.

Usage (from the repository root; about a minute on 2 CPU cores)::

    python -m models.sensitivity                  # table + the chosen int8 layers
    python -m models.sensitivity --json out.json

Measured on a calibration split: items of the six tasks drawn from
``CALIBRATION_SEED`` (neither the training seed nor the evaluation seed), with the
evaluation difficulty. For every linear layer alone, its weight is quantized to
int4 (round-to-nearest, groups of 32) and the calibration accuracy (every answer
token is the argmax under teacher forcing, i.e. greedy decoding would produce the
answer) and the answers' mean negative log-likelihood are measured. Layers are
then ranked by the NLL increase; the most sensitive ones are kept in int8, adding
one at a time until the model with every other layer in int4 keeps at least
``--target`` (default 99.5 %) of the fp32 calibration accuracy **and** wins back at
least ``--recovery`` (default half) of the answer-NLL increase that int4 everywhere
causes (accuracy on a few hundred items is too coarse to rank alone).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from models import synthtasks as st
from models.quantize import rtn_quantize

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION_SEED = 777
CALIBRATION_ITEMS = 60  # per task


def calibration_batches(n: int = CALIBRATION_ITEMS):
    """[(ids [1, S], answer positions)] over the six tasks."""
    vocab = {w: i for i, w in enumerate(st.vocabulary())}
    out = []
    for task in st.TASKS:
        for it in st.make_eval_items(task, n, seed=CALIBRATION_SEED):
            text, spans = st.training_text({"prompt": it["prompt"], "answer": it["answer"]})
            ids = torch.tensor([[vocab[w] for w in text.split()]])
            a, b = spans[0]
            out.append((ids, list(range(a, b - 1))))  # the answer, not its final "."
    return out


@torch.no_grad()
def score(model, batches) -> tuple[float, float]:
    """(accuracy, mean answer NLL) under teacher forcing."""
    right, nll, n = 0, 0.0, 0
    for ids, pos in batches:
        logp = model(ids, use_cache=False).logits[0].log_softmax(-1)
        tgt = ids[0, pos]
        pred = logp[[p - 1 for p in pos]]
        right += int(bool((pred.argmax(-1) == tgt).all()))
        nll += -pred.gather(-1, tgt[:, None]).sum().item()
        n += len(pos)
    return right / len(batches), nll / n


def linear_names(model) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def quantized(model, plan: dict[str, tuple[int, int | None]]):
    """Set the weights of the layers in ``plan`` to their quantized values (in place);
    returns the original weights for :func:`restore`."""
    saved = {}
    mods = dict(model.named_modules())
    for name, (bits, group) in plan.items():
        w = mods[name].weight
        saved[name] = w.detach().clone()
        w.data.copy_(rtn_quantize(w, bits, group))
    return saved


def restore(model, saved) -> None:
    mods = dict(model.named_modules())
    for name, w in saved.items():
        mods[name].weight.data.copy_(w)


def choose(model, batches, target: float, recovery: float = 0.5) -> dict:
    base_acc, base_nll = score(model, batches)
    names = linear_names(model)
    rows = []
    for name in names:
        saved = quantized(model, {name: (4, 32)})
        acc, nll = score(model, batches)
        restore(model, saved)
        rows.append({"layer": name, "accuracy": acc, "nll_increase": nll - base_nll})
    ranked = sorted(rows, key=lambda r: -r["nll_increase"])
    keep: list[str] = []
    all_int4 = None
    for k in range(len(ranked) + 1):
        keep = [r["layer"] for r in ranked[:k]]
        plan = {n: ((8, None) if n in keep else (4, 32)) for n in names}
        saved = quantized(model, plan)
        acc, nll = score(model, batches)
        restore(model, saved)
        if all_int4 is None:
            all_int4 = {"accuracy": acc, "nll_increase": nll - base_nll}
        nll_ok = nll - base_nll <= (1 - recovery) * max(all_int4["nll_increase"], 0.0)
        if acc >= target * base_acc and nll_ok:
            break
    return {"fp32": {"accuracy": base_acc, "nll": base_nll}, "layers": rows,
            "all_int4": all_int4, "int8_layers": keep, "mixed_accuracy": acc,
            "mixed_nll_increase": nll - base_nll, "target": target, "recovery": recovery}


def main(argv=None) -> int:
    from transformers import AutoModelForCausalLM

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models/default")
    ap.add_argument("--target", type=float, default=0.995)
    ap.add_argument("--recovery", type=float, default=0.5,
                    help="fraction of the all-int4 answer-NLL increase the int8 layers "
                    "must win back")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=True,
                                                 dtype=torch.float32).eval()
    res = choose(model, calibration_batches(), args.target, args.recovery)
    print(f"fp32 calibration accuracy {res['fp32']['accuracy']:.4f}, "
          f"answer NLL {res['fp32']['nll']:.4f}")
    for r in sorted(res["layers"], key=lambda r: -r["nll_increase"]):
        print(f"  {r['layer']:32s} int4 alone: accuracy {r['accuracy']:.4f}  "
              f"NLL {r['nll_increase']:+.4f}")
    print(f"int8 layers ({len(res['int8_layers'])}): {res['int8_layers']}")
    print(f"all int4-g32: accuracy {res['all_int4']['accuracy']:.4f}, "
          f"NLL {res['all_int4']['nll_increase']:+.4f}")
    print(f"mixed (those int8, the rest int4-g32): accuracy {res['mixed_accuracy']:.4f}, "
          f"NLL {res['mixed_nll_increase']:+.4f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
