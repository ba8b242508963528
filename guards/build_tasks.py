"""Write the evaluation data of the default suite: ``guards/tasks/<task>.jsonl``.

Usage (from the repository root)::

    python -m guards.build_tasks          # rewrite the JSONL files
    python -m guards.build_tasks --check  # exit 1 if the committed files differ

The items come from ``models/synthtasks.py`` with the evaluation seed
(``EVAL_SEED``) at each task's evaluation preset (``EVAL_TASK_PRESET``); the training
script uses another seed and skips the prompts of every preset.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from models import synthtasks as st

TASK_DIR = Path(__file__).resolve().parent / "tasks"


def render(task: str) -> str:
    rows = []
    for it in st.make_eval_items(task):
        row = {"id": it["id"], "prompt": it["prompt"], "answer": it["answer"]}
        if "choices" in it:
            row["choices"], row["label"] = it["choices"], it["label"]
        rows.append(json.dumps(row, sort_keys=True))
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write or check guards/tasks/*.jsonl")
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    stale = []
    for task in st.TASKS:
        path = TASK_DIR / f"{task}.jsonl"
        text = render(task)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(TASK_DIR.parent.parent)} ({text.count(chr(10))} items)")
    if stale:
        print(f"ERROR stale task data: {', '.join(stale)}; run: python -m guards.build_tasks",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
