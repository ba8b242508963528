"""What an accuracy guard returns, and how two results are paired and compared.

Result shape (a typed dict; numbers stay numbers)::

    {"tasks": {"gsm8k": {"metric": "exact_match", "filter": "strict-match",
                         "value": 0.62, "docs": "<digest of the items>",
                         "samples": [{"id": "12", "score": 1.0, "output": "...",
                                      "answer": "72", "target": "72", "prompt": "..."}],
                         "others": [{"metric": "exact_match", "filter":
                                     "flexible-extract", "value": 0.66}]}, ...},
     "mean": 0.62}

``output`` is the generation (or, multiple choice, the chosen choice), ``answer`` what
the filter extracted from it when that differs. Prompts stay in memory (the flips file
shows them); the stored baselines keep ids, scores, outputs and targets
(:func:`stored`). Older stored results (``metric`` and ``id``/``score`` only) load and
pair as the filter ``none``. Items are paired by (task, filter, item id).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ..errors import PatchgateError

NO_FILTER = "none"  # lm-eval's name of a task without filter pipelines
STORED_TEXT = 400  # characters of an output or target kept in a stored baseline


class ItemScore(TypedDict):
    id: str
    score: float
    output: NotRequired[str]
    answer: NotRequired[str]
    target: NotRequired[str]
    prompt: NotRequired[str]


class OtherScore(TypedDict):
    metric: str
    filter: str
    value: float


class TaskResult(TypedDict):
    metric: str
    value: float
    samples: list[ItemScore]
    filter: NotRequired[str]
    docs: NotRequired[str]
    others: NotRequired[list[OtherScore]]


class AccuracyResult(TypedDict):
    tasks: dict[str, TaskResult]
    mean: float
    # a share of the items (the sequential guard stopped early): {"evaluated", "total"}
    partial: NotRequired[dict]


def filter_of(result: TaskResult) -> str:
    return result.get("filter", NO_FILTER)


def differences(stored: AccuracyResult, here: AccuracyResult) -> list[str]:
    """What keeps a stored accuracy from standing in for one measured now on the same
    model: other tasks, another primary metric or filter, other items."""
    out = []
    if stored.get("partial"):
        p = stored["partial"]
        out.append(f"{p.get('evaluated')} of {p.get('total')} items only (partial)")
        return out
    a, b = set(stored["tasks"]), set(here["tasks"])
    if a != b:
        out.append(f"tasks: stored {', '.join(sorted(a))}; now {', '.join(sorted(b))}")
    for task in sorted(a & b):
        s, h = stored["tasks"][task], here["tasks"][task]
        if (s["metric"], filter_of(s)) != (h["metric"], filter_of(h)):
            out.append(f"{task}: stored {s['metric']}/{filter_of(s)}, now "
                       f"{h['metric']}/{filter_of(h)}")
        elif s.get("docs") and h.get("docs") and s["docs"] != h["docs"]:
            out.append(f"{task}: other items (data changed)")
        elif [i["id"] for i in s["samples"]] != [i["id"] for i in h["samples"]]:
            out.append(f"{task}: other item ids")
    return out


def paired_scores(reference: AccuracyResult, candidate: AccuracyResult
                  ) -> tuple[list[float], list[float]]:
    """Item scores of both runs, aligned by (task, filter, item id); refuses different
    tasks, metrics, filters or item sets."""
    ref, cand = [], []
    for task, r in sorted(reference["tasks"].items()):
        c = candidate["tasks"].get(task)
        if c is None:
            raise PatchgateError(f"accuracy guard: task {task} is in the reference but not in "
                                 "the candidate run",
                                 hint="re-create the reference with the same tasks (--accept)")
        if (r["metric"], filter_of(r)) != (c["metric"], filter_of(c)):
            raise PatchgateError(
                f"accuracy guard: task {task} was judged on {r['metric']}/{filter_of(r)} in "
                f"the reference but on {c['metric']}/{filter_of(c)} in the candidate",
                hint="re-create the reference with the same profile (--accept)")
        cmap = {s["id"]: s["score"] for s in c["samples"]}
        for s in r["samples"]:
            if s["id"] not in cmap:
                raise PatchgateError(f"accuracy guard: item {s['id']} of task {task} is missing "
                                     "from the candidate run",
                                     hint="the task data changed; re-create the reference")
            ref.append(s["score"])
            cand.append(cmap[s["id"]])
    return ref, cand


def flips(reference: AccuracyResult, candidate: AccuracyResult) -> list[dict]:
    """Items judged right (score >= 0.5) in one run and wrong in the other, in task and
    item order: both outputs, the target and the prompt."""
    out = []
    for task, r in sorted(reference["tasks"].items()):
        c = candidate["tasks"].get(task)
        if c is None:
            continue
        cmap = {s["id"]: s for s in c["samples"]}
        for rs in r["samples"]:
            cs = cmap.get(rs["id"])
            if cs is None or (rs["score"] >= 0.5) == (cs["score"] >= 0.5):
                continue
            out.append({
                "task": task, "filter": filter_of(r), "metric": r["metric"], "id": rs["id"],
                "direction": "right->wrong" if rs["score"] >= 0.5 else "wrong->right",
                "reference_score": rs["score"], "candidate_score": cs["score"],
                "target": cs.get("target", rs.get("target")),
                "reference_output": rs.get("answer", rs.get("output")),
                "candidate_output": cs.get("answer", cs.get("output")),
                "reference_generation": rs.get("output"),
                "candidate_generation": cs.get("output"),
                "prompt": cs.get("prompt", rs.get("prompt")),
            })
    return out


def stored(result: AccuracyResult | None) -> AccuracyResult | None:
    """``result`` as a baseline keeps it: no prompts, texts clipped to STORED_TEXT."""
    if result is None:
        return None
    tasks = {}
    for name, task in result["tasks"].items():
        samples = []
        for s in task["samples"]:
            kept = {k: v for k, v in s.items() if k != "prompt"}
            for k in ("output", "answer", "target"):
                if isinstance(kept.get(k), str):
                    kept[k] = kept[k][:STORED_TEXT]
            samples.append(kept)
        tasks[name] = {**task, "samples": samples}
    out = AccuracyResult(tasks=tasks, mean=result["mean"])
    if "partial" in result:
        out["partial"] = dict(result["partial"])
    return out
