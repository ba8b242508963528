"""The SGLang adapter's CPU-testable parts: settings mapping and the worker hook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgate.engines import sglang_hook
from patchgate.engines.sglang import FORCED, prefill_chunks, server_args
from patchgate.errors import PatchgateError
from patchgate.patches import discover
from patchgate.patches.apply import apply_patches
from patchgate.profile import get_profile

FIX = Path(__file__).parent / "fixtures"
KNOWN = {"kv_cache_dtype", "mem_fraction_static", "load_format", "dtype",
         "disable_prefill_cuda_graph", "disable_radix_cache", "skip_tokenizer_init"}


def write_patch(folder: Path, name: str, body: str):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(body)
    return discover(folder)


def test_forced_settings_and_patch_args_are_merged(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-fp8.py",
                          '"""FP8 KV."""\nENGINES = ("sglang",)\n'
                          'SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}\n')
    args = server_args(get_profile("h200-default"), patches, KNOWN, share=0.5)
    assert args["kv_cache_dtype"] == "fp8_e4m3"
    assert args["disable_radix_cache"] is True and args["skip_tokenizer_init"] is True
    assert args["disable_prefill_cuda_graph"] is True  # from the profile
    assert args["mem_fraction_static"] == pytest.approx(0.4)
    assert args["model_path"].endswith("models/default")
    assert FORCED.items() <= args.items()


def test_unknown_server_arg_names_the_patch_and_setting(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-typo.py",
                          '"""Typo."""\nSERVER_ARGS = {"kv_cache_dtyp": "fp8_e4m3"}\n')
    with pytest.raises(PatchgateError, match=r"0001-typo.py: SERVER_ARGS sets 'kv_cache_dtyp'"):
        server_args(get_profile("h200-default"), patches, KNOWN)


def test_radix_cache_cannot_be_turned_on(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-radix.py",
                          '"""Radix."""\nSERVER_ARGS = {"disable_radix_cache": False}\n')
    with pytest.raises(PatchgateError, match="0001-radix.py: SERVER_ARGS sets "
                                             "disable_radix_cache=False"):
        server_args(get_profile("h200-default"), patches, KNOWN)
    prof = get_profile("h200-default").with_overrides(
        engine_args={"disable_radix_cache": False})
    with pytest.raises(PatchgateError, match="profile h200-default: engine_args"):
        server_args(prof, [], KNOWN)


class FakeRegistry:
    """Stands in for sglang.srt.models.registry.ModelRegistry (SGLang is not installed
    here): architecture name -> model class, as SGLang's ``models`` table holds them."""

    def __init__(self, **entries):
        self.models = entries


def sglang_class(module: str, name: str) -> type:
    return type(name, (), {"__module__": module})


REGISTRY = FakeRegistry(
    MiniCPMForCausalLM=sglang_class("sglang.srt.models.minicpm", "MiniCPMForCausalLM"),
    MiniCPMSALAForCausalLM=sglang_class("sglang.srt.models.minicpm", "MiniCPMSALAForCausalLM"),
    Qwen3ForCausalLM=sglang_class("sglang.srt.models.qwen3", "Qwen3ForCausalLM"),
    LazyForCausalLM="sglang.srt.models.lazy:LazyImpl",
)


def test_worker_package_is_valid_python_that_names_the_patches(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-scale.py",
                          '"""Scale."""\ndef apply(model):\n    model.scaled = True\n')
    pkg = sglang_hook.write_package(tmp_path / "hook", "candidate", "MiniCPMForCausalLM",
                                    patches, dummy=False, registry=REGISTRY)
    text = (tmp_path / "hook" / pkg / "patched_model.py").read_text()
    compile(text, "patched_model.py", "exec")
    assert "from sglang.srt.models.minicpm import MiniCPMForCausalLM as _Base" in text
    assert "class MiniCPMForCausalLM(_Base):" in text
    assert "EntryClass = MiniCPMForCausalLM" in text
    assert str((tmp_path / "p" / "0001-scale.py").resolve()) in text
    assert "_DUMMY = False" in text


def test_the_class_to_extend_comes_from_sglangs_registry(tmp_path):
    # any architecture the registry holds, in whatever module SGLang defines it
    assert sglang_hook.base_class("MiniCPMSALAForCausalLM", REGISTRY) == \
        ("sglang.srt.models.minicpm", "MiniCPMSALAForCausalLM")
    assert sglang_hook.base_class("Qwen3ForCausalLM", REGISTRY) == \
        ("sglang.srt.models.qwen3", "Qwen3ForCausalLM")
    assert sglang_hook.base_class("LazyForCausalLM", REGISTRY) == \
        ("sglang.srt.models.lazy", "LazyImpl")
    pkg = sglang_hook.write_package(tmp_path, "c", "LazyForCausalLM", [], dummy=True,
                                    registry=REGISTRY)
    text = (tmp_path / pkg / "patched_model.py").read_text()
    assert "from sglang.srt.models.lazy import LazyImpl as _Base" in text
    assert "class LazyForCausalLM(_Base):" in text  # registered under the architecture
    # a plain dict works as the table too
    assert sglang_hook.base_class("X", {"X": sglang_class("m", "X")}) == ("m", "X")


