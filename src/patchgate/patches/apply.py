"""Running patches where the model lives: import a patch file afresh, call ``apply``.

Only the engine processes call this (the transformers worker, SGLang's worker through
its hook). Each import runs the file's own bytes (no bytecode cache) under a private
module name that is removed from ``sys.modules`` afterwards, and refuses a file whose
bytes changed since the patch was discovered.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
import types
from collections.abc import Sequence
from pathlib import Path

from ..errors import PatchgateError
from .patch import Patch, check_engine

MODULE_PREFIX = "patchgate_patch_"


def load_module(patch: Patch) -> types.ModuleType:
    """Import the patch file afresh (for use in this process); it must be unchanged."""
    source = read(patch.path)
    if hashlib.sha256(source).hexdigest() != patch.sha256:
        raise PatchgateError(
            f"patch {patch.path}: the file changed after it was discovered",
            hint="leave model_patches/ alone while a run is in progress and start again",
        )
    return import_source(patch.path, patch.order, source)


def apply_patches(model: object, patches: Sequence[Patch], engine: str,
                  on_patch=None) -> object:
    """Run ``apply(model)`` of each patch for ``engine``, in order; returns the final model.
    ``on_patch(name)`` (optional) is told before each patch is imported and applied."""
    check_engine(engine)
    for patch in patches:
        if not (patch.has_apply and patch.applies_to(engine)):
            continue
        if on_patch is not None:
            on_patch(patch.name)
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


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PatchgateError(
            f"patch {path}: cannot be read: {exc.strerror or exc}",
            hint="check that the file exists and is readable",
        ) from exc


def import_source(path: Path, order: int, source: bytes) -> types.ModuleType:
    """Run ``source`` as a module named after the patch; never left in sys.modules. The
    bytes are the ones discovery parsed (``load_module`` checks their sha256), so they
    compile."""
    hint = f"fix the patch or move it out of {path.parent}"
    code = compile(source, str(path), "exec", dont_inherit=True)
    name = f"{MODULE_PREFIX}{order:04d}"
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
