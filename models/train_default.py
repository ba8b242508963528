"""Train the embedded default model (a small MiniCPM) from scratch on synthetic tasks.

Usage (from the repository root)::

    # the recorded model: two phases on one H200 (16 + 7 minutes), exact commands in
    # models/default/README.md; phase 1:
    python -m models.train_default --out runs/A --steps 1000000 --max-minutes 16 \
        --lr 6e-4 --scale-emb 1 --weights copy=0.1 --lead copy=0.1

    # a smoke run on CPU (seconds)
    python -m models.train_default --out /tmp/tiny --steps 20 --tokens-per-batch 2048 \
        --device cpu --workers 0

What it does:

- builds the word-level tokenizer and the MiniCPM config, and writes a complete
  model folder (config with ``auto_map``, ``model.safetensors``, tokenizer files,
  the modeling code) to ``--out``;
- draws training items of the tasks in ``TASK_WEIGHTS`` (generators in
  ``models/synthtasks.py``) from ``--seed`` (never the evaluation seed) and drops
  any item whose prompt is one of the evaluation prompts, so evaluation items are never trained on;
- loss only on answers (each answer and its terminating ``.``); several questions
  per long context, so each long sequence teaches more than one lookup;
- a curriculum on the needle task: haystacks grow from 48 words to the full length,
  and the needles from one to the maximum, over the first half of training;
- ``--lead copy=0.1``: the training-only copy task alone for the first 10 %, which
  forms the induction heads retrieval needs (without it needle stays at chance);
- AdamW, linear warm-up then cosine decay, bf16 autocast on GPU;
- ``--scale-emb`` (MiniCPM's 12 by default) and ``--init-std`` set the embedding
  multiplier and the init; ``python -m models.probe_retrieval`` measures on CPU how
  fast a setting learns retrieval (results in the model card);
- at the end, a quick greedy evaluation on the evaluation items (fp32, and with
  int4 per-channel weights) written to ``train_log.json`` beside the weights.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, IterableDataset

from models import synthtasks as st
from models.default.configuration_minicpm import MiniCPMConfig
from models.default.modeling_minicpm import MiniCPMForCausalLM
from models.quantize import quantize_linears

HERE = Path(__file__).resolve().parent
MODEL_CODE = ("configuration_minicpm.py", "modeling_minicpm.py")
TASK_WEIGHTS = {"needle": 0.3, "common_word": 0.15, "fact_mc": 0.2, "addition": 0.15,
                "var_track": 0.2}
QUESTIONS = {"needle": 4, "common_word": 1, "common_word_long": 1, "fact_mc": 4,
             "addition": 1, "var_track": 3, "copy": 1}


def write_tokenizer(out: Path) -> None:
    tok = st.build_tokenizer()
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "padding_side": "left",
        "clean_up_tokenization_spaces": False,
    }, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps({
        "pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
    }, indent=2) + "\n")


def add_init_args(ap: argparse.ArgumentParser) -> None:
    """The settings that shape how a fresh model learns (shared with the probe)."""
    ap.add_argument("--scale-emb", type=float, default=12.0,
                    help="muP embedding multiplier (MiniCPM's is 12; see the model card)")
    ap.add_argument("--init-std", type=float, default=0.02,
                    help="initializer_range: std of the normal init of every weight")


def make_config(args) -> MiniCPMConfig:
    cfg = MiniCPMConfig(
        vocab_size=len(st.vocabulary()),
        hidden_size=args.hidden, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, max_position_embeddings=4096,
        scale_emb=args.scale_emb, dim_model_base=128, scale_depth=1.4,
        initializer_range=args.init_std,
    )
    cfg.architectures = ["MiniCPMForCausalLM"]
    cfg.auto_map = {
        "AutoConfig": "configuration_minicpm.MiniCPMConfig",
        "AutoModelForCausalLM": "modeling_minicpm.MiniCPMForCausalLM",
    }
    return cfg


def save_model(model: MiniCPMForCausalLM, out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous()
             for k, v in model.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_dict()
    cfg["torch_dtype"] = "float32"
    for k in ("transformers_version", "dtype"):
        cfg.pop(k, None)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    write_tokenizer(out)
    for name in MODEL_CODE:
        shutil.copy(HERE / "default" / name, out / name)


class TaskStream(IterableDataset):
    """Endless batches: each batch is one task, rows padded to the batch's longest."""

    def __init__(self, seed: int, tokens_per_batch: int, steps: int, exclude: set[str],
                 curriculum_start: int = 48, weights: dict[str, float] | None = None,
                 clock: Clock | None = None, lead: tuple[str, float] | None = None):
        self.seed, self.tokens, self.steps, self.exclude = seed, tokens_per_batch, steps, exclude
        self.clock = clock
        self.lead = lead  # (task, fraction): only that task until progress reaches fraction
        self.curriculum_start = curriculum_start
        self.weights = weights or TASK_WEIGHTS
        self.vocab = {w: i for i, w in enumerate(st.vocabulary())}

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        rng = random.Random(f"train:{self.seed}:{wid}")
        cur = st.Curriculum(start=self.curriculum_start)
        made = 0
        tasks, weights = zip(*self.weights.items(), strict=True)
        while True:
            cur.progress = made * nw / max(1, self.steps)
            if self.clock is not None:
                cur.progress = max(cur.progress, self.clock.fraction())
            if self.lead is not None and cur.progress < self.lead[1]:
                task = self.lead[0]
            else:
                task = rng.choices(tasks, weights)[0]
            rows, spans, longest = [], [], 0
            while True:
                item = draw(rng, task, cur, self.exclude)
                text, sp = st.training_text(item)
                ids = [self.vocab[w] for w in text.split()]
                longest = max(longest, len(ids))
                if rows and longest * (len(rows) + 1) > self.tokens:
                    break
                rows.append(ids)
                spans.append(sp)
            made += 1
            yield _collate(rows, spans)


