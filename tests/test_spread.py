"""Past one machine (patchgate.spread) on a Ray cluster simulated here: three nodes, each
offering one bench slot, whose workers build fake engines of exact speed
(:func:`fakes.install_in_worker`). One cluster for the whole session (it takes seconds to
start); the timing of the spreading is measured by ``python tests/measure_spread.py``,
not asserted here."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from fakes import LinesReporter

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
    store = 80 * 2**20  # a small object store per node: CI's runner has 24 GiB in all
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {cluster.SLOT: 1}, "include_dashboard": False,
        "object_store_memory": store})
    nodes = [c.add_node(num_cpus=1, resources={cluster.SLOT: 1}, object_store_memory=store)
             for _ in range(2)]
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False, runtime_env={
        "worker_process_setup_hook": "fakes.install_in_worker",
        "env_vars": {"PYTHONPATH": os.pathsep.join(
            x for x in (str(TESTS), str(SRC), os.environ.get("PYTHONPATH")) if x),
            "PATCHGATE_FAKE_BASE_S": "0.002"}})
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def test_a_calibration_spreads_whole_runs_over_the_nodes(three_nodes, tmp_path, reporter,
                                                         monkeypatch):
    from patchgate.spread import runs as spread_runs

    monkeypatch.setattr(spread_runs, "HEARTBEAT_S", 0.2)  # a minute on a GPU
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
    # while the runs are out, a line now and then says how many came back
    assert any(re.match(r"on the cluster: [0-3]/4 run\(s\) done, [1-4] running or waiting", x)
               for x in reporter.lines), reporter.lines
    # nothing left behind: every bench slot is free again
    assert slots_free(3)


def test_spread_runs_go_longest_first_and_come_back_in_job_order():
    """Planted runs (they confirm in fresh engines: the long ones) go to the nodes
    first, each kind in job order."""
    from patchgate.spread.runs import longest_first

    jobs = [(None, f, "quiet", 0, i) for i in range(3) for f in (0.0, 0.05, 0.1)]
    order = longest_first(jobs, lambda job: job[1] != 0.0)
    assert [jobs[i][1] for i in order] == [0.05, 0.1] * 3 + [0.0] * 3
    assert sorted(order) == list(range(len(jobs)))
    assert [jobs[i][4] for i in order[:6]] == [0, 0, 1, 1, 2, 2]
    assert longest_first(jobs, lambda job: False) == list(range(len(jobs)))


def test_a_cluster_without_a_bench_slot_is_refused_by_name(three_nodes):
    slots = cluster.connect("auto")
    assert len(slots) == 3 and set(slots.values()) == {1}
    with pytest.raises(PatchgateError, match="mixes hardware classes"):
        cluster.one_class({"A-1": ["run 1"], "B-2": ["run 2"]}, "this calibration")


def test_a_pool_answers_every_batch_whole_and_in_the_serial_order(three_nodes):
    from fakes import FakeEngine

    from patchgate.spread.accuracy import EnginePool

    pool = EnginePool(PROFILE, [], "reference", actors=3)
    batches = [([([i, j], [j, i + 1]) for j in range(3)],) for i in range(12)]
    ticks: list[int] = []
    try:
        got = pool.answer_all("loglikelihood", batches, ticks.append)
        info = pool.spread()
    finally:
        pool.close()
    local = FakeEngine(PROFILE, [], "reference")
    assert got == [local.loglikelihood(*b) for b in batches]
    assert ticks == [3] * 12  # one tick per batch, its requests
    assert info["actors"] == 3 and len(info["nodes"]) == 3 and len(info["classes"]) == 1
    assert sum(info["batches_per_node"].values()) == 12 and info["lost_nodes"] == []
    assert actors_alive() == 0  # nothing left behind


def test_accuracy_engines_get_a_gpu_each_or_share_one_or_are_refused():
    from patchgate.spread.accuracy import gpu_share

    assert gpu_share(gpus=8, actors=4) == gpu_share(gpus=2, actors=1) == 1.0
    assert gpu_share(gpus=1, actors=1) == gpu_share(gpus=7, actors=4) == 0.5
    with pytest.raises(PatchgateError, match="need at least 2 GPU.*has 1"):
        gpu_share(gpus=1, actors=2)


def test_both_pools_of_a_gpu_run_share_the_one_gpu_a_cluster_has(three_nodes, monkeypatch):
    """``guard --ray`` on a one-GPU machine: the candidate's and the reference's engines
    each take half of the cluster's one GPU (a node that offers it, logically, here) and
    half its memory; the cluster without that node has no GPU: refused before any
    engine starts."""
    from patchgate.spread import accuracy
    from patchgate.spread.accuracy import pools

    monkeypatch.setattr(accuracy, "START_TIMEOUT_S", 60.0)  # an engine left unplaced: fail
    c, _ = three_nodes
    gpu_prof = PROFILE.with_overrides(device="cuda")
    with pytest.raises(PatchgateError, match="need at least 1 GPU.*has 0"):
        pools("auto")(gpu_prof, [], "candidate")
    assert actors_alive() == 0
    node = c.add_node(num_cpus=2, num_gpus=1, object_store_memory=80 * 2**20)
    c.wait_for_nodes()
    lines: list[str] = []
    made = []
    try:
        make = pools("auto", say=lines.append)
        made = [make(gpu_prof, [], label) for label in ("candidate", "reference")]
        batch = ([([1, 2], [3])],)
        got = [pool.answer_all("loglikelihood", [batch]) for pool in made]
        where = [pool.spread() for pool in made]
    finally:
        for pool in made:
            pool.close()
        c.remove_node(node)
    assert got[0] == got[1]
    assert [w["gpu_share"] for w in where] == [0.5, 0.5]
    assert where[0]["nodes"] == where[1]["nodes"]  # both on the node with the GPU
    assert all("0.5 of a GPU each" in line for line in lines) and len(lines) == 2
    assert actors_alive() == 0


def test_the_real_model_on_a_pool_gives_every_item_the_serial_score(three_nodes):
    """The default model through transformers and lm-eval: serially here, then spread
    over two actors on two nodes (a runtime_env of their own keeps the fakes out)."""
    from patchgate.engines import factory
    from patchgate.guard.lmeval import Tasks, run_guard_tasks
    from patchgate.guard.sequential import scores
    from patchgate.spread.accuracy import EnginePool

    prof = get_profile("default").with_overrides(threads=1, tasks=("fact_mc", "addition"))
    spec = Tasks.of(prof)
    here = factory.start(prof, [], "reference").ready()
    try:
        serial = run_guard_tasks(here, here.tokenizer, spec)
    finally:
        here.close()
    pool = EnginePool(prof, [], "reference", actors=2, options={
        "runtime_env": {"env_vars": {"PATCHGATE_REAL_ENGINES": "1"}}})
    try:
        spread = run_guard_tasks(pool, pool.tokenizer, spec)
        info = pool.spread()
    finally:
        pool.close()
    assert len(info["nodes"]) == 2 and len(info["batches_per_node"]) == 2
    assert scores(spread) == scores(serial)  # every item, both tasks
    assert sum(len(t) for t in scores(serial).values()) == 200
    assert actors_alive() == 0


def test_a_gate_run_with_ray_spreads_accuracy_to_the_serial_verdict(three_nodes, tmp_path,
                                                                   monkeypatch):
    """``guard --ray``: latency over the benches, accuracy in one actor per
    configuration; the accuracy block is the serial run's, and it says where it ran."""
    run = gate_runs(monkeypatch, tmp_path, ("fact_mc", "addition"), "0001-faster-20.py")
    spread, serial = run("ray", ray="auto", ray_actors=1), run("serial")
    a, b = spread["accuracy"], serial["accuracy"]
    assert a["spread"].keys() == {"candidate", "current+reference"}
    assert all(v["actors"] == 1 and len(v["classes"]) == 1 for v in a["spread"].values())
    assert "spread" not in b
    assert (a["ratio"], a["items_evaluated"], a["decision"]) == \
        (b["ratio"], b["items_evaluated"], b["decision"])
    assert spread["verdict"] == serial["verdict"]
    assert actors_alive() == 0


