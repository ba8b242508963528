"""Finding lm-eval tasks: the profile's task folder first, lm-eval's built-in tasks
when a name is not there, and a clear error when a task's data is not on this machine.

Built-in tasks (gsm8k, mmlu, arc_easy, ...) load their data from the Hugging Face hub
through ``datasets``; the gate runs offline (the Makefile sets HF_HUB_OFFLINE=1), so
their data must already be in the local cache or a local folder. Indexing lm-eval's
~15,000 built-in task files takes seconds, so it happens only when a name is missing
from the task folder.

:func:`check_tasks` is the guard's check before any engine starts. lm-eval's index
skips a YAML file it cannot read without a word (the task is then "unknown", or a
group builds the missing member as an empty inline task and fails late), so every
YAML of the task folder is read here first, with lm-eval's own loader, and an error
names the file; then each named task is built as lm-eval will build it (its data
loaded, its first item rendered: 0.02 s for the default suite), and a failure names
the task file that caused it.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import logging
import os
from pathlib import Path

from ..errors import PatchgateError

_IGNORE_DIRS = {"__pycache__", ".ipynb_checkpoints"}  # as lm-eval's index
_BUILDERS = {"json", "csv", "parquet", "text", "arrow"}  # datasets' local-file builders
_FIX = "fix the task file, or leave the task out of the profile's tasks"


def check_tasks(tasks: list[str], task_path: str | None, metadata: dict):
    """Everything about the tasks that can fail without an engine, in seconds (see the
    module's docstring); returns the ``TaskManager``."""
    if task_path and Path(task_path).is_dir():
        read_folder(Path(task_path))
    manager = manager_for(tasks, task_path, metadata)
    for name in ("lm-eval", "lm_eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    for name in tasks:
        _build(manager, name)
    return manager


def read_folder(folder: Path) -> dict[str, Path]:
    """{task or group name: its file} of every YAML under ``folder``, each read as lm-eval
    reads it (``!function`` tags, ``include``); a file that does not read, or a name
    that two files define, is an error naming the file(s)."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml  # the loader of lm-eval's index

    names: dict[str, Path] = {}
    for path in sorted(folder.glob("**/*.yaml"), key=lambda p: p.as_posix()):
        if _IGNORE_DIRS & set(path.relative_to(folder).parts):
            continue
        try:
            cfg = load_yaml(path, resolve_func=False, recursive=True)
        except yaml.YAMLError as e:
            raise PatchgateError(f"accuracy guard: task file {path} is not valid YAML: "
                                 f"{_yaml_problem(e)}",
                                 hint=f"{_FIX} (lm-eval would skip it without a word)") from e
        except (OSError, ValueError, TypeError) as e:
            raise PatchgateError(f"accuracy guard: task file {path} cannot be read as a task: "
                                 f"{type(e).__name__}: {e}",
                                 hint="a task file is a YAML mapping with task: or group: "
                                 f"(and its include: files must exist); {_FIX}") from e
        name = cfg.get("group") if "group" in cfg and "class" not in cfg else cfg.get("task")
        if not isinstance(name, str):
            continue  # no task or group of its own (a template others include)
        if name in names:
            raise PatchgateError(f"accuracy guard: task files {names[name]} and {path} both "
                                 f"define {name!r}; lm-eval would use one and skip the other",
                                 hint="rename the task in one of them, or remove one")
        names[name] = path
    return names


def _yaml_problem(e) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    what = " ".join(x for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
    return where + (what or str(e).splitlines()[0])


def _build(manager, name: str) -> None:
    """Build ``name`` as lm-eval will (its data loaded, its first item rendered); an
    error names the task file that failed and says what is wrong."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            manager.load([name])
    except PatchgateError:
        raise
    except Exception as e:  # noqa: BLE001 - anything lm-eval raises here is the file's
        if isinstance(e, ConnectionError | OSError):
            raise_for_data(e, [name], manager)
        task, path, what = _culprit(manager, name, e)
        data = isinstance(e, OSError) and "names no data" not in what
        raise PatchgateError(f"accuracy guard: task file {path} does not build (task "
                             f"{task}): {what}",
                             hint="put the data where the task file (or the profile's "
                             "[task_args]) says, or leave the task out of the profile's tasks"
                             if data else f"{_FIX} (lm-eval's task keys: its "
                             "docs/task_guide.md)") from e


def _culprit(manager, name: str, error: Exception) -> tuple[str, Path | str, str]:
    """(task, its file, what is wrong): a member a group names that no file defines, else
    the first task under ``name`` that does not build alone, else ``name`` itself."""
    index = manager.task_index
    for group, members in _groups(index, name):
        missing = [m for m in members if isinstance(m, str) and m not in index]
        if missing:
            return group, index[group].yaml_path, \
                f"the group names {', '.join(missing)}, which no task file defines"
    for task in _leaves(index, name):
        if task == name:
            break
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                manager.load([task])
        except Exception as e:  # noqa: BLE001
            return task, index[task].yaml_path or "(no file)", _what(index[task].cfg, e)
    entry = index.get(name)
    return name, (entry.yaml_path if entry and entry.yaml_path else name), \
        _what(entry.cfg if entry else None, error)


def _what(cfg: dict | None, error: Exception) -> str:
    """What is wrong, in the task file's terms where lm-eval's error does not say it."""
    cfg = cfg or {}
    if not any(k in cfg for k in ("dataset_path", "custom_dataset", "class", "group")):
        return "it names no data: set dataset_path (a hub dataset, or json with " \
            "dataset_kwargs: {data_files: ...}) or custom_dataset: !function ..."
    splits = {cfg.get(k): k for k in ("test_split", "validation_split", "training_split")}
    if isinstance(error, KeyError) and error.args and error.args[0] in splits:
        return f"the data has no split {error.args[0]!r} ({splits[error.args[0]]})"
    return f"{type(error).__name__}: {str(error)[:300]}"


def _groups(index, name: str) -> list[tuple[str, list]]:
    """(group, its members) of every group at or under ``name``."""
    return [(n, index[n].cfg.get("task") or []) for n in _walk(index, name)
            if getattr(index[n].kind, "name", "") == "GROUP" and index[n].cfg]


def _leaves(index, name: str) -> list[str]:
    """Every task at or under ``name`` that is not a group or tag."""
    return [n for n in _walk(index, name) if getattr(index[n].kind, "name", "") in
            ("TASK", "PY_TASK")]


def _walk(index, name: str) -> list[str]:
    out, todo = [], [name]
    while todo:
        n = todo.pop(0)
        if not isinstance(n, str) or n in out or n not in index:
            continue
        out.append(n)
        entry = index[n]
        sub = (entry.cfg or {}).get("task")
        if isinstance(sub, list):
            todo += [s if isinstance(s, str) else (s or {}).get("task") for s in sub]
        if getattr(entry.kind, "name", "") == "TAG":
            todo += sorted(entry.tags)
    return out


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
    index = manager.task_index
    out = []
    for name in dict.fromkeys(n for top in names for n in _walk(index, top)):
        cfg = index[name].cfg or {}
        if cfg.get("dataset_path"):
            out.append((name, str(cfg["dataset_path"]), cfg.get("dataset_name")))
    return out


def raise_for_data(error: Exception, names: list[str], manager) -> None:
    """Turn a failed dataset load into an error that names the dataset and says how to
    make it available; returns (and the caller re-raises) when it is something else."""
    text = str(error)
    found = datasets_of(manager, names)
    found = [d for d in found if d[1] not in _BUILDERS]  # local files: not a hub dataset
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
