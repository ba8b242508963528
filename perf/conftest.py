"""pytest-benchmark wiring for the six scenarios (``pytest perf/``).

- **Timed as the gate times.** Each round is one ``Engine.timed_generate`` call, timed
  where the model runs (inside the transformers worker process; around a synchronized
  call under SGLang), and pytest-benchmark's timer is a clock that advances by exactly
  those seconds (:func:`worker_clock`), so the pipe to the worker is not measured.
  ``--benchmark-timer`` still overrides it.
- **Compared like with like, or not at all.** Runs are stored under
  ``baselines/<profile>/pytest-benchmark/<key>/`` (or ``<--benchmark-storage>/<key>/``),
  where ``<key>`` is :func:`patchgate.store.environment.machine_key` of this machine's
  fingerprint: the CPU's brand, cores, vendor, family/model/stepping, instruction-set
  flags and AVX-512, the GPU, and the versions of python, torch and the engines, so
  ``--benchmark-compare`` only ever sees runs of this machine and software. Each stored
  run records its key and fingerprint (``machine_info["patchgate"]``), and a run of
  another key is never compared, even when named by path. With no stored run for this
  key, ``--benchmark-compare`` compares nothing and says so in one line (this key, the
  keys stored, what differs); ``--benchmark-compare-fail`` then fails the session.
  ``make accept`` (``pytest perf/ --benchmark-save=accepted``) stores one.

``PATCHGATE_PROFILE`` chooses the profile (default ``default``; a GPU profile works the
same way), ``PATCHGATE_PATCHES`` the patch folder (default ``model_patches/``);
``--benchmark-storage`` overrides the storage.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from patchgate.profile import get_profile, repo_root

DEFAULT_STORAGE = "file://./.benchmarks"
DEFAULT_TIMER = "timeit.default_timer"
_clock = [0.0]
_notes: list[str] = []


def worker_clock() -> float:
    """Seconds of engine time so far: advanced only by :func:`timed` (the timer that
    pytest-benchmark reads before and after each round)."""
    return _clock[0]


def timed(engine, batch: list[list[int]], output_len: int) -> None:
    """One round: a generate call timed where the model runs, added to the clock."""
    _clock[0] += engine.timed_generate(batch, output_len).seconds


def profile_name() -> str:
    return os.environ.get("PATCHGATE_PROFILE", "default")


@functools.cache
def machine_fingerprint() -> dict:
    """This machine's fingerprint, its keys that can change a timing only."""
    from patchgate.store.environment import fingerprint, timing_keys

    env = fingerprint("none", "cpu")
    return {k: env.get(k) for k in timing_keys()}


def machine_key(fp: dict | None = None) -> str:
    """The key stored runs of this machine (or of the fingerprint ``fp``) go under."""
    from patchgate.store import environment

    return environment.machine_key(machine_fingerprint() if fp is None else fp)


def storage_root(storage: str | None, profile: str) -> Path | None:
    """The folder holding one folder per key: the profile's ``pytest-benchmark`` folder
    for pytest-benchmark's default storage, the folder of a ``file://`` storage given,
    None for other storages."""
    if storage == DEFAULT_STORAGE:
        return repo_root() / "baselines" / profile / "pytest-benchmark"
    if storage and storage.startswith("file://"):
        return Path(storage.removeprefix("file://"))
    return None


def stored_runs(folder: Path) -> list[Path]:
    """The runs pytest-benchmark stored in ``folder`` (``<machine_id>/NNNN_<name>.json``)."""
    return sorted(folder.glob("*/[0-9][0-9][0-9][0-9]_*.json")) if folder.is_dir() else []


