"""The library's shape, held as tests: modules of one concern (at most 400 lines, the
gate at most 200), small signatures (at most 6 positional parameters; keyword-only ones
are free, and so is no dataclass of many fields built by position), every registered
kind loadable and shaped like its protocol, and one reader for the verdict document."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from patchgate import registry
from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.verdict import document

SRC = Path(__file__).resolve().parent.parent / "src" / "patchgate"
MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path):
    limit = 200 if path.name == "gate.py" and path.parent == SRC else 400
    assert len(path.read_text().splitlines()) <= limit


def positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters a call may pass by position (``self`` and ``cls`` not counted;
    keyword-only ones are named at every call, so they cost a reader nothing)."""
    names = [x.arg for x in node.args.posonlyargs + node.args.args]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_function_takes_more_than_six_positional_parameters(path):
    tree = ast.parse(path.read_text())
    wide = [f"{node.name} ({len(positional(node))})" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and len(positional(node)) > 6]
    assert not wide, f"make the rest keyword-only, or pass a small dataclass: {wide}"


def _dataclass(node: ast.ClassDef) -> ast.expr | None:
    for d in node.decorator_list:
        name = d.func if isinstance(d, ast.Call) else d
        if getattr(name, "id", getattr(name, "attr", None)) == "dataclass":
            return d
    return None


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_dataclass_of_more_than_six_fields_is_built_by_position(path):
    """A dataclass of many fields is keyword-only (``kw_only=True``), or no caller in the
    package builds it by position: ``Run(a, b, c, d, e, f, g, h, i, j)`` says nothing."""
    trees = {p: ast.parse(p.read_text()) for p in MODULES}
    wide = []
    for node in ast.walk(trees[path]):
        d = node if isinstance(node, ast.ClassDef) else None
        if d is None or _dataclass(d) is None:
            continue
        deco = _dataclass(d)
        if isinstance(deco, ast.Call) and any(k.arg == "kw_only" for k in deco.keywords):
            continue
        for tree in trees.values():
            for call in ast.walk(tree):
                if isinstance(call, ast.Call) and getattr(call.func, "id",
                                                          getattr(call.func, "attr", None)) \
                        == d.name and len(call.args) > 6:
                    wide.append(f"{d.name} ({len(call.args)} positional)")
    assert not wide, f"make it kw_only=True and name the fields: {sorted(set(wide))}"


PROTOCOLS = {"engine": ("name", "ready", "generate", "generate_until", "loglikelihood",
                        "timed_generate", "profile_generate", "synchronize", "close"),
             "scenarios": ("name", "stores", "check", "scenarios", "measure"),
             "guard": ("name", "judges_alone", "check", "evaluate", "result_of")}


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, table in registry.KINDS.items()
                                            for n in table])
def test_every_registered_kind_loads_and_has_its_protocols_verbs(kind, name):
    impl = registry.load(kind, name)
    missing = [verb for verb in PROTOCOLS[kind] if not hasattr(impl, verb)]
    assert not missing
    assert impl.name == name


def test_an_unknown_kind_is_an_error_that_lists_the_known_ones():
    with pytest.raises(PatchgateError, match="unknown guard 'bleu'") as e:
        registry.load("guard", "bleu")
    assert "lm_eval" in e.value.hint


def test_a_verdict_of_another_schema_version_is_refused_by_every_reader(tmp_path, capsys):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"schema_version": 999, "verdict": "accepted", "reasons": [],
                                "scenarios": []}))
    for argv in (["report", str(path)], ["table", str(path)],
                 ["plot", "--verdict", str(path), "--baselines", str(tmp_path),
                  "--out", str(tmp_path / "t.png")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "schema_version 999" in err and "upgrade patchgate" in err
    with pytest.raises(PatchgateError, match="schema_version 999"):
        document.load(path)


def test_older_verdicts_still_load(root):
    v1 = document.load(root / "tests" / "golden" / "verdict_v1.json")
    assert v1["schema_version"] == 1
