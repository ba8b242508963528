"""Finding lm-eval tasks: the profile's task folder first, lm-eval's built-in tasks
when a name is not there, and a clear error when a task's data is not on this machine.

Built-in tasks (gsm8k, mmlu, arc_easy, ...) load their data from the Hugging Face hub
through ``datasets``; the gate runs offline (the Makefile sets HF_HUB_OFFLINE=1), so
their data must already be in the local cache or a local folder. Indexing lm-eval's
~15,000 built-in task files takes seconds, so it happens only when a name is missing
from the task folder.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ..errors import PatchgateError


def manager_for(tasks: list[str], task_path: str | None, metadata: dict):
    """An lm-eval ``TaskManager`` that knows every name in ``tasks``."""
    from lm_eval.tasks import TaskManager

    if task_path and not Path(task_path).is_dir():
        raise PatchgateError(f"accuracy guard: the task folder {task_path} does not exist",
                             hint="set task_path in the profile, or pass --task-path")
    include = [task_path] if task_path else None
    local = TaskManager(include_path=include, include_defaults=False, metadata=metadata)
    if all(_known(local, t) for t in tasks):
        return local
    full = TaskManager(include_path=include, include_defaults=True, metadata=metadata)
    unknown = [t for t in tasks if not _known(full, t)]
    if unknown:
        close = sorted({m for t in unknown for m in difflib.get_close_matches(t, full.all_tasks,
                                                                              n=3)})
        raise PatchgateError(
            f"accuracy guard: no lm-eval task or group named {', '.join(unknown)} (looked in "
            f"{task_path} and in lm-eval's built-in tasks)",
            hint=(f"did you mean {', '.join(close)}? " if close else "") +
            "`lm_eval ls tasks` lists the built-in ones; --task-path adds a folder of YAMLs")
    return full


def _known(manager, name: str) -> bool:
    return name in manager.all_tasks or (name.endswith((".yaml", ".yml")) and
                                         Path(name).is_file())


def datasets_of(manager, names: list[str]) -> list[tuple[str, str, str | None]]:
    """(task, dataset_path, dataset_name) of every leaf task under ``names``."""
    out, seen = [], set()
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if not isinstance(name, str) or name in seen:
            continue
        seen.add(name)
        entry = manager.task_index.get(name)
        if entry is None:
            continue
        cfg = entry.cfg or {}
        if cfg.get("dataset_path"):
            out.append((name, str(cfg["dataset_path"]), cfg.get("dataset_name")))
        sub = cfg.get("task")
        if isinstance(sub, list):
            todo += [s if isinstance(s, str) else (s or {}).get("task") for s in sub]
        if getattr(entry.kind, "name", "") == "TAG":
            todo += sorted(entry.tags)
    return out


def raise_for_data(error: Exception, names: list[str], manager) -> None:
    """Turn a failed dataset load into an error that names the dataset and says how to
    make it available; returns (and the caller re-raises) when it is something else."""
    text = str(error)
    found = datasets_of(manager, names)
    hit = [d for d in found if d[1] in text] or (found if "offline" in text.lower() or
                                                  "hub" in text.lower() else [])
    if not hit:
        return
    task, path, name = hit[0]
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or \
        os.environ.get("HF_DATASETS_OFFLINE") == "1"
    config = f", config {name!r}" if name else ""
    load = f"datasets.load_dataset({path!r}{', ' + repr(name) if name else ''})"
    raise PatchgateError(
        f"accuracy guard: task {task} needs the dataset {path}{config}, which is not on "
        f"this machine" + (" (HF_HUB_OFFLINE=1: nothing is downloaded)" if offline else "")
        + f": {type(error).__name__}: {text[:200]}",
        hint=f"fill the Hugging Face cache where there is network access: HF_HUB_OFFLINE=0 "
        f"python -c \"import datasets; {load}\" (and copy HF_HOME to this machine), or point "
        "the task at a local copy: a YAML under --task-path with dataset_path: json and "
        "dataset_kwargs: {data_files: ...}") from error