def draw(rng: random.Random, task: str, cur: st.Curriculum | None, exclude: set[str]) -> dict:
    """One training item of ``task``; items whose prompt is an evaluation prompt are
    skipped, so no evaluation item is ever trained on."""
    while True:
        item = st.sample(task, rng, curriculum=cur, questions=rng.randint(1, QUESTIONS[task]))
        if item["prompt"] not in exclude:
            return item


def parse_weights(text: str | None) -> dict[str, float]:
    """``TASK_WEIGHTS`` updated by ``task=weight,...`` (evaluated or auxiliary tasks)."""
    weights = dict(TASK_WEIGHTS)
    known = set(st.TRAINABLE)
    for part in filter(None, (text or "").split(",")):
        name, sep, value = part.partition("=")
        if not sep or name not in known:
            raise ValueError(f"--weights: {part!r} is not task=weight with a task of "
                             f"{sorted(known)}")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {value!r} is not a number") from None
        if weights[name] < 0:
            raise ValueError(f"--weights: {part!r} is negative")
    return weights


def parse_lead(text: str | None) -> tuple[str, float] | None:
    """``--lead TASK=FRACTION``: train only TASK for that first fraction of the run."""
    if not text:
        return None
    name, sep, value = text.partition("=")
    known = set(st.TRAINABLE)
    try:
        frac = float(value) if sep else -1.0
    except ValueError:
        frac = -1.0
    if name not in known or not 0 <= frac < 1:
        raise ValueError(f"--lead: {text!r} is not task=fraction with a task of "
                         f"{sorted(known)} and 0 <= fraction < 1")
    return name, frac


def eval_prompts() -> set[str]:
    """The evaluation prompts of every task at every preset of ``EVAL_PRESETS``."""
    return {it["prompt"] for t in st.TASKS for d in st.EVAL_PRESETS.values()
            for it in st.make_eval_items(t, difficulty=d)}


