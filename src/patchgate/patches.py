'''Model patches: discover, validate and apply the optimizations in ``model_patches/``.

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
import importlib.util
import inspect
import json
import re
import sys
import textwrap
import traceback
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchgate.errors import PatchgateError

KNOWN_ENGINES = ("transformers", "sglang")

NAME_PATTERN = re.compile(r"^(\d{4})-[a-z0-9][a-z0-9-]*\.py$")
_IGNORED_NAMES = frozenset({"__init__.py", "README.md"})
_MODULE_PREFIX = "patchgate_patch_"


@dataclass(frozen=True)
class Patch:
    """One validated patch file; identity is its name and the hash of its bytes."""

    path: Path
    name: str  # the file name, e.g. "0001-fuse-add-rmsnorm.py"
    order: int  # NNNN
    title: str  # first line of the docstring
    description: str  # the rest of the docstring, dedented
    engines: tuple[str, ...]  # engines it applies to
    server_args: dict = field(hash=False)  # engine settings it changes (str keys)
    has_apply: bool
    sha256: str  # hex digest of the file's bytes

    def applies_to(self, engine: str) -> bool:
        return engine in self.engines

    def record(self) -> dict:
        """The patch as stored in results and the change log (JSON-ready)."""
        return {
            "name": self.name,
            "title": self.title,
            "sha256": self.sha256,
            "engines": list(self.engines),
            "server_args": dict(self.server_args),
        }


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


def load_module(patch: Patch) -> types.ModuleType:
    """Import the patch file afresh (for use in this process); it must be unchanged."""
    source = _read(patch.path)
    if hashlib.sha256(source).hexdigest() != patch.sha256:
        raise PatchgateError(
            f"patch {patch.path}: the file changed after it was discovered",
            hint="leave model_patches/ alone while a run is in progress and start again",
        )
    return _import(patch.path, patch.order, source)


def apply_patches(model: object, patches: Sequence[Patch], engine: str) -> object:
    """Run ``apply(model)`` of each patch for ``engine``, in order; returns the final model."""
    _check_engine(engine)
    for patch in patches:
        if not (patch.has_apply and patch.applies_to(engine)):
            continue
        module = load_module(patch)
        try:
            result = module.apply(model)
        except Exception as exc:
            raise PatchgateError(
                f"patch {patch.name}: apply() raised {type(exc).__name__}: {exc}",
                hint=f"fix the patch or move it out of {patch.path.parent}",
            ) from exc
        if result is not None:
            if not _is_module(result):
                raise PatchgateError(
                    f"patch {patch.name}: apply() returned {type(result).__name__}, not a "
                    "model",
                    hint="change the model in place and return None, or return the new "
                         "model (a torch.nn.Module)")
            model = result
    return model


def _is_module(obj: object) -> bool:
    try:
        import torch
    except ImportError:  # no torch here: any object with a forward will do
        return callable(getattr(obj, "forward", None))
    return isinstance(obj, torch.nn.Module)


def merged_server_args(patches: Sequence[Patch], engine: str) -> dict:
    """SERVER_ARGS of the patches for ``engine``, merged in order; conflicts are errors."""
    _check_engine(engine)
    merged: dict = {}
    set_by: dict[str, Patch] = {}
    for patch in patches:
        if not patch.applies_to(engine):
            continue
        for key, value in patch.server_args.items():
            if key in merged and merged[key] != value:
                first = set_by[key]
                raise PatchgateError(
                    f"patches {first.name} and {patch.name} set server arg {key!r} to "
                    f"different values ({merged[key]!r} and {value!r})",
                    hint=f"make them agree, or drop {key!r} from one of them "
                    f"in {patch.path.parent}",
                )
            merged[key] = value
            set_by.setdefault(key, patch)
    return merged


def skipped(patches: Sequence[Patch], engine: str) -> list[Patch]:
    """The patches that do not apply to ``engine`` (their ENGINES leave it out)."""
    _check_engine(engine)
    return [patch for patch in patches if not patch.applies_to(engine)]


def content_key(patches: Sequence[Patch]) -> str:
    """sha256 over the ordered (name, sha256) pairs: identifies a patch set."""
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(f"{patch.name}\0{patch.sha256}\n".encode())
    return digest.hexdigest()


# --- validation -------------------------------------------------------------------------


def _ignored(name: str) -> bool:
    return name in _IGNORED_NAMES or name.startswith(("_", "."))


def _validate(path: Path, order: int) -> Patch:
    source = _read(path)
    module = _import(path, order, source)
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


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PatchgateError(
            f"patch {path}: cannot be read: {exc.strerror or exc}",
            hint="check that the file exists and is readable",
        ) from exc


def _import(path: Path, order: int, source: bytes) -> types.ModuleType:
    """Run ``source`` as a module named after the patch; never left in sys.modules."""
    hint = f"fix the patch or move it out of {path.parent}"
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise PatchgateError(
            f"patch {path}: {type(exc).__name__} at line {exc.lineno}: {exc.msg}", hint=hint
        ) from exc
    except ValueError as exc:  # e.g. null bytes in the source
        raise PatchgateError(f"patch {path}: cannot be compiled: {exc}", hint=hint) from exc
    name = f"{_MODULE_PREFIX}{order:04d}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module  # present while it runs: dataclasses, pickle look it up
    try:
        exec(code, vars(module))
    except (Exception, SystemExit) as exc:
        line = _line_in(exc, path)
        where = f" at line {line}" if line is not None else ""
        raise PatchgateError(
            f"patch {path}: import raised {type(exc).__name__}{where}: {exc}", hint=hint
        ) from exc
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module


def _line_in(exc: BaseException, path: Path) -> int | None:
    """The innermost line of ``path`` in the exception's traceback."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == str(path):
            return frame.lineno
    return None


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
    if "ENGINES" not in namespace:
        return KNOWN_ENGINES
    value = namespace["ENGINES"]
    known = ", ".join(KNOWN_ENGINES)
    hint = f"set ENGINES to a tuple of engine names ({known}), or remove it for every engine"
    if not isinstance(value, (tuple, list)) or not all(isinstance(e, str) for e in value):
        raise PatchgateError(
            f"patch {path}: ENGINES must be a tuple of strings, not {value!r}", hint=hint
        )
    if not value:
        raise PatchgateError(f"patch {path}: ENGINES is empty (applies to no engine)", hint=hint)
    unknown = [engine for engine in value if engine not in KNOWN_ENGINES]
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


def _check_engine(engine: str) -> None:
    if engine not in KNOWN_ENGINES:
        raise PatchgateError(
            f"unknown engine {engine!r}; known engines: {', '.join(KNOWN_ENGINES)}",
            hint="set the profile's engine to one of them",
        )
