"""Choose each task's evaluation preset from the trained model's quick evaluation.

Usage (from the repository root)::

    python -m models.select_presets                       # show the choice
    python -m models.select_presets --write               # write models/eval_presets.json
    python -m models.select_presets --measure --write     # the same from a CPU evaluation
    python -m guards.build_tasks                          # then regenerate the task data

``models/train_default.py`` ends with a quick greedy evaluation of every preset of
``EVAL_PRESETS`` (fp32 and int4 per channel), recorded in ``train_log.json``. Per
task, the rule takes the hardest preset whose fp32 score is at least ``--floor``
(default 0.8): tasks at the edge of what the model does, where a loss of precision
shows, yet above the suite's floor of 0.6 per task. Training skipped the evaluation
items of every preset, so any choice keeps the evaluation items unseen.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from models import synthtasks as st

ROOT = Path(__file__).resolve().parent.parent
ORDER = ("hard", "medium", "easy")  # hardest first


def measure(model_dir: Path) -> dict:
    """The training log's quick evaluation (fp32 and int4 per channel, every preset),
    measured now on CPU on the model in ``model_dir``."""
    import torch
    from transformers import AutoModelForCausalLM

    from models.quantize import quantize_linears
    from models.train_default import quick_eval

    log = {}
    for name, bits in (("fp32", None), ("int4_channel", 4)):
        model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True,
                                                     dtype=torch.float32)
        if bits:
            quantize_linears(model, bits, None)
        for preset in ORDER:
            log[f"quick_eval_{name}_{preset}"] = quick_eval(model, torch.device("cpu"),
                                                            preset=preset)
    return log


def choose(log: dict, floor: float) -> dict[str, str]:
    out = {}
    for task in st.TASKS:
        fits = [p for p in ORDER if log[f"quick_eval_fp32_{p}"][task] >= floor]
        out[task] = fits[0] if fits else "easy"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", type=Path, default=ROOT / "models/default/train_log.json")
    ap.add_argument("--floor", type=float, default=0.8)
    ap.add_argument("--write", action="store_true", help=f"write {st.EVAL_PRESETS_FILE.name}")
    ap.add_argument("--measure", action="store_true",
                    help="evaluate every preset now on CPU (models/default) instead of "
                    "reading the training log")
    args = ap.parse_args(argv)
    log = measure(ROOT / "models/default") if args.measure else json.loads(args.log.read_text())
    chosen = choose(log, args.floor)
    for task in st.TASKS:
        cells = [f"{p} {log[f'quick_eval_fp32_{p}'][task]:.2f}/"
                 f"{log[f'quick_eval_int4_channel_{p}'][task]:.2f}" for p in reversed(ORDER)]
        print(f"{task:12s} {'  '.join(cells)}  -> {chosen[task]}")
    if args.write:
        st.EVAL_PRESETS_FILE.write_text(json.dumps({
            "presets": chosen,
            "rule": f"python -m models.select_presets{' --measure' * args.measure} --write "
                    f"--floor {args.floor}: per task "
                    "the hardest preset with fp32 quick-eval score >= floor",
        }, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