def _collate(rows, spans):
    n, width = len(rows), max(len(r) for r in rows)
    ids = torch.zeros(n, width, dtype=torch.long)
    labels = torch.full((n, width), -100, dtype=torch.long)
    for i, (r, sp) in enumerate(zip(rows, spans, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        for a, b in sp:
            labels[i, a:b] = ids[i, a:b]
    return ids, labels


class Clock:
    """Training progress by wall time: the schedule (learning rate, curriculum) ends
    on time when ``--max-minutes`` comes before ``--steps``."""

    def __init__(self, seconds: float, start: float | None = None):
        self.seconds, self.start = seconds, time.time() if start is None else start

    def fraction(self) -> float:
        return (time.time() - self.start) / self.seconds


def lr_at(step: int, progress: float, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine to 10 % of ``peak`` as
    ``progress`` (0..1, by steps or by wall time, whichever is further) goes to 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, progress)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def quick_eval(model, device, n: int = 100, preset: str | None = None) -> dict[str, float]:
    """Greedy exact match (log-likelihood choice for fact_mc) on the evaluation items
    (each task's own preset, or ``preset`` for all)."""
    vocab = {w: i for i, w in enumerate(st.vocabulary())}
    inv = st.vocabulary()
    model.eval()
    scores = {}
    for task in st.TASKS:
        items = st.make_eval_items(task, n, difficulty=st.EVAL_PRESETS[preset]
                                   if preset else None)
        ok = 0
        for it in items:
            ids = torch.tensor([[vocab[w] for w in it["prompt"].split()]], device=device)
            if "choices" in it:
                lls = []
                for c in it["choices"]:
                    full = torch.cat([ids, torch.tensor([[vocab[c]]], device=device)], 1)
                    logp = model(full, use_cache=False).logits[0, -2].log_softmax(-1)
                    lls.append(logp[vocab[c]].item())
                ok += int(max(range(len(lls)), key=lls.__getitem__) == it["label"])
                continue
            out = []
            for _ in range(16):  # the longest answer: 3 alias hops, 9 words
                nxt = model(ids, use_cache=False).logits[0, -1].argmax().item()
                if inv[nxt] == ".":
                    break
                out.append(inv[nxt])
                ids = torch.cat([ids, torch.tensor([[nxt]], device=device)], 1)
            ok += int(" ".join(out) == it["answer"])
        scores[task] = ok / len(items)
    scores["mean"] = sum(scores.values()) / len(st.TASKS)
    model.train()
    return scores


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    ap.add_argument("--tokens-per-batch", type=int, default=49152)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--eval-items", type=int, default=100)
    ap.add_argument("--init", type=Path, help="continue from this model.safetensors")
    add_init_args(ap)
    ap.add_argument("--weights", default=None,
                    help="task mixture as task=weight,... (default: TASK_WEIGHTS); "
                    "copy=W adds the training-only copy task")
    ap.add_argument("--lead", default=None,
                    help="TASK=FRACTION: only TASK for the first FRACTION of training "
                    "(copy=0.1: the induction that retrieval needs forms first)")
    ap.add_argument("--curriculum-start", type=int, default=48,
                    help="needle haystack cap (words) at the start of the curriculum")
    args = ap.parse_args(argv)
    assert args.seed != st.EVAL_SEED, "the training seed must differ from the evaluation seed"

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model = MiniCPMForCausalLM(make_config(args))
    if args.init is not None:
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(args.init)))
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params:,}", flush=True)
    exclude = eval_prompts()
    try:
        weights = parse_weights(args.weights)
        lead = parse_lead(args.lead)
    except ValueError as e:
        ap.error(str(e))
    clock = Clock(args.max_minutes * 60)
    stream = TaskStream(args.seed, args.tokens_per_batch, args.steps, exclude,
                        args.curriculum_start, weights, clock, lead)
    loader = DataLoader(stream, batch_size=None, num_workers=args.workers,
                        prefetch_factor=8 if args.workers else None,
                        persistent_workers=bool(args.workers))
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8,
                            fused=device.type == "cuda")
    use_bf16 = device.type == "cuda"
    t0 = time.time()
    log, ema = [], None
    step = 0
    for step, (ids, labels) in enumerate(loader):
        progress = max(step / args.steps, clock.fraction())
        if progress >= 1:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step, progress, args.lr, args.warmup)
        ids, labels = ids.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = model(ids, labels=labels, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0:
            val = loss.item()
            ema = val if ema is None else 0.9 * ema + 0.1 * val
            log.append({"step": step, "loss": round(val, 5), "t": round(time.time() - t0, 1)})
            if step % 500 == 0:
                print(f"step {step} loss {val:.4f} ema {ema:.4f} {time.time() - t0:.0f}s",
                      flush=True)
    wall = time.time() - t0
    model = model.float()
    save_model(model, args.out)
    summary = {"command_args": {k: str(v) if isinstance(v, Path) else v
                                for k, v in vars(args).items()}, "params": n_params,
               "steps_done": step, "wall_s": round(wall, 1), "final_loss_ema": ema,
               "log": log}
    for preset in st.EVAL_PRESETS:  # the evaluation preset of each task is chosen from these
        summary[f"quick_eval_fp32_{preset}"] = quick_eval(model, device, args.eval_items, preset)
        print("fp32", preset, summary[f"quick_eval_fp32_{preset}"], flush=True)
    quantize_linears(model, bits=4)
    for preset in st.EVAL_PRESETS:
        summary[f"quick_eval_int4_channel_{preset}"] = quick_eval(model, device,
                                                                   args.eval_items, preset)
        print("int4", preset, summary[f"quick_eval_int4_channel_{preset}"], flush=True)
    (args.out / "train_log.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
