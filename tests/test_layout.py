"""The library's shape, held as tests: modules of one concern (at most 400 lines, the
gate at most 200), small signatures (at most 6 parameters), every registered kind
loadable and shaped like its protocol, and one reader for the verdict document."""

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


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_function_takes_more_than_six_parameters(path):
    tree = ast.parse(path.read_text())
    wide = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            if names[:1] in (["self"], ["cls"]):
                names = names[1:]
            if len(names) > 6:
                wide.append(f"{node.name} ({len(names)})")
    assert not wide, f"pass a small dataclass instead: {wide}"


PROTOCOLS = {"engine": ("name", "ready", "generate", "generate_until", "loglikelihood",
                        "timed_generate", "profile_generate", "synchronize", "close"),
             "scenarios": ("name", "stores", "check", "scenarios", "measure"),
             "guard": ("name", "alone", "check", "evaluate", "one")}


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
