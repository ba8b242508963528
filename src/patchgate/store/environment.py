"""The environment fingerprint stored with every result, and how two compare.

Latency numbers only mean something next to the machine and software that produced
them, so every stored result carries :func:`fingerprint`: a flat dict of strings,
ints and ``None`` (JSON as is). :func:`same_environment` lists the keys on which two
fingerprints differ; the baselines module refuses to compare such results unless
forced.

Call :func:`fingerprint` after the engine has pinned its threads: ``torch_threads``
is part of the fingerprint.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path

from .. import registry

#: Keys that :func:`same_environment` ignores: none today. A key goes here only if
#: it cannot change a latency measurement (a hostname would, if it were recorded).
IGNORED_KEYS: frozenset[str] = frozenset()

_CPUINFO = Path("/proc/cpuinfo")


def fingerprint(engine: str, device: str) -> dict:
    """The environment of this process, for the ``engine`` running on ``device``.

    Keys: ``python``, ``platform`` (OS name), ``machine`` (architecture), ``cpu_model``,
    ``cpu_count``, ``torch``, ``torch_cuda``, ``gpu_name``, ``gpu_count``,
    ``gpu_driver``, the version of every registered engine's package (``transformers``,
    ``sglang``: :mod:`patchgate.registry`), ``lm_eval``, ``engine``, ``device``,
    ``torch_threads``. Values absent on this machine are ``None``.
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
    try:
        with _CPUINFO.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


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

