import json

from patchgate.store import environment

KEYS = {"python", "platform", "machine", "cpu_model", "cpu_count", "torch", "torch_cuda",
        "gpu_name", "gpu_count", "gpu_driver", "transformers", "sglang", "lm_eval", "engine",
        "device", "torch_threads"}


def test_fingerprint_has_the_keys_and_is_json():
    fp = environment.fingerprint("transformers", "cpu")
    assert set(fp) == KEYS
    assert fp["engine"] == "transformers" and fp["device"] == "cpu"
    assert fp["torch"] and fp["transformers"] and fp["python"]
    assert fp["torch_threads"] >= 1
    assert json.loads(json.dumps(fp, allow_nan=False)) == fp


def test_fingerprint_without_nvidia_smi_has_no_driver(monkeypatch):
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    assert environment.fingerprint("transformers", "cpu")["gpu_driver"] is None


def test_same_environment_lists_differing_keys():
    a = {"torch": "2.13.0", "gpu_name": None, "cpu_count": 2}
    b = {"torch": "2.12.0", "cpu_count": 2, "torch_threads": 4}
    assert environment.same_environment(a, a) == []
    assert environment.same_environment(a, b) == ["torch", "torch_threads"]


def test_describe_cpu_and_gpu():
    cpu = {"device": "cpu", "cpu_model": "AMD EPYC 7B13", "cpu_count": 2,
           "torch": "2.13.0", "transformers": "5.12.1", "engine": "transformers"}
    assert environment.describe(cpu) == "cpu: AMD EPYC 7B13 x2, torch 2.13.0, transformers 5.12.1"
    gpu = dict(cpu, device="cuda", gpu_name="NVIDIA H200", gpu_count=1, gpu_driver="570.1",
               torch_cuda="12.8", engine="sglang", sglang="0.5.16")
    assert environment.describe(gpu) == (
        "cuda: NVIDIA H200 (driver 570.1, CUDA 12.8), torch 2.13.0, transformers 5.12.1, "
        "sglang 0.5.16")
