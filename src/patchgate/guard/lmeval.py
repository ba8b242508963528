"""The accuracy guard: the profile's lm-eval tasks, run through a loaded engine.

The tasks run through :mod:`patchgate.guard.lm_model` (the same loaded, patched model the
latency scenarios use). lm-eval logs one sample per item *and per filter pipeline*
(gsm8k has ``strict-match`` and ``flexible-extract``); each task is judged on one
**primary** filter and metric: the profile's ``[primary.<task>]`` (or of a group the
task belongs to), else the task's first filter and its first metric. Any metric that
lm-eval computes as a number per item can be the primary one; the other filters and
metrics are kept as lm-eval's aggregate values, for the report. Items are paired by
(task, filter, item id) with the reference.

The results and their pairing: :mod:`.results`. The guard ``lm_eval`` that runs them
(:mod:`patchgate.registry`): :mod:`.lmeval_guard`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import math
import threading
from dataclasses import dataclass, field

from ..errors import PatchgateError
from .results import NO_FILTER, AccuracyResult, ItemScore, OtherScore, TaskResult


@dataclass(frozen=True)
class Tasks:
    """What to evaluate: lm-eval task or group ``names`` (the folder ``path`` first, then
    lm-eval's built-in ones), requests per engine call, the primary metric and filter
    per task, the metadata every task receives (``task_args``), and whether prompts go
    through the tokenizer's chat template."""

    names: tuple[str, ...]
    path: str
    batch_size: int = 16
    primary: dict = field(default_factory=dict)
    task_args: dict = field(default_factory=dict)
    chat_template: bool = False

    @classmethod
    def of(cls, profile) -> Tasks:
        return cls(tuple(profile.tasks), str(profile.task_folder()), profile.eval_batch_size,
                   dict(profile.primary), dict(profile.task_args), profile.chat_template)


def run_guard_tasks(engine, tokenizer, spec: Tasks, progress=None) -> AccuracyResult:
    """Run the tasks of ``spec`` through ``engine`` (see :class:`Tasks`)."""
    return collect(evaluate(make_lm(engine, tokenizer, spec, progress), spec), spec.primary)


def make_lm(engine, tokenizer, spec: Tasks, progress=None):
    """lm-eval's view of ``engine`` (:func:`patchgate.guard.lm_model.lm_class`)."""
    from .lm_model import lm_class

    return lm_class()(engine, tokenizer, spec.batch_size, progress)


def evaluate(lm, spec: Tasks) -> dict:
    """lm-eval's ``simple_evaluate`` of the tasks of ``spec`` through ``lm``: its result."""
    tasks, task_path = spec.names, spec.path
    from lm_eval import simple_evaluate

    from .tasks import manager_for, raise_for_data

    for name in ("lm-eval", "lm_eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    manager = manager_for(list(tasks), task_path, spec.task_args)
    try:
        # lm-eval's own per-task progress bars go nowhere; ours (``progress``) stays.
        with contextlib.redirect_stderr(io.StringIO()), _lean():
            return simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager,
                                   log_samples=True, apply_chat_template=spec.chat_template)
    except PatchgateError:
        raise
    except (ConnectionError, OSError) as e:
        raise_for_data(e, list(tasks), manager)
        raise PatchgateError(f"accuracy guard: lm-eval could not load the data of tasks "
                             f"{list(tasks)}: {type(e).__name__}: {e}",
                             hint="check the tasks' data files and the profile's task_args"
                             ) from e
    except (KeyError, ValueError, TypeError) as e:
        raise PatchgateError(f"accuracy guard: lm-eval could not run tasks {list(tasks)} "
                             f"from {task_path}: {type(e).__name__}: {e}",
                             hint="check the task YAML files and their data") from e


@contextlib.contextmanager
def _lean():
    """lm-eval without two per-run costs that no verdict reads, its results otherwise the
    same: the environment report (``add_env_info``: pip and nvidia-smi in subprocesses,
    about 0.5 s a run) and a fresh Jinja compile of every template for every item (about
    1 s for the 600 items of the default suite); here each template is compiled once per
    process. The sequential guard runs lm-eval once a look, so these were most of a
    look's cost on a small model. Restored on the way out. The swap is of module
    attributes, so one lm-eval run at a time holds it: a second thread waits."""
    import lm_eval.evaluator as evaluator
    import lm_eval.utils as utils

    with _LEAN_LOCK:
        saved = evaluator.add_env_info, utils.apply_template
        evaluator.add_env_info = lambda results: None
        utils.apply_template = _apply_template
        try:
            yield
        finally:
            evaluator.add_env_info, utils.apply_template = saved


_LEAN_LOCK = threading.Lock()


def _apply_template(template: str, doc: dict) -> str:
    return _compiled(template).render(**doc)


@functools.lru_cache(maxsize=4096)
def _compiled(template: str):
    import lm_eval.utils as utils

    return utils.env.from_string(template)


def collect(res: dict, primary: dict | None = None) -> AccuracyResult:
    """Per-item primary scores (and the other filters' and metrics' values) out of
    lm-eval's ``simple_evaluate`` result."""
    tasks: dict[str, TaskResult] = {}
    parents = _parents(res.get("group_subtasks") or {})
    for task, samples in sorted(res.get("samples", {}).items()):
        if samples:
            config = (res.get("configs") or {}).get(task) or {}
            choice = _choice(task, parents, primary or {})
            better = dict((res.get("higher_is_better") or {}).get(task) or {})
            better.update({m["metric"]: m["higher_is_better"]
                           for m in config.get("metric_list") or []
                           if isinstance(m.get("metric"), str) and "higher_is_better" in m})
            tasks[task] = _task(task, samples, config, choice,
                                (res.get("results") or {}).get(task) or {}, better)
    if not tasks:
        raise PatchgateError("accuracy guard: lm-eval returned no samples",
                             hint="check the profile's tasks")
    return AccuracyResult(tasks=tasks, mean=sum(t["value"] for t in tasks.values()) / len(tasks))


def _parents(group_subtasks: dict) -> dict[str, str]:
    return {sub: group for group, subs in group_subtasks.items() for sub in subs}


def _choice(task: str, parents: dict[str, str], primary: dict) -> dict:
    """The profile's primary setting for ``task``, or for the nearest group holding it
    (marked ``group``: it applies where the task has that filter or metric)."""
    name, seen = task, set()
    while name is not None and name not in seen:
        if name in primary:
            return dict(primary[name], group=name) if name != task else primary[name]
        seen.add(name)
        name = parents.get(name)
    return {}


def _task(task: str, samples: list[dict], config: dict, choice: dict, agg: dict,
          better: dict | None = None) -> TaskResult:
    """One task's primary scores. The 99 % rule reads "higher is better": by default the
    first metric lm-eval marks so; a lower-is-better metric named in the profile is an
    error (a ratio of error rates or perplexities would pass what it should reject)."""
    better = better or {}
    filters = [f["name"] for f in config.get("filter_list") or []] or \
        list(dict.fromkeys(s.get("filter", NO_FILTER) for s in samples))
    metrics = [m["metric"] for m in config.get("metric_list") or []
               if isinstance(m.get("metric"), str)] or list(samples[0].get("metrics", []))
    flt = choice.get("filter", filters[0])
    upward = [m for m in metrics if better.get(m, True) is not False]
    metric = choice.get("metric", upward[0] if upward else (metrics[0] if metrics else None))
    if better.get(metric, True) is False:
        raise PatchgateError(
            f"accuracy guard: metric {metric} of task {task} is lower-is-better; the 99 % "
            "rule compares scores where higher is better",
            hint=f"judge the task on a higher-is-better metric ([primary.{task}] metric = "
            f"{', '.join(upward) or '...'}), or drop the task")
    if "group" in choice:  # a group's setting, where this task has it
        flt = flt if flt in filters else filters[0]
        metric = metric if metric in metrics else (metrics[0] if metrics else None)
    if flt not in filters:
        raise PatchgateError(f"accuracy guard: task {task} has no filter {flt!r}",
                             hint=f"its filters are: {', '.join(filters)} "
                             f"(set [primary.{task}] filter in the profile)")
    if metric not in metrics:
        raise PatchgateError(f"accuracy guard: task {task} has no metric {metric!r}",
                             hint=f"its metrics are: {', '.join(metrics)} "
                             f"(set [primary.{task}] metric in the profile)")
    mine = sorted((s for s in samples if s.get("filter", NO_FILTER) == flt),
                  key=lambda s: s["doc_id"])
    ids = _ids(mine)
    items = [_item(task, metric, i, s) for i, s in zip(ids, mine, strict=True)]
    others = [OtherScore(metric=m, filter=f, value=float(agg[f"{m},{f}"]))
              for f in filters for m in metrics
              if (m, f) != (metric, flt) and _is_number(agg.get(f"{m},{f}"))]
    docs = hashlib.sha256("\n".join(f"{i} {s.get('doc_hash', '')}"
                                    for i, s in zip(ids, mine, strict=True)).encode())
    return TaskResult(metric=metric, filter=flt,
                      value=sum(i["score"] for i in items) / len(items), samples=items,
                      docs=docs.hexdigest()[:16], others=others)


def _ids(samples: list[dict]) -> list[str]:
    """The data's own ``id`` field where every item has a distinct one, else lm-eval's
    doc id."""
    own = [s["doc"].get("id") if isinstance(s.get("doc"), dict) else None for s in samples]
    if all(isinstance(i, str | int) and not isinstance(i, bool) for i in own) and \
            len(set(map(str, own))) == len(own):
        return [str(i) for i in own]
    return [str(s["doc_id"]) for s in samples]


def _is_number(value) -> bool:
    value = value.item() if hasattr(value, "item") else value
    return isinstance(value, int | float) and math.isfinite(value)


def _item(task: str, metric: str, item_id: str, s: dict) -> ItemScore:
    value = s.get(metric)
    value = value.item() if hasattr(value, "item") else value
    if not (isinstance(value, int | float) and math.isfinite(value)):
        raise PatchgateError(
            f"accuracy guard: metric {metric} of task {task} is not a number per item "
            f"(item {item_id}: {str(value)[:80]}); lm-eval computes it over the whole task",
            hint=f"judge the task on a per-item metric: [primary.{task}] metric = ...")
    item = ItemScore(id=item_id, score=float(value))
    args = s.get("arguments") or []
    resps = s.get("resps") or []
    if args:
        item["prompt"] = str(args[0][0])
    if args and isinstance(args[0][1], str):  # multiple choice: (context, continuation)
        conts = [a[1] for a in args]
        lls = [r[0][0] if r and isinstance(r[0], list | tuple) else float("-inf")
               for r in resps]
        if metric == "acc_norm":
            lls = [ll / max(1, len(c.lstrip())) for ll, c in zip(lls, conts, strict=False)]
        if lls:
            item["output"] = conts[max(range(len(lls)), key=lls.__getitem__)].strip()
        target = s.get("target")
        if isinstance(target, int) and 0 <= target < len(conts):
            target = conts[target].strip()
        item["target"] = str(target)
    else:
        output = resps[0][0] if resps and resps[0] else ""
        item["output"] = str(output)
        filtered = (s.get("filtered_resps") or [None])[0]
        if filtered is not None and str(filtered) != str(output):
            item["answer"] = str(filtered)
        item["target"] = str(s.get("target"))
    return item
