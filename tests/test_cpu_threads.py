"""The CPU threads of a run's engines (patchgate.engines.cpu): one per core that other
work leaves free, decided once per run so every configuration runs with the same count."""

from __future__ import annotations

import sys

import pytest
from fakes import use_fake_engines

from patchgate.engines import cpu
from patchgate.engines.configurations import Configurations
from patchgate.profile import get_profile

PROFILE = get_profile("default")


@pytest.mark.parametrize(("cores", "busy", "threads"), [
    (2, 0.0, 2), (2, 0.3, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1), (2, 5.0, 1),
    (2, None, 2), (8, 2.6, 5), (16, 0.2, 16), (1, 1.0, 1)])
def test_one_thread_per_free_core(cores, busy, threads):
    assert cpu.threads_for(cores, busy) == threads


def test_busy_cores_reads_the_usable_cpus_over_the_window(monkeypatch):
    ticks = iter([(100, 1000), (175, 1100)])  # 75 of 100 jiffies busy, on 2 cores
    monkeypatch.setattr(cpu, "_ticks", lambda cpus: next(ticks))
    monkeypatch.setattr(cpu, "usable_cores", lambda: [0, 1])
    assert cpu.busy_cores(0.0) == pytest.approx(1.5)
    monkeypatch.setattr(cpu, "_ticks", lambda cpus: None)  # no /proc/stat
    assert cpu.busy_cores(0.0) is None


def test_ticks_sum_the_named_cpus_only(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  9 9 9 9 9 9 9 9 0 0\n"
                    "cpu0 10 0 10 70 10 0 0 0 0 0\n"   # 20 busy of 100 (iowait is idle)
                    "cpu1 50 0 0 40 0 0 0 10 0 0\n"    # 60 busy of 100 (steal is busy)
                    "cpu2 100 0 0 0 0 0 0 0 0 0\nintr 1 2 3\n")
    monkeypatch.setattr(cpu, "_STAT", stat)
    assert cpu._ticks([0, 1]) == (80, 200)
    assert cpu._ticks([7]) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_busy_process_beside_the_run_is_seen():
    from patchgate.tools.load import cpu_load

    with cpu_load(1):
        busy = cpu.busy_cores(0.5)
    assert busy is not None and busy >= 0.4


def test_a_profile_that_sets_threads_or_runs_on_a_gpu_is_left_alone(monkeypatch):
    monkeypatch.setattr(cpu, "busy_cores", lambda *a, **k: pytest.fail("measured"))
    fixed = PROFILE.with_overrides(threads=3)
    assert cpu.pin(fixed) == (fixed, None)
    gpu = PROFILE.with_overrides(device="cuda")
    assert cpu.pin(gpu) == (gpu, None)


def test_busy_cores_leave_fewer_threads_and_say_so(monkeypatch):
    monkeypatch.setattr(cpu, "usable_cores", lambda: [0, 1])
    monkeypatch.setattr(cpu, "busy_cores", lambda *a, **k: 1.02)
    pinned, note = cpu.pin(PROFILE)
    assert pinned.threads == 1 and PROFILE.threads is None
    assert "1.0 of the 2 cores busy" in note and "1 CPU thread instead of 2" in note
    monkeypatch.setattr(cpu, "busy_cores", lambda *a, **k: 0.05)
    assert cpu.pin(PROFILE) == (PROFILE.with_overrides(threads=2), None)


def test_every_engine_of_a_run_gets_the_count_of_its_first_start(monkeypatch, reporter):
    built = use_fake_engines(monkeypatch)
    monkeypatch.setattr(cpu, "usable_cores", lambda: [0, 1])
    loads = iter([1.0, 0.0])  # busy at the first start, quiet at the confirmation's
    monkeypatch.setattr(cpu, "busy_cores", lambda *a, **k: next(loads))
    sets = {"candidate": [], "current": [], "reference": []}
    with Configurations(PROFILE, sets, reporter.say) as configs:
        configs.start()
        configs.start(("candidate",))  # a confirmation's fresh processes
        assert configs.notes and "1 CPU thread" in configs.notes[0]
        assert configs.cpu_threads == 1
    assert [e.profile.threads for e in built] == [1, 1]
    assert reporter.lines[0] == configs.notes[0]
