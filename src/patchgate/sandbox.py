"""The sandbox that patch code runs in: Landlock, where the kernel offers it.

A patch is code from a pull request. It runs only in processes the gate starts for it
(the scratch import of ``check`` and ``guard``, the transformers workers, SGLang's
scheduler through the model hook), and each of them calls :func:`enter` before the
first line of patch code runs. From then on that process, and every process it starts,
may write only under :func:`writable`: the temporary and shared-memory folders, the
device files, and the caches that torch, Triton, FlashInfer, CUDA and Hugging Face
fill. A patch that writes into the checkout (``baselines/``, ``CHANGELOG.md``, the
patches, this package) or into ``site-packages`` gets ``EACCES``. With Landlock ABI 6
or later the process may also not signal processes outside its sandbox (no SIGSTOP
to the gate or to another configuration's engine).

Why Landlock through ctypes, not a library: three system calls and two structures
(about 60 lines here) against a dependency for every install; Landlock needs no
privileges, no setuid helper and no container, and it stacks with whatever a CI
runner already confines. The syscall numbers are the kernel's generic ones (444-446
on x86_64 and aarch64).

What it cannot stop: reading (the sandbox handles writes only: a patch reads weights
and data like any code), work that slows other processes without writing or
signalling (CPU or GPU time: the off-clock check, :mod:`patchgate.latency.offclock`,
is that guard), system calls Landlock does not cover (``sched_setaffinity`` on another
process, ``setpriority``), and, in SGLang's scheduler, code run by threads that
existed before the model hook entered the sandbox (Landlock confines the calling
thread and what it starts).

``PATCHGATE_SANDBOX=off`` turns it off (for debugging a patch; the verdict says so).
Where the kernel has no Landlock (before Linux 5.13, or disabled), :func:`enter`
does nothing and :func:`status` says "patch code ran without a sandbox"; the gate's
file watch (:class:`patchgate.store.writes.Watch`) and the probe's restore stay.
"""

from __future__ import annotations

import ctypes
import os
import platform
import tempfile
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_SCOPE_SIGNAL = 1 << 1  # ABI 6
_O_PATH = getattr(os, "O_PATH", 0o10000000)

# LANDLOCK_ACCESS_FS_*: the rights that create, change or remove files. Reading and
# executing are not handled (allowed everywhere); nor are device ioctls (the GPU).
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # CHAR DIR REG SOCK FIFO BLOCK SYM
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
ENV = "PATCHGATE_SANDBOX"
_entered: dict | None = None  # this process's sandbox, once entered


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version (0: none here)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def writable() -> list[Path]:
    """The folders sandboxed patch code may write under (those that exist)."""
    home = Path.home()
    env = [os.environ.get(k) for k in ("TMPDIR", "XDG_CACHE_HOME", "TRITON_CACHE_DIR",
                                        "TORCHINDUCTOR_CACHE_DIR", "HF_HOME",
                                        "FLASHINFER_WORKSPACE_BASE", "CUDA_CACHE_PATH")]
    caches = [home / ".cache", home / ".triton", home / ".nv", *map(Path, filter(None, env))]
    for c in caches:  # created now: once sandboxed, a cache folder cannot be made
        try:
            c.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
    candidates = [tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev", "/dev/shm", *caches]
    out: list[Path] = []
    for c in candidates:
        p = Path(c).resolve()
        if p.is_dir() and p not in out:
            out.append(p)
    return out


def enter(extra: list[Path] | tuple = ()) -> dict:
    """Confine this process (the calling thread and everything it starts) to writing
    under :func:`writable` and ``extra``; returns :func:`status`'s record. Idempotent;
    a kernel without Landlock or ``PATCHGATE_SANDBOX=off`` leaves the process as it is."""
    global _entered
    if _entered is not None:
        return _entered
    version = abi()
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        _entered = {"on": False, "abi": version, "why": f"{ENV}=off"}
        return _entered
    if version < 1:
        _entered = {"on": False, "abi": 0, "why": "the kernel offers no Landlock"}
        return _entered
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    handled |= _REFER if version >= 2 else 0
    handled |= _TRUNCATE if version >= 3 else 0
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL if version >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 8
    libc = _libc()
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    allowed = [*writable(), *(Path(p).resolve() for p in extra if Path(p).is_dir())]
    try:
        for folder in allowed:
            dfd = os.open(folder, _O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(handled, dfd)
                if libc.syscall(_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {folder} failed")
            finally:
                os.close(dfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    _entered = {"on": True, "abi": version, "signals": version >= 6,
                "writable": [str(p) for p in allowed]}
    return _entered


def status() -> dict:
    """What :func:`enter` would do in a new process here, without entering: ``on``, the
    ABI, whether signals are scoped, and a sentence for the verdict (``text``)."""
    version = abi()
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        return {"on": False, "abi": version,
                "text": f"patch code ran without a sandbox ({ENV}=off)"}
    if version < 1:
        return {"on": False, "abi": 0, "text": "patch code ran without a sandbox (the "
                "kernel offers no Landlock); the stored files were watched instead"}
    signals = ", nor signal processes outside it" if version >= 6 else ""
    return {"on": True, "abi": version, "signals": version >= 6,
            "text": f"patch code ran in a Landlock sandbox (ABI {version}): it could write "
                    f"only to temporary, device and cache folders{signals}"}
