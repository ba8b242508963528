"""A grown checkpoint on disk, built once into a cache: ``build(source, shape) -> folder``.

The folder holds ``model.safetensors`` (bf16, written tensor by tensor: one tensor in
memory at a time, so the 16 GB MiniCPM4-8B shape needs about 0.3 GB beyond the
source), ``config.json``, the source's tokenizer files and ``*.py`` files (so
transformers with ``trust_remote_code`` and SGLang load it as they load the source),
and ``grown.json`` (what it was grown from; written last, deterministic, so the
workload fingerprint of the folder names source, shape and growth rules).

Cache: ``<cache>/<shape>-<key>``, key = sha256 of every source file the folder is
made of, the shape, the growth version, the dtype and the noise. ``<cache>`` is the
``cache_dir`` argument, else ``$PATCHGATE_CACHE``, else
``$XDG_CACHE_HOME/patchgate/grown`` (``~/.cache/patchgate/grown``). A build goes into
``.<name>.tmp-<host>-<pid>`` next to the target and becomes the target with one
``os.replace``: a folder under the final name is complete (one without its marker, or
whose weights are shorter than recorded, is built again). A lock file makes a second
process wait and then find the result; temp folders a killed build left on this host
are removed by the next build of the same key and never read.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import shutil
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..errors import PatchgateError
from . import grow

ENV = "PATCHGATE_CACHE"
MARKER = "grown.json"
_WEIGHTS = ("model.safetensors", "config.json")
_NOT_COPIED = {"train_log.json"}
_ST_DTYPES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}


@dataclass(frozen=True)
class Built:
    path: Path  # the grown model folder
    built: bool  # False: found in the cache
    seconds: float


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """Where grown models go: the argument, $PATCHGATE_CACHE, or the user's cache."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "patchgate" / "grown"


def build(source_dir: Path | str, shape: str, cache_dir: Path | str | None = None) -> Path:
    """The folder of ``source_dir`` grown to ``SHAPES[shape]``, built on first use."""
    return ensure(source_dir, shape, cache_dir).path


