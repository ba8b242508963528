import json

from patchgate.store import environment

KEYS = {"python", "platform", "machine", "cpu_model", "cpu_count", "cpu_vendor", "cpu_family",
        "cpu_model_number", "cpu_stepping", "cpu_flags", "cpu_avx512", "torch", "torch_cuda",
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
    b = {"torch": "2.12.0", "cpu_count": 2, "cpu_flags": "ab12"}
    assert environment.same_environment(a, a) == []
    assert environment.same_environment(a, b) == ["cpu_flags", "torch"]


def test_describe_cpu_and_gpu():
    cpu = {"device": "cpu", "cpu_model": "AMD EPYC 7B13", "cpu_count": 2,
           "torch": "2.13.0", "transformers": "5.12.1", "engine": "transformers"}
    assert environment.describe(cpu) == "cpu: AMD EPYC 7B13 x2, torch 2.13.0, transformers 5.12.1"
    gpu = dict(cpu, device="cuda", gpu_name="NVIDIA H200", gpu_count=1, gpu_driver="570.1",
               torch_cuda="12.8", engine="sglang", sglang="0.5.16")
    assert environment.describe(gpu) == (
        "cuda: NVIDIA H200 (driver 570.1, CUDA 12.8), torch 2.13.0, transformers 5.12.1, "
        "sglang 0.5.16")


# Two machines that both call themselves "AMD EPYC" with 2 cores (the Zen 2 at
# 2.0 GHz and Zen 5 at 2.6 GHz with AVX-512): /proc/cpuinfo's first processor, shortened.
ZEN2 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 49
model name\t: AMD EPYC
stepping\t: 0
cpu MHz\t\t: 1999.999
flags\t\t: fpu sse sse2 avx avx2 fma bmi2 sha_ni

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 23
cpu MHz\t\t: 2000.134
"""
ZEN5 = ZEN2.replace(": 23", ": 26").replace(": 49", ": 2").replace(": 0\ncpu MHz", ": 1\n"
                    "cpu MHz").replace("1999.999", "2596.122").replace(
    "sha_ni", "sha_ni avx512f avx512bw avx512_bf16")
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""


def identity(monkeypatch, tmp_path, text: str) -> dict:
    (tmp_path / "cpuinfo").write_text(text)
    monkeypatch.setattr(environment, "_CPUINFO", tmp_path / "cpuinfo")
    return environment.cpu_identity()


def test_cpu_identity_tells_apart_what_the_brand_name_does_not(monkeypatch, tmp_path):
    zen2 = identity(monkeypatch, tmp_path, ZEN2)
    assert zen2 == {"cpu_vendor": "AuthenticAMD", "cpu_family": 23, "cpu_model_number": 49,
                    "cpu_stepping": 0, "cpu_flags": zen2["cpu_flags"], "cpu_avx512": False}
    assert len(zen2["cpu_flags"]) == 12
    zen5 = identity(monkeypatch, tmp_path, ZEN5)
    assert (zen5["cpu_family"], zen5["cpu_model_number"], zen5["cpu_stepping"]) == (26, 2, 1)
    assert zen5["cpu_avx512"] is True and zen5["cpu_flags"] != zen2["cpu_flags"]
    # the clock is not part of it: another MHz reading, the same identity
    assert identity(monkeypatch, tmp_path, ZEN2.replace("1999.999", "2999.5")) == zen2
    # nor the order of the flags
    assert identity(monkeypatch, tmp_path, ZEN2.replace("avx avx2", "avx2 avx")) == zen2
    arm = identity(monkeypatch, tmp_path, ARM)
    assert (arm["cpu_vendor"], arm["cpu_family"], arm["cpu_model_number"],
            arm["cpu_stepping"], arm["cpu_avx512"]) == ("0x41", 8, 0xd40, 1, False)
    monkeypatch.setattr(environment, "_CPUINFO", tmp_path / "nowhere")
    assert environment.cpu_identity() == dict.fromkeys(zen2)


def test_two_fingerprints_that_differ_only_in_cpu_family_and_model_get_two_keys(
        monkeypatch, tmp_path):
    base = environment.fingerprint("transformers", "cpu")
    zen2 = dict(base, cpu_model="AMD EPYC", cpu_count=2,
                **identity(monkeypatch, tmp_path, ZEN2))
    other = dict(zen2, cpu_family=26, cpu_model_number=2)
    k2, k5 = environment.machine_key(zen2), environment.machine_key(other)
    assert k2 != k5
    assert k2.startswith("AMD-EPYC-2cpu-") and k5.startswith("AMD-EPYC-2cpu-")
    assert environment.machine_key(dict(zen2)) == k2  # the same machine: the same key
    assert environment.same_environment(zen2, other) == ["cpu_family", "cpu_model_number"]
    for key in environment.timing_keys():  # every timing key counts
        assert environment.machine_key(dict(zen2, **{key: "other"})) != k2, key
    # keys that do not change a timing do not change the key
    for key in ("lm_eval", "engine", "device", "torch_threads"):
        assert environment.machine_key(dict(zen2, **{key: "other"})) == k2, key


def test_a_stored_fingerprint_without_the_cpu_identity_is_another_environment():
    """Results stored before the CPU identity was recorded are another environment (a
    stored reference accuracy is measured again, once)."""
    now = environment.fingerprint("transformers", "cpu")
    before = {k: v for k, v in now.items() if not k.startswith("cpu_") or k in
              ("cpu_model", "cpu_count")}
    assert set(environment.same_environment(before, now)) <= {
        "cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping", "cpu_flags",
        "cpu_avx512"}


def test_the_gate_process_threads_do_not_make_another_environment():
    """torch_threads is the gate process's own: whatever ran in it before set it (a test
    that built an engine in-process, say), while every engine pins its own threads."""
    a = environment.fingerprint("transformers", "cpu")
    assert environment.same_environment(a, a | {"torch_threads": a["torch_threads"] + 1}) == []
    assert environment.same_environment(a, a | {"cpu_count": 99}) == ["cpu_count"]
