"""A CPU probe of how fast a MiniCPM setting learns retrieval (minutes, no GPU).

Trains a fresh model on one task (default ``var_track``: copy the 3-digit value
bound to a name) and prints the answer-token loss (EMA) every 200 steps. Before the
model binds names to values, the loss sits at the unconditional digit guess (about
1.67 nats per answer token: three random digits and a free ``.``); a setting that
learns retrieval leaves that plateau within a few hundred steps.

    python -m models.probe_retrieval --scale-emb 12 --minutes 6     # the default's setting
    python -m models.probe_retrieval --scale-emb 1 --minutes 6
    python -m models.probe_retrieval --size default --lr 6e-4 --scale-emb 1
    python -m models.probe_retrieval --task copy --scale-emb 12 --minutes 2
    python -m models.probe_retrieval --task needle --copy 0.5 --scale-emb 1

``--copy F`` mixes in the training-only copy task (weight F against 1 for ``--task``);
the printed loss is that of ``--task`` alone.

``--size small`` is 2 layers x 128 (fast on 2 cores); ``--size default`` is the
default model's shape (4 layers x 256, FFN 768). Results: models/default/README.md.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import torch

from models import train_default as td
from models.default.modeling_minicpm import MiniCPMForCausalLM

SIZES = {"small": dict(layers=2, hidden=128, ffn=384, heads=2, kv_heads=1),
         "default": dict(layers=4, hidden=256, ffn=768, heads=4, kv_heads=2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="var_track", choices=td.st.TRAINABLE)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    td.add_init_args(ap)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--tokens-per-batch", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--copy", type=float, default=0.0,
                    help="weight of the training-only copy task mixed in (0: none)")
    ap.add_argument("--lead", type=float, default=0.0,
                    help="fraction of the run spent on the copy task alone first")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    cfg = td.make_config(SimpleNamespace(**SIZES[args.size], scale_emb=args.scale_emb,
                                         init_std=args.init_std))
    model = MiniCPMForCausalLM(cfg)
    clock = td.Clock(args.minutes * 60)
    weights = {args.task: 1.0}
    if args.copy > 0 and args.task != "copy":
        weights["copy"] = args.copy
    lead = ("copy", args.lead) if args.lead > 0 else None  # TaskStream picks it by name
    stream = td.TaskStream(1234, args.tokens_per_batch, 10**9, set(), 48, weights, clock, lead)
    copy_marker = stream.vocab["code"]  # copy items start with "code :"; no other task does
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98),
                            weight_decay=0.01)
    t0, ema, step = time.time(), None, 0
    print(f"{args.task} {args.size} scale_emb={args.scale_emb} init_std={args.init_std} "
          f"lr={args.lr} copy={args.copy} lead={args.lead}",
          flush=True)
    for step, (ids, labels) in enumerate(stream):
        if clock.fraction() >= 1:
            break
        for g in opt.param_groups:
            g["lr"] = td.lr_at(step, clock.fraction(), args.lr, 100)
        loss = model(ids, labels=labels, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if args.task == "copy" or ids[0, 0].item() != copy_marker:  # each batch is one task
            ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 200 == 0 and ema is not None:
            print(f"step {step} loss_ema {ema:.3f} {time.time() - t0:.0f}s", flush=True)
    print(f"done: {step} steps, loss_ema {float('nan') if ema is None else ema:.3f}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
