"""pytest-benchmark wiring for the six scenarios (``pytest perf/``).

- **Timed as the gate times.** Each round is one ``Engine.timed_generate`` call, timed
  where the model runs (inside the transformers worker process; around a synchronized
  call under SGLang), and pytest-benchmark's timer is a clock that advances by exactly
  those seconds (:func:`worker_clock`), so the pipe to the worker is not measured.
  ``--benchmark-timer`` still overrides it.
- **Compared like with like.** Runs are stored under
  ``baselines/<profile>/pytest-benchmark/<machine>/`` (``<machine>``: CPU model, core
  count and GPU, :func:`machine_key`), and pytest-benchmark adds the Python version
  below it: ``--benchmark-compare`` only ever sees runs of this machine. On a machine
  with no stored run, the first ``--benchmark-compare`` stores this run as the
  machine's baseline and says so in one line; ``--benchmark-compare-fail`` then fails
  the session (nothing was compared), instead of passing silently.

``PATCHGATE_PROFILE`` chooses the profile (default ``default``; a GPU profile works the
same way), ``PATCHGATE_PATCHES`` the patch folder (default ``model_patches/``);
``--benchmark-storage`` overrides the storage.
"""

from __future__ import annotations

import os
import platform
import re
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
    _clock[0] += engine.timed_generate(batch, output_len)


def profile_name() -> str:
    return os.environ.get("PATCHGATE_PROFILE", "default")


def machine_key() -> str:
    """The machine a stored run belongs to: CPU model, cores, and the GPU if any."""
    from patchgate.store.environment import fingerprint

    env = fingerprint("none", "cpu")
    parts = [env.get("cpu_model") or platform.processor() or "cpu",
             f"{env.get('cpu_count')}cpu"]
    if env.get("gpu_name"):
        parts.append(f"{env.get('gpu_count')}x {env['gpu_name']}")
    return re.sub(r"[^A-Za-z0-9]+", "-", " ".join(parts)).strip("-")


def _stored_runs(storage: Path) -> list[Path]:
    return sorted(storage.rglob("*.json")) if storage.is_dir() else []


def pytest_configure(config):
    # Runs before pytest-benchmark's own (trylast) configure, which opens the storage.
    opt = config.option
    if getattr(opt, "benchmark_storage", None) == DEFAULT_STORAGE:
        store = repo_root() / "baselines" / profile_name() / "pytest-benchmark" / machine_key()
        opt.benchmark_storage = f"file://{store}"
    if getattr(opt, "benchmark_timer", None) in (DEFAULT_TIMER, "time.perf_counter"):
        opt.benchmark_timer = "perf.conftest.worker_clock"
    storage = str(getattr(opt, "benchmark_storage", ""))
    if getattr(opt, "benchmark_compare", None) and storage.startswith("file://"):
        path = Path(storage.removeprefix("file://"))
        if not _stored_runs(path):
            opt.benchmark_compare = []
            if not getattr(opt, "benchmark_save", None):
                opt.benchmark_save = "baseline"
            _notes.append(f"no stored run for this machine ({machine_key()}) under {path}: "
                          "nothing compared; this run is stored as its baseline")
            # pytest-benchmark would stop with a usage error; say why and fail instead
            config._patchgate_compare_fail = getattr(opt, "benchmark_compare_fail", None)
            opt.benchmark_compare_fail = None


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
                      "session fails; run again to compare with the run just stored")
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
