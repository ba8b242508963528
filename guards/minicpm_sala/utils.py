"""The MiniCPM-SALA contest's public accuracy set (SOAR-Toolkit ``perf_public_set.jsonl``)
as lm-eval tasks, graded the way the contest grades it.

Each row holds ``task`` (mcq, niah, cwe, fwe, qa or lcx), ``question`` (the whole
prompt) and ``gold``. The answer is the model's reply after its reasoning (the text
after the last ``</think>``, when there is one). Grading, per task:

- mcq: the letter after ``ANSWER:`` or inside ``\\boxed{...}`` (the last one given)
  equals ``gold`` -> 1, else 0;
- qa, niah, lcx: 1 if any gold string occurs in the answer, else 0;
- cwe, fwe: the fraction of gold keywords that occur in the answer.

Strings are compared case-insensitively, as RULER (where niah, cwe, fwe and qa come
from) compares them; that, and cutting the reasoning, are assumptions: the contest's
``eval_model.py`` was not available to check them against. The data file is the
profile's ``[task_args] data_path`` (relative to the repository root, or absolute).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

TASKS = ("mcq", "niah", "cwe", "fwe", "qa", "lcx")
_CHOICE = re.compile(r"ANSWER\s*[:：]\s*\(?([A-Za-z])\b|\\boxed\{\s*\(?([A-Za-z])\)?\s*\}")


def answer_text(generation: str) -> str:
    """The reply after the model's reasoning."""
    return generation.rsplit("</think>", 1)[-1]


def choice(generation: str) -> str | None:
    """The multiple-choice letter the reply commits to (its last ANSWER: or boxed)."""
    found = _CHOICE.findall(answer_text(generation))
    if not found:
        return None
    a, b = found[-1]
    return (a or b).upper()


def golds(gold) -> list[str]:
    items = gold if isinstance(gold, list) else [gold]
    return [str(g).strip() for g in items if str(g).strip()]


def score(task: str, generation: str, gold) -> float:
    """The contest's score of one reply (0..1)."""
    text = answer_text(generation).lower()
    want = golds(gold)
    if task == "mcq":
        return float(choice(generation) == str(gold).strip().upper())
    if task in ("qa", "niah", "lcx"):
        return float(any(g.lower() in text for g in want))
    if task in ("cwe", "fwe"):
        return sum(g.lower() in text for g in want) / len(want) if want else 0.0
    raise ValueError(f"unknown MiniCPM-SALA task {task!r} (expected one of {TASKS})")


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    """lm-eval's per-item hook: ``score`` of the item (``gold`` is kept as JSON: a
    letter, a string or a list of strings)."""
    return {"score": score(doc["task"], results[0], json.loads(doc["gold"]))}


def data_file(data_path: str | None) -> Path:
    if not data_path:
        raise ValueError("the MiniCPM-SALA tasks need the accuracy set: set [task_args] "
                         "data_path in the profile (SOAR-Toolkit eval_dataset/"
                         "perf_public_set.jsonl)")
    path = Path(data_path).expanduser()
    if not path.is_absolute():
        from patchgate.profile import repo_root

        path = repo_root() / path
    if not path.is_file():
        raise FileNotFoundError(f"MiniCPM-SALA accuracy set {path} does not exist: download "
                                "perf_public_set.jsonl from OpenBMB/SOAR-Toolkit "
                                "(eval_dataset/) to the profile's [task_args] data_path")
    return path


def load(task: str, data_path: str | None = None, **_metadata):
    """``custom_dataset`` hook: the ``test`` split of the rows of ``task``."""
    import datasets
    from datasets.table import InMemoryTable

    path = data_file(data_path)
    raw = path.read_bytes()
    rows = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    mine = [{"id": f"{task}-{i:04d}", "task": r["task"], "question": r["question"],
             "gold": json.dumps(r["gold"], ensure_ascii=False)}
            for i, r in enumerate(rows) if r.get("task") == task]
    if not mine:
        raise ValueError(f"{path} has no rows of task {task!r} (tasks there: "
                         f"{sorted({r.get('task') for r in rows})})")
    digest = hashlib.sha256(raw + task.encode()).hexdigest()[:16]
    return datasets.DatasetDict({"test": datasets.Dataset(
        InMemoryTable.from_pylist(mine), split=datasets.Split.TEST, fingerprint=digest)})
