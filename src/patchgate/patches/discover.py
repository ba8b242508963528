'''Model patches: discover and validate the optimizations in ``model_patches/``.

One optimization is one file, ``NNNN-slug.py``, applied in ``NNNN`` order::

    """Fuse the residual add into RMSNorm.            <- first line: the title

    Why and how, in a few lines.                      <- the rest: the description
    """
    ENGINES = ("transformers", "sglang")              # optional; default: every engine
    SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}      # optional engine settings it changes

    def apply(model):                                 # optional; may return a new model
        ...

A patch needs ``apply`` or a non-empty ``SERVER_ARGS``. In the folder, ``__init__.py``,
``README.md`` and names starting with ``_`` or ``.`` are ignored; any other ``*.py`` must
be named ``NNNN-slug.py``.

:func:`discover` imports and checks every patch before it returns, so a broken patch
stops a run before a model is loaded. Each import runs the file's own bytes (no
bytecode cache) under a private module name that is removed from ``sys.modules``
afterwards. Module-level code runs at every import (at discovery, and again where the
model lives): keep side effects inside ``apply``.
'''

from __future__ import annotations

import hashlib
import inspect
import json
import re
import textwrap
from pathlib import Path

from .. import registry
from ..errors import PatchgateError
from .apply import import_source, read
from .patch import Patch

NAME_PATTERN = re.compile(r"^(\d{4})-[a-z0-9][a-z0-9-]*\.py$")
_IGNORED_NAMES = frozenset({"__init__.py", "README.md"})


def discover(folder: Path) -> list[Patch]:
    """Every patch in ``folder``, validated, in NNNN order. An empty folder gives []."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise PatchgateError(
            f"patch folder {folder} {what}",
            hint="create it (it may stay empty) or pass --patches DIR",
        )
    numbered: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix != ".py" or _ignored(path.name):
            continue
        match = NAME_PATTERN.match(path.name)
        if match is None:
            raise PatchgateError(
                f"patch {path}: bad file name {path.name!r}; expected NNNN-slug.py "
                "(4 digits, a dash, lowercase letters, digits and dashes)",
                hint="rename it, e.g. 0001-fuse-add-rmsnorm.py, "
                "or start its name with _ to leave it out",
            )
        order = int(match.group(1))
        if order in numbered:
            raise PatchgateError(
                f"patches {numbered[order]} and {path} have the same number {order:04d}",
                hint="give one of them another number; patches apply in NNNN order",
            )
        numbered[order] = path
    return [_validate(numbered[order], order) for order in sorted(numbered)]


# --- validation -------------------------------------------------------------------------


def _ignored(name: str) -> bool:
    return name in _IGNORED_NAMES or name.startswith(("_", "."))


def _validate(path: Path, order: int) -> Patch:
    source = read(path)
    module = import_source(path, order, source)
    title, description = _docstring(path, module.__doc__)
    engines = _engines(path, vars(module))
    server_args = _server_args(path, vars(module))
    has_apply = _check_apply(path, vars(module))
    if not has_apply and not server_args:
        raise PatchgateError(
            f"patch {path}: does nothing (no apply() and no SERVER_ARGS)",
            hint="define apply(model) or a non-empty SERVER_ARGS dict, or delete the file",
        )
    return Patch(
        path=path,
        name=path.name,
        order=order,
        title=title,
        description=description,
        engines=engines,
        server_args=server_args,
        has_apply=has_apply,
        sha256=hashlib.sha256(source).hexdigest(),
    )


def _docstring(path: Path, doc: str | None) -> tuple[str, str]:
    example = 'e.g. """Fuse the residual add into RMSNorm."""'
    if not isinstance(doc, str) or not doc.strip():
        raise PatchgateError(
            f"patch {path}: no module docstring",
            hint=f"start the file with a docstring whose first line is the title, {example}",
        )
    lines = doc.splitlines()
    title = lines[0].strip()
    if not title:
        raise PatchgateError(
            f"patch {path}: the docstring's first line is empty; the title goes there",
            hint=f"put the title right after the opening quotes, {example}",
        )
    return title, textwrap.dedent("\n".join(lines[1:])).strip()


def _engines(path: Path, namespace: dict) -> tuple[str, ...]:
    known_engines = registry.names("engine")
    if "ENGINES" not in namespace:
        return known_engines
    value = namespace["ENGINES"]
    known = ", ".join(known_engines)
    hint = f"set ENGINES to a tuple of engine names ({known}), or remove it for every engine"
    if not isinstance(value, (tuple, list)) or not all(isinstance(e, str) for e in value):
        raise PatchgateError(
            f"patch {path}: ENGINES must be a tuple of strings, not {value!r}", hint=hint
        )
    if not value:
        raise PatchgateError(f"patch {path}: ENGINES is empty (applies to no engine)", hint=hint)
    unknown = [engine for engine in value if engine not in known_engines]
    if unknown:
        raise PatchgateError(
            f"patch {path}: unknown engine {unknown[0]!r} in ENGINES; known engines: {known}",
            hint=hint,
        )
    return tuple(dict.fromkeys(value))


def _server_args(path: Path, namespace: dict) -> dict:
    if "SERVER_ARGS" not in namespace:
        return {}
    value = namespace["SERVER_ARGS"]
    hint = 'set SERVER_ARGS to a dict of engine settings, e.g. {"kv_cache_dtype": "fp8_e4m3"}'
    if not isinstance(value, dict):
        raise PatchgateError(
            f"patch {path}: SERVER_ARGS must be a dict, not {type(value).__name__}", hint=hint
        )
    for key, item in value.items():
        if not isinstance(key, str):
            raise PatchgateError(
                f"patch {path}: SERVER_ARGS key {key!r} is not a string", hint=hint
            )
        try:
            json.dumps(item)
        except (TypeError, ValueError) as exc:
            raise PatchgateError(
                f"patch {path}: SERVER_ARGS[{key!r}] = {item!r} is not JSON data "
                "(results record it)",
                hint="use strings, numbers, booleans, None, lists or dicts of them",
            ) from exc
    return dict(value)


def _check_apply(path: Path, namespace: dict) -> bool:
    if "apply" not in namespace:
        return False
    apply = namespace["apply"]
    hint = "define `def apply(model):` taking the loaded model as its one argument"
    if not callable(apply):
        raise PatchgateError(
            f"patch {path}: apply must be a function, not {type(apply).__name__}", hint=hint
        )
    try:
        signature = inspect.signature(apply)
    except (TypeError, ValueError) as exc:
        raise PatchgateError(f"patch {path}: apply's signature cannot be read", hint=hint) from exc
    try:
        signature.bind(object())
    except TypeError as exc:
        raise PatchgateError(
            f"patch {path}: apply{signature} must accept exactly one positional argument "
            "(the model)",
            hint=hint,
        ) from exc
    return True
