"""The environment fingerprint stored with every result, and how two compare.

Latency numbers only mean something next to the machine and software that produced
them, so every stored result carries :func:`fingerprint`: a flat dict of strings,
ints, booleans and ``None`` (JSON as is). :func:`same_environment` lists the keys on which two
fingerprints differ; the baselines module refuses to compare such results unless
forced.

Call :func:`fingerprint` after the engine has pinned its threads: ``torch_threads``
is part of the fingerprint.

The CPU is more than its brand name: two "AMD EPYC" with 2 cores each can be a Zen 2
and a Zen 5 with AVX-512. So the fingerprint records the vendor, the family, model and
stepping numbers, a short hash of the instruction-set flags and whether AVX-512 is
there (never the clock: /proc/cpuinfo's MHz moves from one reading to the next).
:func:`machine_key` names stored timings (``pytest perf/``) by the keys of
:func:`timing_keys`: the same machine and software, or another key.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from .. import registry

#: Keys that :func:`same_environment` ignores. A key goes here only if it cannot change a
#: measurement (a hostname would, if it were recorded): ``torch_threads`` is the gate
#: process's own, and every engine sets its threads in its own process (on the CPU the
#: run records them beside the verdict); it followed whatever ran in the gate's process
#: before, so two runs of one machine seemed to come from two environments.
IGNORED_KEYS: frozenset[str] = frozenset({"torch_threads"})

_CPUINFO = Path("/proc/cpuinfo")


def fingerprint(engine: str, device: str) -> dict:
    """The environment of this process, for the ``engine`` running on ``device``.

    Keys: ``python``, ``platform`` (OS name), ``machine`` (architecture), ``cpu_model``
    (the brand name), ``cpu_count``, the CPU's identity (:func:`cpu_identity`:
    ``cpu_vendor``, ``cpu_family``, ``cpu_model_number``, ``cpu_stepping``,
    ``cpu_flags``, ``cpu_avx512``), ``torch``, ``torch_cuda``, ``gpu_name``,
    ``gpu_count``, ``gpu_driver``, the version of every registered engine's package
    (``transformers``, ``sglang``: :mod:`patchgate.registry`), ``lm_eval``, ``engine``,
    ``device``, ``torch_threads``. Values absent on this machine are ``None``.
    """
    import torch  # lazily: importing torch takes a second

    engines = {e.package: _version(e.package) for e in registry.ENGINES.values()
               if e.package}

    gpu_name = None
    gpu_count = 0
    if torch.cuda.is_available():
        gpu_count = torch.cuda.device_count()
        gpu_name = torch.cuda.get_device_name(0)
    return {
        "python": platform.python_version(),
        "platform": platform.system(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        **cpu_identity(),
        "torch": _version("torch"),
        "torch_cuda": torch.version.cuda,
        "gpu_name": gpu_name,
        "gpu_count": gpu_count,
        "gpu_driver": _gpu_driver(),
        **engines,
        "lm_eval": _version("lm_eval"),
        "engine": engine,
        "device": device,
        "torch_threads": torch.get_num_threads(),
    }


def timing_keys() -> tuple[str, ...]:
    """The keys of a fingerprint that can change a timing: the machine (CPU, GPU, OS) and
    the software that runs the model (python, torch, every engine's package). Not
    ``lm_eval``, ``engine``, ``device`` (a stored run's profile says those) nor
    ``torch_threads`` (the engine sets it)."""
    engines = tuple(e.package for e in registry.ENGINES.values() if e.package)
    return ("platform", "machine", "cpu_model", "cpu_count", "cpu_vendor", "cpu_family",
            "cpu_model_number", "cpu_stepping", "cpu_flags", "cpu_avx512", "gpu_name",
            "gpu_count", "gpu_driver", "torch", "torch_cuda", "python", *engines)


def machine_key(fp: dict) -> str:
    """The name of stored timings of the fingerprint ``fp``'s machine and software: a
    readable prefix (CPU brand, cores, GPU) and a short hash of :func:`timing_keys`, e.g.
    ``AMD-EPYC-2cpu-3f9c1a07b2``. Two fingerprints that differ in any of those keys (a
    CPU family, a torch version) get different keys."""
    parts = [str(fp.get("cpu_model") or fp.get("cpu_vendor") or "cpu"),
             f"{fp.get('cpu_count')}cpu"]
    if fp.get("gpu_name"):
        parts.append(f"{fp.get('gpu_count')}x {fp['gpu_name']}")
    readable = re.sub(r"[^A-Za-z0-9]+", "-", " ".join(parts)).strip("-")
    timing = json.dumps({k: fp.get(k) for k in timing_keys()}, sort_keys=True)
    return f"{readable}-{hashlib.sha256(timing.encode()).hexdigest()[:10]}"


def same_environment(a: dict, b: dict) -> list[str]:
    """The keys (sorted) whose values differ between fingerprints ``a`` and ``b``.

    A key missing from one side counts as ``None``; keys in :data:`IGNORED_KEYS`
    are skipped. An empty list means the two results are comparable.
    """
    keys = (set(a) | set(b)) - IGNORED_KEYS
    return sorted(k for k in keys if a.get(k) != b.get(k))


def describe(fp: dict) -> str:
    """A one-line summary, e.g. ``cpu: AMD EPYC 7B13 x2, torch 2.13.0, transformers 5.12.1``."""
    device = fp.get("device") or "?"
    if fp.get("gpu_name") and not str(device).startswith("cpu"):
        hardware = str(fp["gpu_name"])
        if (fp.get("gpu_count") or 0) > 1:
            hardware += f" x{fp['gpu_count']}"
        details = [f"driver {fp['gpu_driver']}" if fp.get("gpu_driver") else None,
                   f"CUDA {fp['torch_cuda']}" if fp.get("torch_cuda") else None]
        details = [d for d in details if d]
        if details:
            hardware += f" ({', '.join(details)})"
    else:
        hardware = f"{fp.get('cpu_model') or 'unknown CPU'} x{fp.get('cpu_count') or '?'}"
    parts = [f"{device}: {hardware}", f"torch {fp.get('torch') or '?'}"]
    parts.append(f"transformers {fp.get('transformers') or '?'}")
    if fp.get("engine") == "sglang":
        parts.append(f"sglang {fp.get('sglang') or '?'}")
    return ", ".join(parts)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    return _cpuinfo().get("model name") or platform.processor() or None


def cpu_identity(info: dict[str, str] | None = None) -> dict:
    """What tells two CPUs of one brand name apart, from /proc/cpuinfo (``info``: its
    first processor's fields): ``cpu_vendor``, ``cpu_family``, ``cpu_model_number``,
    ``cpu_stepping`` (ints), ``cpu_flags`` (12 hex digits of sha256 over the sorted
    instruction-set flags) and ``cpu_avx512`` (true or false). ARM's fields (CPU
    implementer, architecture, part, revision; Features) stand in for x86's. All
    ``None`` where /proc/cpuinfo is not there. The clock (MHz) is left out: it is noise."""
    info = _cpuinfo() if info is None else info
    if not info:
        return dict.fromkeys(("cpu_vendor", "cpu_family", "cpu_model_number",
                              "cpu_stepping", "cpu_flags", "cpu_avx512"))
    flags = sorted(set((info.get("flags") or info.get("Features") or "").split()))
    return {
        "cpu_vendor": info.get("vendor_id") or info.get("CPU implementer"),
        "cpu_family": _number(info.get("cpu family") or info.get("CPU architecture")),
        "cpu_model_number": _number(info.get("model") or info.get("CPU part")),
        "cpu_stepping": _number(info.get("stepping") or info.get("CPU revision")),
        "cpu_flags": hashlib.sha256(" ".join(flags).encode()).hexdigest()[:12]
        if flags else None,
        "cpu_avx512": any(f.startswith("avx512") for f in flags),
    }


def _number(value: str | None) -> int | str | None:
    """``"25"`` -> 25, ``"0xd0c"`` -> 3340; anything else as it is."""
    if value is None or value.isdigit():
        return None if value is None else int(value)
    try:
        return int(value, 16) if value.lower().startswith("0x") else value
    except ValueError:
        return value


def _cpuinfo() -> dict[str, str]:
    """The fields of the first processor in /proc/cpuinfo (ARM's ``CPU ...`` lines may
    come after the blank line that ends it); empty where there is none."""
    info: dict[str, str] = {}
    try:
        with _CPUINFO.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep:
                    info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def _gpu_driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[0] if lines else None