def test_unknown_architecture_and_worker_error_file(tmp_path):
    with pytest.raises(PatchgateError, match="none for architecture MiniCPMSalaForCausalLM") \
            as e:
        sglang_hook.write_package(tmp_path, "c", "MiniCPMSalaForCausalLM", [], dummy=False,
                                  registry=REGISTRY)
    assert "MiniCPMSALAForCausalLM" in e.value.message  # the closest names it knows
    assert "0.5.19" in e.value.hint
    (tmp_path / "pkg.error.json").write_text(json.dumps(
        {"patch": "0001-x.py", "type": "KeyError", "message": "'w'"}))
    assert sglang_hook.read_worker_error(tmp_path, "pkg")["patch"] == "0001-x.py"
    assert sglang_hook.read_worker_error(tmp_path, "other") is None


def test_without_sglang_the_registry_lookup_says_how_to_install_it():
    try:
        import sglang  # noqa: F401
    except ImportError:
        with pytest.raises(PatchgateError, match="cannot import SGLang's model registry") as e:
            sglang_hook.base_class("MiniCPMForCausalLM")
        assert "pip install" in e.value.hint
    else:  # on the GPU machine: the real registry knows the default model's class
        assert sglang_hook.base_class("MiniCPMForCausalLM")[1] == "MiniCPMForCausalLM"


def test_architecture_of_the_default_model():
    root = Path(__file__).resolve().parent.parent
    assert sglang_hook.architecture(root / "models/default") == "MiniCPMForCausalLM"
    with pytest.raises(PatchgateError, match="cannot read the model architecture"):
        sglang_hook.architecture(root / "models")


def test_a_worker_sigquit_raises_instead_of_killing_the_gate():
    """SGLang's workers report a failure with SIGQUIT to the launching process; the
    handler the adapter passes as ``custom_sigquit_handler`` turns it into an
    exception (a real signal, delivered while the process waits)."""
    import os
    import signal
    import time

    from patchgate.engines.sglang import WorkerFailed, raise_on_sigquit

    old = signal.signal(signal.SIGQUIT, raise_on_sigquit)
    try:
        with pytest.raises(WorkerFailed, match="SIGQUIT"):
            os.kill(os.getpid(), signal.SIGQUIT)
            time.sleep(5)  # the handler interrupts this wait, as it would engine start-up
    finally:
        signal.signal(signal.SIGQUIT, old)


GPU_FIXTURES = FIX / "gpu"


@pytest.mark.parametrize("folder", sorted(p.name for p in GPU_FIXTURES.iterdir()))
def test_planted_gpu_patches_are_valid_sglang_patches(folder):
    """The planted patches of docs/gpu-runs pass the patch contract and target SGLang."""
    (patch,) = discover(GPU_FIXTURES / folder)
    assert patch.applies_to("sglang")
    assert not patch.applies_to("transformers")


def test_planted_failing_patch_raises_in_apply_and_is_named():
    (patch,) = discover(GPU_FIXTURES / "raise_in_apply")
    with pytest.raises(PatchgateError, match="0001-raise-in-apply.py: apply\\(\\) raised"):
        apply_patches(object(), [patch], "sglang")


def test_prefill_chunks_follow_batch_and_lengths():
    prof = get_profile("h200-minicpm8b")
    assert prefill_chunks(prof, 8192) == {128, 1024, 2048, 8192}
    assert prefill_chunks(prof, 4096) == {128, 1024, 2048, 4096}
    odd = prof.with_overrides(batch_sizes=(3,))
    assert prefill_chunks(odd, 4096) == {384, 4096, 6144 - 4096}


@pytest.mark.parametrize("name", ["h200-minicpm8b"])
def test_a_profile_that_limits_prefill_graphs_holds_every_scenario_chunk(name):
    prof = get_profile(name)
    args = prof.engine_args
    assert prefill_chunks(prof, args["chunked_prefill_size"]) <= \
        set(args["cuda_graph_bs_prefill"])
    plain = prof.with_overrides(grow=None)  # server_args reads model_path(): no 8B build
    assert server_args(plain, [])["cuda_graph_bs_prefill"] == args["cuda_graph_bs_prefill"]


def test_the_sglang_timed_call_runs_with_the_collector_off_and_restores_it():
    """The gate's process only drives SGLang's scheduler: a full collection of its heap
    must not land inside a timed call (docs/gpu-runs/2026-12-07e); after the call, and
    after a call that raised, the collector is on again. The transformers engine, where
    the patch runs in the timed process, keeps it on."""
    import gc

    from patchgate.engines.sglang import SGLangEngine
    from patchgate.engines.transformers import TransformersEngine

    seen = []

    def fake(cls, fail=False):
        eng = object.__new__(cls)
        eng.label = "candidate"
        eng.synchronize = lambda: None

        def generate(batch, n):
            seen.append(gc.isenabled())
            if fail:
                raise PatchgateError("engine failed")
            return [[7] * n for _ in batch]

        eng.generate = generate
        return eng

    assert gc.isenabled()
    timing = fake(SGLangEngine).timed_generate([[1, 2], [3, 4]], 3)
    assert timing.first == (7, 7) and seen == [False] and gc.isenabled()
    with pytest.raises(PatchgateError):
        fake(SGLangEngine, fail=True).timed_generate([[1]], 1)
    assert seen[-1] is False and gc.isenabled()
    fake(TransformersEngine).timed_generate([[1]], 1)
    assert seen[-1] is True and gc.isenabled()
    gc.disable()  # a collector that was off before stays off
    try:
        fake(SGLangEngine).timed_generate([[1]], 1)
        assert not gc.isenabled()
    finally:
        gc.enable()