def ensure(source_dir: Path | str, shape: str, cache_dir: Path | str | None = None,
           dtype: torch.dtype = torch.bfloat16,
           log: Callable[[str], None] | None = None) -> Built:
    """Like :func:`build`, saying whether it built (and how long it took)."""
    t0 = time.perf_counter()
    log = log or (lambda m: print(m, file=sys.stderr))
    src = Path(source_dir)
    target_shape = grow.get_shape(shape)
    cfg = _read_config(src)
    grow.check(cfg, target_shape, where=str(src))
    files = _source_files(src)
    key = _key(files, shape, target_shape, dtype)
    root = cache_root(cache_dir)
    final = root / f"{shape}-{key[:16]}"
    if _complete(final):
        return Built(final, False, time.perf_counter() - t0)
    try:
        root.mkdir(parents=True, exist_ok=True)
        with open(root / f".{final.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build of this key: wait for it
            if _complete(final):
                return Built(final, False, time.perf_counter() - t0)
            log(f"growing {src} to {shape} into {final} (first use)")
            host = socket.gethostname()
            for old in root.glob(f".{final.name}.tmp-{host}-*"):
                shutil.rmtree(old, ignore_errors=True)  # a killed build's leftovers
            if final.exists():  # damaged (no marker, or weights cut short): build again
                shutil.rmtree(final)
            tmp = root / f".{final.name}.tmp-{host}-{os.getpid()}"
            tmp.mkdir()
            try:
                _write(_Job(src, cfg, files, shape, target_shape, key), tmp, dtype)
                os.replace(tmp, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise PatchgateError(f"cannot write the grown model to {root}: {e}",
                             hint=f"free disk space (the {shape} shape needs "
                             f"{_size_gb(cfg, target_shape, dtype):.1f} GB) or set "
                             f"{ENV} to another folder") from e
    return Built(final, True, time.perf_counter() - t0)


def _read_config(src: Path) -> dict:
    for name in _WEIGHTS:
        if not (src / name).is_file():
            raise PatchgateError(f"{src}: no {name}",
                                 hint="the source must be a MiniCPM folder with one "
                                 "model.safetensors (like models/default)")
    try:
        return json.loads((src / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise PatchgateError(f"{src / 'config.json'}: unreadable ({e})",
                             hint="restore the source's config.json") from e


def _source_files(src: Path) -> dict[str, str]:
    """name -> sha256 of every source file the grown folder is made of."""
    names = [p.name for p in sorted(src.iterdir()) if p.is_file()
             and p.suffix not in (".md", ".pyc") and p.name not in _NOT_COPIED]
    return {n: hashlib.sha256((src / n).read_bytes()).hexdigest() for n in names}


def _key(files: dict, shape: str, dims: grow.Shape, dtype: torch.dtype) -> str:
    what = {"files": files, "shape": shape, "dims": asdict(dims), "dtype": str(dtype),
            "growth_version": grow.GROWTH_VERSION, "noise": grow.NOISE}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _complete(folder: Path) -> bool:
    """A cached folder is used only with its marker and a weights file of the recorded size."""
    try:
        info = json.loads((folder / MARKER).read_text())
        return (folder / "model.safetensors").stat().st_size == info["bytes"]
    except (OSError, ValueError, KeyError):
        return False


@dataclass(frozen=True)
class _Job:
    """One build: the source folder, its config and files (name -> sha256), the shape's
    name and dimensions, and the cache key."""

    src: Path
    cfg: dict
    files: dict
    shape: str
    dims: grow.Shape
    key: str


def _write(job: _Job, tmp: Path, dtype: torch.dtype) -> None:
    from safetensors.torch import load_file

    src, cfg, files, shape, dims, key = (job.src, job.cfg, job.files, job.shape, job.dims,
                                         job.key)

    state = load_file(src / "model.safetensors")
    new = grow.grown_config(cfg, dims, dtype)
    plan = grow.tensor_plan(new)
    n = write_safetensors(tmp / "model.safetensors", plan,
                          grow.iter_grown(state, cfg, dims, dtype=dtype), dtype,
                          {"format": "pt", "grown": shape})
    (tmp / "config.json").write_text(json.dumps(new, indent=2) + "\n")
    for name in files:
        if name not in _WEIGHTS:
            shutil.copy2(src / name, tmp / name)
    small = cfg["num_hidden_layers"]
    info = {"schema_version": 1, "shape": shape, "dims": asdict(dims), "key": key,
            "source_files": files, "growth_version": grow.GROWTH_VERSION,
            "noise": grow.NOISE, "dtype": str(dtype).removeprefix("torch."), "bytes": n,
            "layers_from_source": list(range(small)),
            "layers_near_identity": list(range(small, dims.num_hidden_layers))}
    (tmp / MARKER).write_text(json.dumps(info, indent=2) + "\n")  # last: marks it complete


def write_safetensors(path: Path, plan: list[tuple[str, tuple[int, ...]]],
                      tensors: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype,
                      metadata: dict[str, str]) -> int:
    """Stream ``tensors`` (in ``plan`` order) into a safetensors file; returns its size."""
    item = torch.tensor([], dtype=dtype).element_size()
    header: dict = {"__metadata__": metadata}
    offset = 0
    for name, shp in plan:
        size = item * math.prod(shp)
        header[name] = {"dtype": _ST_DTYPES[dtype], "shape": list(shp),
                        "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    view = {2: torch.int16, 4: torch.int32}[item]
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for (name, t), (want, shp) in zip(tensors, plan, strict=True):
            if name != want or tuple(t.shape) != shp or t.dtype != dtype:
                raise RuntimeError(f"tensor {name} {tuple(t.shape)} out of plan ({want} {shp})")
            f.write(t.contiguous().view(view).numpy().data)
    return 8 + len(raw) + offset


def _size_gb(cfg: dict, dims: grow.Shape, dtype: torch.dtype) -> float:
    item = torch.tensor([], dtype=dtype).element_size()
    plan = grow.tensor_plan(grow.grown_config(cfg, dims, dtype))
    return sum(item * math.prod(s) for _, s in plan) / 1e9
