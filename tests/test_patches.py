"""Tests of patch discovery, validation and application, on real files and a real module."""

from __future__ import annotations

import hashlib
import shutil
import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

from patchgate import registry
from patchgate.errors import PatchgateError
from patchgate.patches import Patch, content_key, discover, merged_server_args, skipped
from patchgate.patches.apply import apply_patches, load_module
from patchgate.patches.probe import probe

KNOWN_ENGINES = registry.names("engine")

FIXTURES = Path(__file__).parent / "fixtures" / "patches"


def tiny_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4))


def write_patch(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def patch_modules() -> list[str]:
    return [name for name in sys.modules if name.startswith("patchgate_patch_")]


# --- discovery ---------------------------------------------------------------------------


def test_discover_good_folder_reads_every_field():
    fp8, double = discover(FIXTURES / "good")

    assert fp8.name == "0001-fp8-kv-cache.py"
    assert fp8.path == FIXTURES / "good" / "0001-fp8-kv-cache.py"
    assert fp8.order == 1
    assert fp8.title == "Store the KV cache in FP8."
    assert fp8.description == "Halves KV-cache memory and bandwidth; SGLang only."
    assert fp8.engines == ("sglang",)
    assert fp8.server_args == {"kv_cache_dtype": "fp8_e4m3"}
    assert fp8.has_apply is False
    assert fp8.sha256 == hashlib.sha256(fp8.path.read_bytes()).hexdigest()

    assert double.name == "0002-double-weights.py"
    assert double.order == 2
    assert double.engines == KNOWN_ENGINES
    assert double.server_args == {}
    assert double.has_apply is True


def test_record_is_json_ready():
    fp8 = discover(FIXTURES / "good")[0]
    assert fp8.record() == {
        "name": "0001-fp8-kv-cache.py",
        "title": "Store the KV cache in FP8.",
        "sha256": fp8.sha256,
        "engines": ["sglang"],
        "server_args": {"kv_cache_dtype": "fp8_e4m3"},
    }


def test_empty_folder_has_no_patches():
    assert discover(FIXTURES / "empty") == []


def test_missing_folder_is_named(tmp_path):
    missing = tmp_path / "no_such_patches"
    with pytest.raises(PatchgateError, match="does not exist") as caught:
        discover(missing)
    assert str(missing) in caught.value.message
    assert caught.value.hint


def test_patches_apply_in_number_order_not_file_order(tmp_path):
    for name in ("0010-later.py", "0002-earlier.py", "0100-last.py"):
        write_patch(tmp_path, name, f'"""{name}"""\nSERVER_ARGS = {{"{name}": 1}}\n')
    assert [patch.order for patch in discover(tmp_path)] == [2, 10, 100]


def test_discover_leaves_nothing_in_sys_modules():
    before = patch_modules()
    good = discover(FIXTURES / "good")
    replace = discover(FIXTURES / "replace")
    assert patch_modules() == before == []
    # same numbers in two folders: each discovery sees its own files
    assert good[0].title == "Store the KV cache in FP8."
    assert replace[0].title == "Wrap the model in a Sequential that ends with a ReLU."


def test_load_module_imports_a_fresh_copy():
    double = discover(FIXTURES / "good")[1]
    first, second = load_module(double), load_module(double)
    assert first is not second
    assert callable(first.apply)
    assert patch_modules() == []


def test_load_module_refuses_a_file_changed_since_discovery(tmp_path):
    path = write_patch(tmp_path, "0001-x.py", '"""X."""\nSERVER_ARGS = {"a": 1}\n')
    (patch,) = discover(tmp_path)
    path.write_text('"""X."""\nSERVER_ARGS = {"a": 2}\n')
    with pytest.raises(PatchgateError, match="changed after it was discovered"):
        load_module(patch)


# --- hashes ------------------------------------------------------------------------------


def test_hash_and_content_key_follow_the_file_bytes(tmp_path):
    path = write_patch(tmp_path, "0001-x.py", '"""X."""\nSERVER_ARGS = {"a": 1}\n')
    before = discover(tmp_path)
    again = discover(tmp_path)
    path.write_text('"""X."""\nSERVER_ARGS = {"a": 2}\n')  # same size, same name
    after = discover(tmp_path)

    assert before[0].sha256 == again[0].sha256
    assert content_key(before) == content_key(again)
    assert before[0].sha256 != after[0].sha256
    assert content_key(before) != content_key(after)
    assert after[0].server_args == {"a": 2}  # the new bytes ran, not a cached copy


def test_content_key_depends_on_names_and_order():
    good = discover(FIXTURES / "good")
    assert content_key(good) != content_key(list(reversed(good)))
    assert content_key(good) != content_key(good[:1])
    assert content_key([]) == hashlib.sha256().hexdigest()
    assert len(content_key(good)) == 64


# --- engines and server args -------------------------------------------------------------


def test_engine_filter():
    fp8, double = discover(FIXTURES / "good")
    assert fp8.applies_to("sglang") and not fp8.applies_to("transformers")
    assert skipped([fp8, double], "transformers") == [fp8]
    assert skipped([fp8, double], "sglang") == []


def test_merged_server_args_only_for_the_engine():
    good = discover(FIXTURES / "good")
    assert merged_server_args(good, "sglang") == {"kv_cache_dtype": "fp8_e4m3"}
    assert merged_server_args(good, "transformers") == {}


def test_same_server_arg_with_same_value_is_fine(tmp_path):
    for name in ("0001-a.py", "0002-b.py"):
        write_patch(tmp_path, name, '"""A."""\nSERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}\n')
    assert merged_server_args(discover(tmp_path), "sglang") == {"kv_cache_dtype": "fp8_e4m3"}


def test_conflicting_server_args_name_both_files():
    patches = discover(FIXTURES / "conflicting_args")
    with pytest.raises(PatchgateError) as caught:
        merged_server_args(patches, "sglang")
    message = caught.value.message
    assert "0001-fp8-kv-cache.py" in message and "0002-fp8-e5m2.py" in message
    assert "'kv_cache_dtype'" in message and "attention_backend" not in message


def test_unknown_engine_is_an_error():
    with pytest.raises(PatchgateError, match="transformers, sglang"):
        skipped(discover(FIXTURES / "good"), "vllm")


# --- applying to a real module -----------------------------------------------------------


def test_apply_changes_the_model_in_place():
    model = tiny_model()
    weight = model[0].weight.detach().clone()
    patched = apply_patches(model, discover(FIXTURES / "good"), "transformers")
    assert patched is model
    torch.testing.assert_close(model[0].weight, weight * 2)


def test_apply_skips_patches_for_other_engines(tmp_path):
    shutil.copy(FIXTURES / "good" / "0002-double-weights.py", tmp_path)
    text = (tmp_path / "0002-double-weights.py").read_text()
    write_patch(tmp_path, "0002-double-weights.py", text + '\nENGINES = ("sglang",)\n')
    model = tiny_model()
    weight = model[0].weight.detach().clone()
    apply_patches(model, discover(tmp_path), "transformers")
    torch.testing.assert_close(model[0].weight, weight)


def test_returned_model_replaces_the_old_one_for_later_patches():
    model = tiny_model()
    patched = apply_patches(model, discover(FIXTURES / "replace"), "transformers")
    assert isinstance(patched, nn.Sequential) and isinstance(patched[-1], nn.ReLU)
    assert patched[0] is model
    assert torch.count_nonzero(model[0].bias) == 0
    out = patched(torch.randn(3, 4))
    assert out.shape == (3, 4) and bool((out >= 0).all())


def test_apply_error_names_the_patch_and_folder():
    patches = discover(FIXTURES / "apply_raises")
    with pytest.raises(PatchgateError) as caught:
        apply_patches(tiny_model(), patches, "transformers")
    assert caught.value.message == (
        "patch 0002-boom.py: apply() raised RuntimeError: no RMSNorm to fuse"
    )
    assert caught.value.hint == f"fix the patch or move it out of {FIXTURES / 'apply_raises'}"


# --- validation errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "file_name", "cause"),
    [
        ("syntax_error", "0001-broken.py", "SyntaxError at line 4"),
        ("no_docstring", "0001-no-docstring.py", "no module docstring"),
        ("empty_title", "0001-empty-title.py", "first line is empty"),
        ("bad_engine", "0001-vllm-only.py", "unknown engine 'vllm'"),
        ("bad_name", "fuse_rmsnorm.py", "expected NNNN-slug.py"),
        ("duplicate_order", "0003-second.py", "same number 0003"),
        ("apply_not_callable", "0001-apply-is-a-number.py", "apply must be a function, not int"),
        ("apply_bad_signature", "0001-apply-two-args.py", "exactly one positional argument"),
        ("does_nothing", "0001-empty-args.py", "no apply() and no SERVER_ARGS"),
    ],
)
def test_invalid_patch_folders(case, file_name, cause):
    with pytest.raises(PatchgateError) as caught:
        discover(FIXTURES / case)
    assert file_name in caught.value.message
    assert cause in caught.value.message
    assert caught.value.hint
    assert patch_modules() == []


