"""`pytest perf/`: timed as the gate times, compared only with this machine's runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchgate.engines.base import Timing

ROOT = Path(__file__).resolve().parent.parent


def conftest():
    sys.path.insert(0, str(ROOT))
    from perf import conftest as module

    return module


def test_the_machine_key_comes_from_the_environment_fingerprint():
    perf = conftest()
    from patchgate.store import environment

    key = perf.machine_key()
    fp = environment.fingerprint("transformers", "cpu")
    assert key == environment.machine_key(fp)
    assert f"-{os.cpu_count()}cpu-" in key and "/" not in key and " " not in key
    assert set(perf.machine_fingerprint()) == set(environment.timing_keys())

    class Engine:
        def timed_generate(self, batch, n):
            return Timing(0.25, (0,))

    t0 = perf.worker_clock()
    perf.timed(Engine(), [[1]], 1)
    assert perf.worker_clock() - t0 == 0.25  # the clock moves by the engine's own time only


def run_perf(*args: str, storage: Path, patches: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATCHGATE_PATCHES=str(patches), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "perf/", "-q", "-p", "no:cacheprovider",
           f"--benchmark-storage=file://{storage}", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)


def stored_run(path: Path, key: str | None, fingerprint: dict | None = None) -> None:
    """A stored pytest-benchmark run (no benchmarks) that recorded ``key``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"patchgate": {"key": key, "fingerprint": fingerprint}} if key else {}
    path.write_text(json.dumps({"machine_info": info, "benchmarks": [], "version": "5"}))


def test_compare_with_no_run_of_this_machine_compares_nothing_and_says_so(tmp_path):
    """Another machine's run is in the storage: it is listed with what differs, never
    compared; --benchmark-compare-fail fails the session. (--collect-only: the decision
    is made before any test runs.)"""
    perf = conftest()
    key = perf.machine_key()
    mine = perf.machine_fingerprint()
    # another CPU whatever this one is (CI's runners and this machine differ)
    theirs = dict(mine, cpu_family=(mine.get("cpu_family") or 0) + 1,
                  cpu_model_number=(mine.get("cpu_model_number") or 0) + 1,
                  cpu_avx512=not mine.get("cpu_avx512"))
    zen2 = "AMD-EPYC-2cpu-0123456789"
    stored_run(tmp_path / "store" / zen2 / "Linux-CPython-3.11-64bit" / "0001_accepted.json",
               zen2, theirs)
    stored_run(tmp_path / "store" / "AMD-EPYC-2cpu" / "Linux" / "0001_accepted.json", None)
    done = run_perf("--collect-only", "--benchmark-compare", "--benchmark-compare-fail=min:5%",
                    storage=tmp_path / "store", patches=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    (line,) = [x for x in out.splitlines() if x.startswith("patchgate: no stored run")]
    assert line == (f"patchgate: no stored run for this machine (key {key}) under "
                    f"{tmp_path / 'store'}: nothing compared; stored keys: AMD-EPYC-2cpu (no "
                    f"fingerprint recorded); {zen2} (differs in cpu_avx512, cpu_family, "
                    "cpu_model_number); `make accept` (pytest perf/ --benchmark-save=accepted) "
                    "stores one for this machine")
    assert "--benchmark-compare-fail: nothing to compare against, so the session fails" in out
    assert "Comparing against" not in out
    # without --benchmark-compare-fail it says the same and passes
    done = run_perf("--collect-only", "--benchmark-compare", storage=tmp_path / "store",
                    patches=tmp_path)
    assert done.returncode == 0 and "nothing compared" in done.stdout + done.stderr


def test_a_run_of_another_machine_named_by_path_is_refused(tmp_path):
    perf = conftest()
    key = perf.machine_key()
    stored_run(tmp_path / "store" / key / "Linux" / "0001_accepted.json", key)
    other = tmp_path / "elsewhere" / "0001_accepted.json"
    stored_run(other, "AMD-EPYC-2cpu-0123456789")
    done = run_perf("--collect-only", f"--benchmark-compare={other}",
                    storage=tmp_path / "store", patches=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert ("patchgate: a stored run of another machine (key AMD-EPYC-2cpu-0123456789) "
            f"cannot be compared with this one (key {key}): nothing compared") in out


@pytest.mark.slow
def test_accept_stores_a_run_of_this_machine_that_compare_then_uses(tmp_path):
    empty = tmp_path / "no_patches"
    empty.mkdir()
    store = tmp_path / "store"
    scenarios = ["-k", "prefill_b1 or decode_b1"]
    # a threshold no noise reaches (a busy 2-core machine ran one call 5x slower)
    compare = ["--benchmark-compare", "--benchmark-compare-fail=min:10000%", *scenarios]
    first = run_perf(*compare, storage=store, patches=empty)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out  # nothing to compare with: fails, says why
    assert "nothing compared" in out and not list(store.rglob("*.json"))  # stores nothing
    accept = run_perf("--benchmark-save=accepted", *scenarios, storage=store, patches=empty)
    assert accept.returncode == 0, accept.stdout + accept.stderr
    (saved,) = store.rglob("*accepted.json")
    assert saved.relative_to(store).parts[0] == conftest().machine_key()
    run = json.loads(saved.read_text())
    assert {b["name"] for b in run["benchmarks"]} == {"test_scenario[prefill_b1]",
                                                     "test_scenario[decode_b1]"}
    assert run["benchmarks"][0]["options"]["timer"].endswith("worker_clock")
    assert run["machine_info"]["patchgate"]["key"] == saved.relative_to(store).parts[0]
    second = run_perf(*compare, storage=store, patches=empty)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Comparing against benchmarks from" in second.stdout + second.stderr
