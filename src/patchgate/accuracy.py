"""The accuracy guard: the profile's lm-eval tasks, run through a loaded engine.

:class:`EngineLM` adapts an :class:`~patchgate.engines.base.Engine` (the same loaded,
patched model the latency scenarios use) to lm-eval's ``LM`` interface, so the
tasks in ``guards/`` run unchanged. The result keeps every item's score, which the
verdict compares item by item with the reference.

Result shape (a typed dict; numbers stay numbers)::

    {"tasks": {"needle": {"metric": "exact_match", "value": 0.93,
                          "samples": [{"id": "needle-0000", "score": 1.0}, ...]}, ...},
     "mean": 0.91}
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence
from typing import TypedDict

from .errors import PatchgateError

PRIMARY_METRICS = ("acc", "exact_match")


class ItemScore(TypedDict):
    id: str
    score: float


class TaskResult(TypedDict):
    metric: str
    value: float
    samples: list[ItemScore]


class AccuracyResult(TypedDict):
    tasks: dict[str, TaskResult]
    mean: float


def _lm_class():
    from lm_eval.api.model import LM

    class EngineLM(LM):
        """lm-eval's view of a patchgate engine (greedy, token ids in and out)."""

        def __init__(self, engine, tokenizer, batch_size: int = 16, progress=None):
            super().__init__()
            self.engine, self.tok, self.batch_size = engine, tokenizer, batch_size
            self.progress = progress

        def _encode(self, text: str) -> list[int]:
            return self.tok(text, add_special_tokens=False)["input_ids"]

        def _tick(self, n: int) -> None:
            if self.progress is not None:
                self.progress.update(n)

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            pairs = []
            for req in requests:
                ctx, cont = req.args
                whole = self._encode(ctx + cont)
                ctx_ids = self._encode(ctx)
                if whole[: len(ctx_ids)] != ctx_ids:  # tokenizer merged across the boundary
                    ctx_ids = ctx_ids[:-1]
                cont_ids = whole[len(ctx_ids):]
                if not ctx_ids:
                    ctx_ids = [self.tok.eos_token_id or 0]
                pairs.append((ctx_ids, cont_ids))
            order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
            out: list[tuple[float, bool] | None] = [None] * len(pairs)
            for i in range(0, len(order), self.batch_size):
                chunk = order[i: i + self.batch_size]
                for j, res in zip(chunk, self.engine.loglikelihood([pairs[j] for j in chunk]),
                                  strict=True):
                    out[j] = res
                self._tick(len(chunk))
            return out

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise PatchgateError("rolling log-likelihood tasks are not supported by the guard",
                                 hint="use generate_until or multiple_choice tasks")

        def generate_until(self, requests, disable_tqdm: bool = False):
            prepared = []
            for req in requests:
                ctx, kw = req.args
                until = kw.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                prepared.append((self._encode(ctx), until, int(kw.get("max_gen_toks", 32))))
            stop_ids = frozenset(
                i for _, until, _ in prepared for s in until
                for i in [self.tok.convert_tokens_to_ids(s.strip())]
                if s.strip() and i is not None and i != self.tok.unk_token_id
            ) | ({self.tok.eos_token_id} if self.tok.eos_token_id is not None else set())
            order = sorted(range(len(prepared)), key=lambda i: -len(prepared[i][0]))
            out: list[str | None] = [None] * len(prepared)
            for i in range(0, len(order), self.batch_size):
                chunk = order[i: i + self.batch_size]
                max_new = max(prepared[j][2] for j in chunk)
                rows = self.engine.generate_until([prepared[j][0] for j in chunk], max_new,
                                                  frozenset(stop_ids))
                for j, row in zip(chunk, rows, strict=True):
                    text = self.tok.decode(row[: prepared[j][2]], skip_special_tokens=True)
                    for s in prepared[j][1]:
                        text = text.split(s)[0]
                    out[j] = text
                self._tick(len(chunk))
            return out

    return EngineLM


def run_guard_tasks(engine, tokenizer, tasks: Sequence[str], task_path: str,
                    batch_size: int = 16, progress=None) -> AccuracyResult:
    """Run ``tasks`` (lm-eval names; groups expand) through ``engine``."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    for name in ("lm-eval", "lm_eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    lm = _lm_class()(engine, tokenizer, batch_size, progress)
    manager = TaskManager(include_path=task_path, include_defaults=False)
    try:
        # lm-eval's own per-task progress bars go nowhere; ours (``progress``) stays.
        with contextlib.redirect_stderr(io.StringIO()):
            res = simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager,
                                  log_samples=True)
    except PatchgateError:
        raise
    except (KeyError, ValueError, FileNotFoundError) as e:
        raise PatchgateError(f"accuracy guard: lm-eval could not run tasks {list(tasks)} "
                             f"from {task_path}: {type(e).__name__}: {e}",
                             hint="check the task YAML files and their data") from e
    return collect(res)


def collect(res: dict) -> AccuracyResult:
    """Per-item primary-metric scores out of lm-eval's ``simple_evaluate`` result."""
    tasks: dict[str, TaskResult] = {}
    for task, samples in sorted(res.get("samples", {}).items()):
        if not samples:
            continue
        metric = next((m for m in PRIMARY_METRICS if m in samples[0]), None)
        if metric is None:
            raise PatchgateError(f"accuracy guard: task {task} reports none of "
                                 f"{PRIMARY_METRICS}",
                                 hint="give the task a primary metric named acc or exact_match")
        items = [ItemScore(id=str(s["doc"].get("id", s["doc_id"])), score=float(s[metric]))
                 for s in sorted(samples, key=lambda s: s["doc_id"])]
        value = sum(i["score"] for i in items) / len(items)
        tasks[task] = TaskResult(metric=metric, value=value, samples=items)
    if not tasks:
        raise PatchgateError("accuracy guard: lm-eval returned no samples",
                             hint="check the profile's tasks")
    return AccuracyResult(tasks=tasks, mean=sum(t["value"] for t in tasks.values()) / len(tasks))


def paired_scores(reference: AccuracyResult, candidate: AccuracyResult
                  ) -> tuple[list[float], list[float]]:
    """Item scores of both runs, aligned by (task, item id); refuses different item sets."""
    ref, cand = [], []
    for task, r in sorted(reference["tasks"].items()):
        c = candidate["tasks"].get(task)
        if c is None:
            raise PatchgateError(f"accuracy guard: task {task} is in the reference but not in "
                                 "the candidate run",
                                 hint="re-create the reference with the same tasks (--accept)")
        cmap = {s["id"]: s["score"] for s in c["samples"]}
        for s in r["samples"]:
            if s["id"] not in cmap:
                raise PatchgateError(f"accuracy guard: item {s['id']} of task {task} is missing "
                                     "from the candidate run",
                                     hint="the task data changed; re-create the reference")
            ref.append(s["score"])
            cand.append(cmap[s["id"]])
    return ref, cand