def no_stored_run(root: Path, key: str, fp: dict) -> str:
    """The one line that says why nothing was compared: this key, the keys stored and
    what differs from this machine (where their runs recorded a fingerprint)."""
    others = []
    for folder in sorted(p for p in root.glob("*") if p.is_dir() and p.name != key):
        runs = stored_runs(folder)
        if not runs:
            continue
        theirs = _recorded(runs[-1]).get("fingerprint")
        if theirs:
            differ = sorted(k for k in set(fp) | set(theirs) if theirs.get(k) != fp.get(k))
            others.append(f"{folder.name} (differs in {', '.join(differ) or 'nothing'})")
        else:
            others.append(f"{folder.name} (no fingerprint recorded)")
    return (f"no stored run for this machine (key {key}) under {root}: nothing compared; "
            f"stored keys: {'; '.join(others) or 'none'}; `make accept` (pytest perf/ "
            "--benchmark-save=accepted) stores one for this machine")


def _recorded(run: Path) -> dict:
    """The key and fingerprint a stored run recorded (empty if none)."""
    try:
        info = json.loads(run.read_text(encoding="utf-8")).get("machine_info") or {}
    except (OSError, ValueError):
        return {}
    return info.get("patchgate") or {}


def pytest_configure(config):
    # Runs before pytest-benchmark's own (trylast) configure, which opens the storage.
    opt = config.option
    if not hasattr(opt, "benchmark_storage"):
        return  # pytest-benchmark is not active
    fp = machine_fingerprint()
    key = machine_key(fp)
    config._patchgate_machine = {"key": key, "fingerprint": fp}
    root = storage_root(opt.benchmark_storage, profile_name())
    if root is not None:
        opt.benchmark_storage = f"file://{root / key}"
    if getattr(opt, "benchmark_timer", None) in (DEFAULT_TIMER, "time.perf_counter"):
        opt.benchmark_timer = "perf.conftest.worker_clock"
    if getattr(opt, "benchmark_compare", None) and root is not None and \
            not stored_runs(root / key):
        opt.benchmark_compare = []
        _notes.append(no_stored_run(root, key, fp))
        # pytest-benchmark would stop with a usage error; say why and fail instead
        config._patchgate_compare_fail = getattr(opt, "benchmark_compare_fail", None)
        opt.benchmark_compare_fail = None


def pytest_benchmark_update_machine_info(config, machine_info):
    """Every stored run records this machine's key and fingerprint."""
    machine_info["patchgate"] = getattr(config, "_patchgate_machine", None)


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info,
                                          compared_benchmark):
    """A stored run of another key is never compared (named by path, or copied in)."""
    mine = (machine_info.get("patchgate") or {}).get("key")
    theirs = ((compared_benchmark.get("machine_info") or {}).get("patchgate") or {}).get("key")
    if theirs != mine:
        raise pytest.UsageError(
            f"patchgate: a stored run of another machine (key {theirs or 'not recorded'}) "
            f"cannot be compared with this one (key {mine}): nothing compared; "
            "`make accept` stores a run for this machine")


def pytest_report_header(config):
    return (f"patchgate profile: {profile_name()}; machine: {machine_key()}; benchmark "
            f"storage: {config.option.benchmark_storage}; timer: "
            f"{config.option.benchmark_timer} (engine time of each call)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for note in _notes:
        terminalreporter.write_line(f"patchgate: {note}", yellow=True)


def pytest_sessionfinish(session, exitstatus):
    if getattr(session.config, "_patchgate_compare_fail", None):
        _notes.append("--benchmark-compare-fail: nothing to compare against, so the "
                      "session fails; `make accept` stores a run for this machine")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def profile():
    return get_profile(profile_name())


@pytest.fixture(scope="session")
def engine(profile):
    from patchgate.engines import start as load_engine
    from patchgate.patches import discover

    folder = Path(os.environ.get("PATCHGATE_PATCHES", repo_root() / "model_patches"))
    patches = [p for p in discover(folder) if p.applies_to(profile.engine)]
    eng = load_engine(profile, patches, "candidate")
    if hasattr(eng, "ready"):
        eng.ready()
    yield eng
    eng.close()