def test_a_look_is_cut_into_blocks_numbered_apart_one_a_node():
    """Each node measures whole rounds, its own warm-up first; no two blocks share a
    round number (each round draws its own token ids); one node is the look itself."""
    from patchgate.latency.measure import Rounds
    from patchgate.spread.latency import blocks

    look = Rounds(timed=8, warmup=1, first=100)
    parts = blocks(look, 3, 2)
    assert [(p.timed, p.warmup, p.first) for p in parts] == [(4, 1, 100), (4, 1, 105),
                                                              (4, 1, 110)]
    numbers = [set(range(p.first, p.first + p.warmup + p.timed)) for p in parts]
    assert not (numbers[0] & numbers[1] or numbers[1] & numbers[2])
    assert blocks(look, 1, 2) == [look]
    assert [p.timed for p in blocks(Rounds(timed=8), 3, 3)] == [3, 3, 3]  # balanced


def test_a_gate_run_with_ray_times_every_round_on_one_node(three_nodes, tmp_path,
                                                           monkeypatch):
    """``guard --ray``: latency in a bench on each of the three nodes, a block of rounds
    each, and the confirmation's fresh engines there too; the same decisions as the
    serial run (fakes of exact speed), the verdict says where every block ran; one
    bench gives the serial run's rounds; nothing left on the cluster."""
    run = gate_runs(monkeypatch, tmp_path, ("fact_mc",), "0001-slow-20.py")
    spread, serial = run("ray", ray="auto"), run("serial")
    assert spread["verdict"] == serial["verdict"] == "rejected"
    outcomes = [(r["name"], r["outcome"]) for r in spread["scenarios"]]
    assert outcomes == [(r["name"], r["outcome"]) for r in serial["scenarios"]]
    assert spread["latency"]["score"]["outcome"] == serial["latency"]["score"]["outcome"]
    where = spread["latency"]["spread"]
    assert len(where["nodes"]) == 3 and len(where["classes"]) == 1
    # the first look (8 rounds: 4 on each node, 12 in all) and the confirmation's
    assert [b["rounds"] for b in where["blocks"]] == [4] * 6
    assert len({b["first_round"] for b in where["blocks"]}) == 6
    assert {b["node"] for b in where["blocks"]} == set(where["nodes"])
    assert where["rounds_on_one_node"] == 1.0
    assert spread["latency"]["score"]["rounds"] == 12
    assert "spread" not in serial["latency"]
    assert any("Ray node" in m for m in [spread["measured"]["latency"]])
    one = run("one", ray="auto", ray_benches=1)
    assert [b["rounds"] for b in one["latency"]["spread"]["blocks"]] == [8, 8]
    assert one["latency"]["score"]["rounds"] == serial["latency"]["score"]["rounds"] == 8
    assert one["verdict"] == "rejected"
    assert actors_alive() == 0 and slots_free(3)


