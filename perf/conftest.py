"""pytest-benchmark wiring for the six scenarios (``pytest perf/``).

Results are stored in, and ``--benchmark-compare`` compares against,
``baselines/<profile>/pytest-benchmark/`` (committed), unless ``--benchmark-storage``
is given. Choose the profile with ``PATCHGATE_PROFILE`` (default ``default``) and the
patch folder with ``PATCHGATE_PATCHES`` (default ``model_patches/``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchgate.config import get_profile, repo_root

DEFAULT_STORAGE = "file://./.benchmarks"


def profile_name() -> str:
    return os.environ.get("PATCHGATE_PROFILE", "default")


def pytest_configure(config):
    # Runs before pytest-benchmark's own (trylast) configure, which opens the storage.
    if getattr(config.option, "benchmark_storage", None) == DEFAULT_STORAGE:
        store = repo_root() / "baselines" / profile_name() / "pytest-benchmark"
        config.option.benchmark_storage = f"file://{store}"


def pytest_report_header(config):
    return (f"patchgate profile: {profile_name()}; benchmark storage: "
            f"{config.option.benchmark_storage}")


@pytest.fixture(scope="session")
def profile():
    return get_profile(profile_name())


@pytest.fixture(scope="session")
def engine(profile):
    from patchgate.engines import load_engine
    from patchgate.patches import discover

    folder = Path(os.environ.get("PATCHGATE_PATCHES", repo_root() / "model_patches"))
    patches = [p for p in discover(folder) if p.applies_to(profile.engine)]
    eng = load_engine(profile, patches, "candidate")
    yield eng
    eng.close()