def test_bad_engine_lists_the_known_engines():
    with pytest.raises(PatchgateError, match="known engines: transformers, sglang"):
        discover(FIXTURES / "bad_engine")


def test_duplicate_order_names_both_files():
    with pytest.raises(PatchgateError, match="0003-first.py .*0003-second.py"):
        discover(FIXTURES / "duplicate_order")


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        ('ENGINES = "sglang"\nSERVER_ARGS = {"a": 1}\n', "ENGINES must be a tuple of strings"),
        ('ENGINES = ("sglang", 1)\nSERVER_ARGS = {"a": 1}\n', "ENGINES must be a tuple"),
        ('ENGINES = ()\nSERVER_ARGS = {"a": 1}\n', "ENGINES is empty"),
        ('SERVER_ARGS = [("a", 1)]\n', "SERVER_ARGS must be a dict, not list"),
        ('SERVER_ARGS = {1: "a"}\n', "SERVER_ARGS key 1 is not a string"),
        ('SERVER_ARGS = {"a": object()}\n', "SERVER_ARGS must be written as a literal dict"),
        ('SERVER_ARGS = {"a": {1, 2}}\n', "is not JSON data"),
        ('from config import ENGINES\nSERVER_ARGS = {"a": 1}\n', "ENGINES must be written as"),
        ('SERVER_ARGS = {"a": 1}\nSERVER_ARGS = {"a": 2}\n', "bound more than once"),
        ("import torch\napply = torch.compile\n", "apply must be a function, not bound"),
        ("def apply():\n    pass\n", "exactly one positional argument"),
        ("def apply(*, model):\n    pass\n", "exactly one positional argument"),
    ],
)
def test_invalid_patch_contents(tmp_path, body, cause):
    write_patch(tmp_path, "0001-x.py", '"""X."""\n' + body)
    with pytest.raises(PatchgateError) as caught:
        discover(tmp_path)
    assert "0001-x.py" in caught.value.message
    assert cause in caught.value.message