def test_what_a_spread_run_cannot_do_is_refused_before_it_starts(three_nodes, tmp_path):
    from patchgate.gate import GuardOptions, run_guard
    from patchgate.report.console import Reporter

    folder = fakes_write(tmp_path / "patches", "0001-same.py")
    with pytest.raises(PatchgateError, match="--explain with --ray"):
        run_guard(GuardOptions(profile=PROFILE, patches_dir=folder, baselines_dir=tmp_path /
                               "b", changelog=tmp_path / "c.md", base="worktree",
                               quiet=True, ray="auto", explain=True), Reporter(quiet=True))
    assert not (tmp_path / "b").exists()


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
        doc = calibrate.calibrate(slow, tmp_path, plan, LinesReporter())
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




def test_a_pool_whose_node_dies_answers_on_the_others_or_fails_whole(three_nodes):
    """After the node test above two nodes are left: a pool of one actor on each, the
    non-head node removed while the batches go on; every batch is answered whole by the
    actor left (or the run is an error naming the lost nodes), never half an answer."""
    import threading

    from fakes import FakeEngine

    from patchgate.spread.accuracy import EnginePool

    c, nodes = three_nodes
    alive = [n for n in nodes if n in c.worker_nodes]
    pool = EnginePool(PROFILE, [], "reference", actors=2, options={"runtime_env": {
        "env_vars": {"PATCHGATE_FAKE_BATCH_S": "0.2"}}})
    batches = [([([i], [i + 1])],) for i in range(20)]
    killer = threading.Timer(1.0, lambda: c.remove_node(alive[-1]))
    killer.start()
    try:
        got = pool.answer_all("loglikelihood", batches)
        info = pool.spread()
    except PatchgateError as e:
        assert "was lost" in e.message
    else:
        local = FakeEngine(PROFILE, [], "reference")
        assert got == [local.loglikelihood(*b) for b in batches]
        assert len(info["lost_nodes"]) == 1
    finally:
        killer.join()
        pool.close()
    assert actors_alive() == 0


def actors_alive(wait_s: float = 15.0) -> int:
    """Engine actors still alive on the cluster, from the GCS's actor table (the state
    API needs the dashboard, which these nodes do not run; the table lags a little)."""
    import time

    from ray._private import state

    end = time.monotonic() + wait_s
    while True:
        n = len([a for a in state.actors().values()
                 if a.get("State") != "DEAD" and
                 any(k in a.get("ActorClassName", "") for k in ("EngineActor", "BenchActor"))])
        if n == 0 or time.monotonic() > end:
            return n
        time.sleep(0.3)


def fakes_write(folder, name):
    from fakes import write_patch

    return write_patch(folder, name)


BENCH_NAME = "candidate+current+reference"  # one engine serves all three here


