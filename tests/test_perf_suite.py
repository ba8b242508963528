"""`pytest perf/`: timed as the gate times, compared only with this machine's runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_machine_key_names_the_cpu_and_cores():
    sys.path.insert(0, str(ROOT))
    from perf.conftest import machine_key, timed, worker_clock

    key = machine_key()
    assert key.endswith(f"-{os.cpu_count()}cpu") and "/" not in key and " " not in key

    class Engine:
        def timed_generate(self, batch, n):
            return 0.25

    t0 = worker_clock()
    timed(Engine(), [[1]], 1)
    assert worker_clock() - t0 == 0.25  # the clock moves by the engine's own time only


@pytest.mark.slow
def test_first_compare_on_a_new_machine_stores_a_baseline_then_compares(tmp_path):
    empty = tmp_path / "no_patches"
    empty.mkdir()
    env = dict(os.environ, PATCHGATE_PATCHES=str(empty), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "perf/", "-q", "-p", "no:cacheprovider",
           f"--benchmark-storage=file://{tmp_path / 'store'}", "--benchmark-compare",
           "--benchmark-compare-fail=min:500%", "-k", "prefill_b1 or decode_b1"]
    first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out  # nothing to compare with: fails, says why
    assert "nothing compared; this run is stored as its baseline" in out
    assert "--benchmark-compare-fail: nothing to compare against" in out
    (saved,) = (tmp_path / "store").rglob("*baseline.json")
    run = json.loads(saved.read_text())
    assert {b["name"] for b in run["benchmarks"]} == {"test_scenario[prefill_b1]",
                                                     "test_scenario[decode_b1]"}
    assert run["benchmarks"][0]["options"]["timer"].endswith("worker_clock")
    second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Comparing against benchmarks from" in second.stdout + second.stderr