@pytest.mark.parametrize("name", ["1-x.py", "0001_x.py", "0001-Fuse.py", "00001-x.py", "0001-.py"])
def test_bad_file_names(tmp_path, name):
    write_patch(tmp_path, name, '"""X."""\nSERVER_ARGS = {"a": 1}\n')
    with pytest.raises(PatchgateError, match="expected NNNN-slug.py") as caught:
        discover(tmp_path)
    assert name in caught.value.message


def test_apply_with_optional_extras_and_dataclasses_are_accepted(tmp_path):
    write_patch(
        tmp_path,
        "0001-x.py",
        '"""X."""\nfrom __future__ import annotations\nimport dataclasses\n\n'
        "@dataclasses.dataclass\nclass Cfg:\n    scale: float = 2.0\n\n"
        "def apply(model, cfg=Cfg()):\n    model.scale = cfg.scale\n",
    )
    (patch,) = discover(tmp_path)
    assert isinstance(patch, Patch) and patch.has_apply
    assert apply_patches(types.SimpleNamespace(), [patch], "transformers").scale == 2.0


# --- the import probe (patch code runs in a throwaway process, never in the gate's) ------


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        ('raise ValueError("bad config")\n', "import raised ValueError at line 2: bad config"),
        ("import sys\nsys.exit(3)\n", "import raised SystemExit at line 3"),
        ("import os\nos._exit(0)\n", "importing it ended the process"),
        ("while True:\n    pass\n", "importing it did not return within 2 s"),
    ],
)
def test_the_probe_names_a_patch_whose_import_fails_exits_or_hangs(tmp_path, body, cause):
    write_patch(tmp_path, "0001-x.py", '"""X."""\n' + body + "def apply(model):\n    pass\n")
    patches = discover(tmp_path)  # parsing alone: nothing ran
    with pytest.raises(PatchgateError) as caught:
        probe(patches, timeout_s=2)
    assert "0001-x.py" in caught.value.message and cause in caught.value.message


def test_the_probe_names_a_missing_dependency():
    with pytest.raises(PatchgateError, match="ModuleNotFoundError at line 3"):
        probe(discover(FIXTURES / "import_error"), timeout_s=30)


def test_discovery_runs_no_patch_code(tmp_path):
    marker = tmp_path / "ran"
    write_patch(tmp_path, "0001-x.py", f'"""X."""\nopen({str(marker)!r}, "w").write("x")\n'
                "def apply(model):\n    pass\n")
    (patch,) = discover(tmp_path)
    assert patch.has_apply and not marker.exists()


def test_a_patch_that_writes_a_watched_file_at_import_is_named(tmp_path):
    stored = tmp_path / "baselines" / "current.json"
    stored.parent.mkdir()
    stored.write_text("{}")
    folder = tmp_path / "p"
    folder.mkdir()
    write_patch(folder, "0001-ok.py", '"""Ok."""\nSERVER_ARGS = {"a": 1}\n')
    write_patch(folder, "0002-evil.py", f'"""Evil."""\nopen({str(stored)!r}, "w").write("[]")\n'
                "def apply(model):\n    pass\n")
    with pytest.raises(PatchgateError, match="0002-evil.py: importing it changed .*current.json"):
        probe(discover(folder), timeout_s=30, watch=[tmp_path / "baselines"])


def test_the_probe_runs_in_a_scratch_folder(tmp_path):
    write_patch(tmp_path, "0001-x.py", '"""X."""\nopen("left-here", "w").write("x")\n'
                "def apply(model):\n    pass\n")
    probe(discover(tmp_path), timeout_s=30)
    assert not (Path.cwd() / "left-here").exists()
