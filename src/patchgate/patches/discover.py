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

:func:`discover` checks every patch **by parsing it** (its syntax tree), before it
returns: the docstring, ``ENGINES`` and ``SERVER_ARGS`` as literals, ``apply`` as a
function of one positional argument. No patch code runs in the gate's process: a
patch is code from a pull request, and the process that computes the verdict must not
run it. The files are imported only where the model lives (the engine processes) and,
before the engines start, once in a throwaway process with a time limit
(:mod:`.probe`), so an import that fails or hangs is named early.
'''

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
from pathlib import Path

from .. import registry
from ..errors import PatchgateError
from .apply import read
from .patch import Patch

NOT_RUN = object()  # a top-level name bound by something else than a literal

NAME_PATTERN = re.compile(r"^(\d{4})-[a-z0-9][a-z0-9-]*\.py$")
_IGNORED_NAMES = frozenset({"__init__.py", "README.md"})


def discover(folder: Path) -> list[Patch]:
    """Every patch in ``folder``, validated, in NNNN order. An empty folder gives []. The
    first problem is an error (:func:`survey` reports them all)."""
    patches, problems = survey(folder)
    if problems:
        raise problems[0]
    return patches


def survey(folder: Path) -> tuple[list[Patch], list[PatchgateError]]:
    """Every patch in ``folder`` that validates, in NNNN order, and one error for each
    file that does not (a bad name, a number taken twice, a file that fails to parse or
    validate): ``patchgate check`` reports them all in one run. A folder that does not
    exist is an error at once."""
    folder = Path(folder)
    if not folder.is_dir():
        if folder.exists():
            raise PatchgateError(f"--patches {folder} is a file, not a folder",
                                 hint=f"pass the folder that holds it: --patches {folder.parent}")
        raise PatchgateError(f"patch folder {folder} does not exist",
                             hint="create it (it may stay empty) or pass --patches DIR")
    numbered: dict[int, Path] = {}
    problems: list[PatchgateError] = []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix != ".py" or _ignored(path.name):
            continue
        match = NAME_PATTERN.match(path.name)
        if match is None:
            problems.append(PatchgateError(
                f"patch {path}: bad file name {path.name!r}; expected NNNN-slug.py "
                "(4 digits, a dash, lowercase letters, digits and dashes)",
                hint="rename it, e.g. 0001-fuse-add-rmsnorm.py, "
                "or start its name with _ to leave it out"))
            continue
        order = int(match.group(1))
        if order in numbered:
            problems.append(PatchgateError(
                f"patches {numbered[order]} and {path} have the same number {order:04d}",
                hint="give one of them another number; patches apply in NNNN order"))
            continue
        numbered[order] = path
    patches = []
    for order in sorted(numbered):
        try:
            patches.append(_validate(numbered[order], order))
        except PatchgateError as e:
            problems.append(e)
    return patches, problems


# --- validation -------------------------------------------------------------------------


def _ignored(name: str) -> bool:
    return name in _IGNORED_NAMES or name.startswith(("_", "."))


def _validate(path: Path, order: int) -> Patch:
    source = read(path)
    tree = _parse(path, source)
    title, description = _docstring(path, ast.get_docstring(tree, clean=False))
    names = _top_level(path, tree)
    engines = _engines(path, names)
    server_args = _server_args(path, names)
    has_apply = _check_apply(path, names)
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


def _parse(path: Path, source: bytes) -> ast.Module:
    hint = f"fix the patch or move it out of {path.parent}"
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise PatchgateError(
            f"patch {path}: {type(exc).__name__} at line {exc.lineno}: {exc.msg}", hint=hint
        ) from exc
    except ValueError as exc:  # e.g. null bytes in the source
        raise PatchgateError(f"patch {path}: cannot be compiled: {exc}", hint=hint) from exc


_READ = ("ENGINES", "SERVER_ARGS", "apply")


def _top_level(path: Path, tree: ast.Module) -> dict:
    """What the module binds at its top level to the names the gate reads: a literal's
    value, an ``ast.FunctionDef`` for ``def apply``, or :data:`NOT_RUN` (bound by
    something that would have to run: an import, a call, a loop...). A name bound
    twice is an error: which binding counts would depend on running the file."""
    found: dict = {}

    def bind(name: str, value, line: int) -> None:
        if name not in _READ:
            return
        if name in found:
            raise PatchgateError(
                f"patch {path}: {name} is bound more than once (again at line {line})",
                hint=f"define {name} once, at the top level of the file")
        found[name] = value

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(node.name, node if isinstance(node, ast.FunctionDef) else NOT_RUN,
                 node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _names(target):
                    bind(name, _literal(node.value) if isinstance(target, ast.Name)
                         else NOT_RUN, node.lineno)
        else:
            for sub in ast.walk(node):  # imports, loops, with, if, augmented assignments
                for name in _bound_names(sub):
                    bind(name, NOT_RUN, getattr(sub, "lineno", node.lineno))
    return found


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    return []


def _literal(node: ast.AST | None):
    if node is None:
        return NOT_RUN
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_RUN


def _not_literal(path: Path, name: str, what: str):
    raise PatchgateError(
        f"patch {path}: {name} must be written as a literal {what} (patchgate reads it "
        "without running the file)",
        hint=f"write {name} = ... with the value itself, not computed or imported")


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
    if value is NOT_RUN:
        _not_literal(path, "ENGINES", "tuple of engine names")
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
    if value is NOT_RUN:
        _not_literal(path, "SERVER_ARGS", "dict")
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
    """``def apply(model)`` at the top level, callable with the model as its one
    positional argument (extra parameters need defaults)."""
    if "apply" not in namespace:
        return False
    node = namespace["apply"]
    hint = "define `def apply(model):` taking the loaded model as its one argument"
    if not isinstance(node, ast.FunctionDef):
        what = ("bound by other code than a top-level def" if node is NOT_RUN
                else type(node).__name__)
        raise PatchgateError(f"patch {path}: apply must be a function, not {what}",
                             hint=hint)
    a = node.args
    positional = a.posonlyargs + a.args
    required = len(positional) - len(a.defaults)
    kw_required = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    if required > 1 or kw_required or not (positional or a.vararg):
        raise PatchgateError(
            f"patch {path}: apply({ast.unparse(a)}) must accept exactly one positional "
            "argument (the model)", hint=hint)
    return True
