"""Past one machine (patchgate.spread) on a Ray cluster simulated here: three nodes, each
offering one bench slot, whose workers build fake engines of exact speed
(:func:`fakes.install_in_worker`). One cluster for the whole session (it takes seconds to
start); the timing of the spreading is measured by ``python tests/measure_spread.py``,
not asserted here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchgate.errors import PatchgateError
from patchgate.profile import get_profile
from patchgate.spread import cluster
from patchgate.tools import calibrate

ray = pytest.importorskip("ray")  # the dev setup installs it: `make test` runs these
TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
PROFILE = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                settle_s=0.0)


@pytest.fixture(scope="module")
def three_nodes():
    """A head and two more nodes, each one CPU and one bench slot, and this process
    connected as the driver, its workers building fake engines."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {cluster.SLOT: 1}, "include_dashboard": False})
    nodes = [c.add_node(num_cpus=1, resources={cluster.SLOT: 1}) for _ in range(2)]
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False, runtime_env={
        "worker_process_setup_hook": "fakes.install_in_worker",
        "env_vars": {"PYTHONPATH": os.pathsep.join(
            x for x in (str(TESTS), str(SRC), os.environ.get("PYTHONPATH")) if x),
            "PATCHGATE_FAKE_BASE_S": "0.002"}})
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def test_a_calibration_spreads_whole_runs_over_the_nodes(three_nodes, tmp_path, reporter):
    plan = calibrate.Plan(runs=2, slowdowns=(0.5,), out=tmp_path / "cal.json", ray="auto")
    doc = calibrate.calibrate(PROFILE, tmp_path, plan, reporter)
    runs = doc["runs"]
    # the jobs' interleaved order (A/A, 50 %, A/A, 50 %), each run whole, on some node
    assert [(r["planted"], r["run"]) for r in runs] == [(0.0, 0), (0.5, 0), (0.0, 1),
                                                        (0.5, 1)]
    assert all(r["node"]["id"] and r["node"]["class"] for r in runs)
    assert len({r["node"]["id"] for r in runs}) >= 2  # spread
    assert len({r["node"]["class"] for r in runs}) == 1  # one machine: one class
    assert [r["outcome"] for r in runs] == ["accepted", "rejected", "accepted", "rejected"]
    assert json.loads((tmp_path / "cal.json").read_text())["runs"] == runs
    assert len([x for x in reporter.lines if x.startswith("calibrate ")]) == 4
    # nothing left behind: every bench slot is free again
    assert slots_free(3)


def test_a_cluster_without_a_bench_slot_is_refused_by_name(three_nodes):
    slots = cluster.connect("auto")
    assert len(slots) == 3 and set(slots.values()) == {1}
    with pytest.raises(PatchgateError, match="mixes hardware classes"):
        cluster.one_class({"A-1": ["run 1"], "B-2": ["run 2"]}, "this calibration")


def test_a_run_whose_node_dies_runs_again_elsewhere_or_fails_whole(three_nodes, tmp_path):
    """A node removed while the runs go on: each run is whole (the one it held runs
    again on another node: Ray retries a lost task), or the calibration is an error and
    writes nothing; never a record of half a run."""
    import threading

    c, nodes = three_nodes
    plan = calibrate.Plan(runs=3, slowdowns=(0.5,), out=tmp_path / "cal.json", ray="auto")
    slow = PROFILE.with_overrides(rounds=16)
    killer = threading.Timer(1.0, lambda: c.remove_node(nodes[-1]))
    killer.start()
    try:
        doc = calibrate.calibrate(slow, tmp_path, plan, _Lines())
    except PatchgateError as e:
        assert "failed on the Ray cluster" in e.message
        assert not (tmp_path / "cal.json").exists()
    else:  # every run whole: the one on the lost node ran again on another
        assert len(doc["runs"]) == 6
        assert all(r["outcome"] in ("accepted", "rejected", "inconclusive") and r["node"]
                   for r in doc["runs"])
    finally:
        killer.join()
    assert slots_free(2)  # the two nodes left hold nothing


def slots_free(n: int, wait_s: float = 10.0) -> bool:
    """All ``n`` bench slots free (the cluster's resource view lags a little)."""
    import time

    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        if ray.available_resources().get(cluster.SLOT, 0) >= n:
            return True
        time.sleep(0.2)
    return False


class _Lines:
    def say(self, text):
        pass

    def progress(self, total, desc):
        from patchgate.report.console import Silent

        return Silent(total)