def doomed_bench(c, benches: int, **options):
    """(node, bench, killer): a node that joins ``c`` (a bench slot, and a ``doomed``
    resource to hold a bench there), a bench of ``benches`` actors on fakes of 50 ms a
    call (``options`` on top of Ray's), and a timer that removes the node one second
    after it is started."""
    import threading

    from patchgate.spread.latency import Bench

    node = c.add_node(num_cpus=1, resources={cluster.SLOT: 1, "doomed": 1},
                      object_store_memory=80 * 2**20)
    c.wait_for_nodes()
    bench = Bench(PROFILE, {"candidate": [], "current": [], "reference": []},
                  {BENCH_NAME: "candidate"}, benches, options={
                      "runtime_env": {"env_vars": {"PATCHGATE_FAKE_BASE_S": "0.05"}},
                      **options})
    return node, bench, threading.Timer(1.0, lambda: c.remove_node(node))


def test_a_bench_whose_node_dies_has_its_block_measured_again_on_another(three_nodes):
    """Last but one (the node tests above leave the head alone): a node joins again, a
    bench on it and one on the head, and the joined node removed while they measure: its
    block runs again, whole and with its own round numbers, on the head's bench; the
    look's samples are complete, the record names the lost node, the next look and a
    restart use the bench left; no actor left."""
    from patchgate.latency.measure import Rounds
    from patchgate.latency.scenarios import make_scenarios

    extra, bench, killer = doomed_bench(three_nodes[0], 2)
    name = BENCH_NAME
    scenarios = make_scenarios(PROFILE)
    try:
        bench.start(None)
        assert extra.node_id in {n["id"] for n in bench.nodes} and len(bench.nodes) == 2
        killer.start()
        got = bench.measure({name: bench}, scenarios, Rounds(timed=40, first=100))
        assert {len(xs) for xs in got[name].values()} == {40}
        (left,) = bench.nodes
        assert bench.lost_nodes == [extra.node_id] and left["id"] != extra.node_id
        again = [b for b in bench.record if "rerun_of" in b]
        assert [(b["rerun_of"], b["node"]) for b in again] == [(extra.node_id, left["id"])]
        assert sorted(b["first_round"] for b in bench.record) == [100, 120]
        # the next look and a restart: on the bench left
        bench.start(None)
        more = bench.measure({name: bench}, scenarios, Rounds(timed=4, first=1000))
        assert {len(xs) for xs in more[name].values()} == {4}
        assert bench.spread()["lost_nodes"] == [extra.node_id]
        assert {b["node"] for b in bench.record} == {left["id"]}
    finally:
        killer.join()
        bench.close()
    assert actors_alive() == 0


def test_a_bench_whose_node_dies_with_none_left_ends_the_run_whole(three_nodes):
    """Last: one bench, held on a node that joins for it, and that node removed while it
    measures: no bench left to measure its block again, so the look is an error that
    names the node, never samples of half a look; no actor left."""
    from patchgate.latency.measure import Rounds
    from patchgate.latency.scenarios import make_scenarios

    extra, bench, killer = doomed_bench(three_nodes[0], 1,
                                        resources={cluster.SLOT: 1, "doomed": 1})
    name = BENCH_NAME
    try:
        bench.start(None)
        assert [n["id"] for n in bench.nodes] == [extra.node_id]
        killer.start()
        with pytest.raises(PatchgateError, match="no other bench of its class") as e:
            bench.measure({name: bench}, make_scenarios(PROFILE), Rounds(timed=40))
        assert extra.node_id in e.value.message
        assert bench.record == []  # no block of that look counted
    finally:
        killer.join()
        bench.close()
    assert actors_alive() == 0


def gate_runs(monkeypatch, tmp_path, tasks, patch: str):
    """``run(name, **options)``: a gate run on fake engines of one planted ``patch``
    over ``tasks``, its baselines and change log under ``tmp_path / name``; the serial
    run's fakes encode the prompts as the pools do (the model's tokenizer)."""
    from fakes import FakeEngine, use_fake_engines
    from transformers import AutoTokenizer

    from patchgate.gate import GuardOptions, run_guard
    from patchgate.report.console import Reporter

    use_fake_engines(monkeypatch)
    prof = PROFILE.with_overrides(tasks=tuple(tasks))
    monkeypatch.setattr(FakeEngine, "tokenizer", AutoTokenizer.from_pretrained(
        prof.model_path(), trust_remote_code=True))
    folder = tmp_path / "patches"
    fakes_write(folder, patch)

    def run(name, **kw):
        return run_guard(GuardOptions(profile=prof, patches_dir=folder,
                                      baselines_dir=tmp_path / name, changelog=tmp_path /
                                      f"{name}.md", base="worktree", quiet=True, **kw),
                         Reporter(quiet=True))

    return run
