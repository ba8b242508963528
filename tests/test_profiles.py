"""Profiles as files: the built-in TOML files reproduce the profiles that were Python
literals (frozen below), and broken files give errors that name the file and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.profile import Lengths, Profile, Thresholds, get_profile
from patchgate.profile import load as profiles

FIX = Path(__file__).parent / "fixtures" / "profiles"
GPU = Lengths(prefill_input=2048, prefill_output=1, decode_input=128, decode_output=256)

# The built-in profiles as src/patchgate/config.py defined them before they became
# files (commit 17038b0), frozen here: the TOML files must give exactly these.
FROZEN = {p.name: p for p in (
    Profile(name="default",
            description="embedded default MiniCPM on CPU through transformers (runs anywhere)",
            model="models/default", engine="transformers",
            lengths=Lengths(prefill_input=256, prefill_output=1, decode_input=16,
                            decode_output=32),
            rounds=10),
    Profile(name="h200-default",
            description="embedded default MiniCPM on one H200 through SGLang",
            model="models/default", engine="sglang", device="cuda", dtype="bfloat16",
            lengths=GPU, engine_args={"disable_prefill_cuda_graph": True}, rounds=30,
            thresholds=Thresholds(latency=0.05), eval_batch_size=64),
    Profile(name="h200-minicpm8b-dummy",
            description="MiniCPM4-8B-shaped model with random weights on one H200 (SGLang); "
            "the guard compares greedy tokens with the reference",
            model="models/minicpm4-8b-dummy", engine="sglang", device="cuda",
            dtype="bfloat16", lengths=GPU, engine_args={"load_format": "dummy"}, rounds=10,
            thresholds=Thresholds(latency=0.02), guard="token_agreement"),
    Profile(name="h200-minicpm8b",
            description="the default MiniCPM grown, function-preserving, to the MiniCPM4-8B "
            "shape on one H200 (SGLang): 8B kernels, the default model's answers",
            model="models/default", grow="minicpm4-8b", engine="sglang", device="cuda",
            dtype="bfloat16", lengths=GPU, rounds=8, thresholds=Thresholds(latency=0.02),
            eval_batch_size=64, warmup_tokens=2, confirm_rounds=6, confirm_looks=1,
            confirm_strongest=True, repeats={"prefill_b1": 10, "prefill_b8": 4},
            engine_args={"chunked_prefill_size": 8192,
                         "cuda_graph_bs_prefill": [128, 1024, 2048, 8192]}),
    Profile(name="target-template",
            description="template for the real target (MiniCPM-SALA or any model path) on "
            "your own GPU runner; copy and set model",
            model="/path/to/MiniCPM-SALA", engine="sglang", device="cuda", dtype="bfloat16",
            lengths=Lengths(prefill_input=4096, prefill_output=1, decode_input=128,
                            decode_output=512),
            rounds=10, thresholds=Thresholds(latency=0.02)),
)}


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_builtin_files_reproduce_the_frozen_profiles_field_by_field(name):
    loaded, frozen = get_profile(name), FROZEN[name]
    for f in dataclasses.fields(Profile):
        assert getattr(loaded, f.name) == getattr(frozen, f.name), f.name
        assert type(getattr(loaded, f.name)) is type(getattr(frozen, f.name)), f.name


def test_every_builtin_profile_is_frozen_or_new_and_valid():
    names = {p.stem for p in profiles.available()}
    assert all(get_profile(n).name == n for n in names)
    assert set(FROZEN) <= names
    assert names - set(FROZEN) <= {"minicpm-sala"}


def test_a_profile_file_loads_by_path_with_its_overrides():
    p = get_profile(str(FIX / "my-model.toml"))
    assert p.name == "my-model"  # from the file name
    assert p.engine == "sglang" and p.model == "org/my-model"
    assert p.lengths == Lengths(prefill_input=1024, prefill_output=1, decode_input=64,
                                decode_output=128)
    assert p.thresholds == Thresholds(latency=0.03)  # the other thresholds keep defaults
    assert p.engine_args == {"chunked_prefill_size": 8192, "kv_cache_dtype": "fp8_e4m3"}
    assert p.tasks == ("gsm8k", "arc_easy") and isinstance(p.tasks, tuple)
    assert p.primary == {"gsm8k": {"metric": "exact_match", "filter": "flexible-extract"}}
    assert p.call_timeout_s == 900.0 and isinstance(p.call_timeout_s, float)
    assert p.rounds == Profile.__dataclass_fields__["rounds"].default  # not in the file


def write(tmp_path: Path, text: str, name: str = "p.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BASE = '''description = "x"
model = "models/default"
engine = "transformers"
[lengths]
prefill_input = 8
prefill_output = 1
decode_input = 4
decode_output = 4
'''


@pytest.mark.parametrize("text, where, hint", [
    ("roundz = 3\n" + BASE, "roundz is not a profile key", "rounds"),
    ("rounds = 'ten'\n" + BASE, "rounds must be an integer, got 'ten' (a string)", "integer"),
    ("rounds = true\n" + BASE, "rounds must be an integer, got True", "integer"),
    (BASE.replace('model = "models/default"\n', ""), "model is missing", "model, engine"),
    (BASE.replace("engine = \"transformers\"", "engine = \"vllm\""), "engine = 'vllm' is not "
     "allowed", "transformers, sglang"),
    (BASE.replace("decode_output = 4", "decode_output = 4\nprefil_input = 3"),
     "lengths.prefil_input is not a profile key", "prefill_input"),
    (BASE.replace("decode_output = 4\n", ""), "lengths.decode_output is missing",
     "decode_output"),
    ("tasks = 'gsm8k'\n" + BASE, "tasks must be an array of strings", "tasks = ["),
    (BASE + "[thresholds]\nlatency = '2%'\n", "thresholds.latency must be a number", "number"),
    (BASE + "[primary.gsm8k]\nmetrc = 'acc'\n", "primary.gsm8k.metrc is not a key",
     "metric, filter"),
    ("device = 'gpu'\n" + BASE, "device = 'gpu' is not a device", "cuda"),
    ("name = 'other'\n" + BASE, None, None),
])
def test_broken_profiles_name_the_file_the_key_and_what_is_allowed(tmp_path, text, where,
                                                                   hint):
    path = write(tmp_path, text)
    if where is None:  # a file loaded by path may name itself
        assert get_profile(path).name == "other"
        return
    with pytest.raises(PatchgateError) as e:
        get_profile(path)
    assert e.value.message.startswith(path), e.value.message
    assert where in e.value.message
    assert hint in e.value.hint or hint in e.value.message


def test_not_toml_and_missing_files(tmp_path):
    with pytest.raises(PatchgateError, match="not valid TOML"):
        get_profile(write(tmp_path, "model = \n"))
    with pytest.raises(PatchgateError, match="does not exist"):
        get_profile(str(tmp_path / "nope.toml"))


def test_a_file_in_profiles_must_carry_its_own_name(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "a.toml").write_text("name = 'b'\n" + BASE)
    with pytest.raises(PatchgateError, match="name is 'b' but the file is profiles/a.toml"):
        profiles.get_profile("a", root=tmp_path)
    with pytest.raises(PatchgateError, match="unknown profile 'c'") as e:
        profiles.get_profile("c", root=tmp_path)
    assert "a" in e.value.hint


def test_a_missing_model_folder_is_an_error_naming_the_profile(tmp_path):
    prof = get_profile(write(tmp_path, BASE.replace("models/default", "/no/such/model")))
    with pytest.raises(PatchgateError, match="model '/no/such/model' is not a folder"):
        profiles.check_model(prof, "p.toml")
    profiles.check_model(get_profile("default"), "default")  # the embedded model
    profiles.check_model(prof.with_overrides(model="openbmb/MiniCPM-SALA"), "p")  # a hub id


def test_profiles_command_lists_names_engines_and_descriptions(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name, p in FROZEN.items():
        line = next(ln for ln in out.splitlines() if ln.split()[0] == name)
        assert p.engine in line and p.description[:30] in line


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parent.parent / "docs" /
                                         "gpu-runs" / "profiles").glob("*.toml")),
                         ids=lambda p: p.name)
def test_the_gpu_runs_profile_files_load(path):
    prof = get_profile(str(path))
    assert prof.name == "h200-minicpm8b" and prof.engine == "sglang"
