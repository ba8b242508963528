"""How much a calibration gains from a cluster: 6 runs serially here, then the same 6
runs spread over a simulated Ray cluster of 3 nodes (one bench slot each), with fake
engines whose calls sleep (``PATCHGATE_FAKE_BASE_S``), so that the spreading, not the
two cores of this machine, is what is timed. Prints one JSON line.

    python tests/measure_spread.py [--base-s 0.02] [--runs 3]
    python tests/measure_spread.py --accuracy [--batch-s 0.5]
    python tests/measure_spread.py --latency [--base-s 0.05]

``--accuracy``: the accuracy guard's tasks (lm-eval, the default suite, 600 items)
serially through one fake engine whose every batch sleeps ``--batch-s``, then through
a pool of three actors on the three nodes; the per-item scores compared.

``--latency``: one guard run of a planted 20 % slowdown (rejected: its confirmation in
fresh engines included) serially, then with ``--ray`` over benches on the three nodes;
the latency phases' seconds and the decisions compared.

Not a test (nothing asserted): docs/SPREAD.md quotes its numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PATHS = [str(TESTS), str(TESTS.parent / "src")]  # the workers' too
sys.path[:0] = PATHS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-s", type=float, default=0.02, help="seconds of a fake call")
    ap.add_argument("--runs", type=int, default=3, help="runs of each kind (2 kinds)")
    ap.add_argument("--accuracy", action="store_true", help="time the accuracy pool instead")
    ap.add_argument("--batch-s", type=float, default=0.5, help="seconds of a fake batch")
    ap.add_argument("--latency", action="store_true", help="time a verdict's latency instead")
    args = ap.parse_args()
    if args.accuracy:
        return accuracy(args)
    if args.latency:
        return latency(args)
    os.environ["PATCHGATE_FAKE_BASE_S"] = str(args.base_s)
    import fakes
    import ray

    from patchgate.profile import get_profile
    from patchgate.tools import calibrate

    prof = get_profile("default").with_overrides(rounds=8, warmup=1, max_looks=1,
                                                 settle_s=0.0)
    out = {"runs": 2 * args.runs, "base_s": args.base_s}
    with tempfile.TemporaryDirectory() as tmp:
        fakes.install_in_worker()  # the serial path: this process builds fake engines
        t0 = time.perf_counter()
        calibrate.calibrate(prof, Path(tmp), calibrate.Plan(
            runs=args.runs, slowdowns=(0.5,), out=Path(tmp) / "serial.json"), _Quiet())
        out["serial_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        c = _cluster({"PATCHGATE_FAKE_BASE_S": str(args.base_s)})
        out["cluster_start_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        doc = calibrate.calibrate(prof, Path(tmp), calibrate.Plan(
            runs=args.runs, slowdowns=(0.5,), out=Path(tmp) / "spread.json", ray="auto"),
            _Quiet())
        out["spread_s"] = round(time.perf_counter() - t0, 1)
        out["nodes_used"] = len({r["node"]["id"] for r in doc["runs"]})
        t0 = time.perf_counter()  # again, on the workers the first calibration started
        calibrate.calibrate(prof, Path(tmp), calibrate.Plan(
            runs=args.runs, slowdowns=(0.5,), out=Path(tmp) / "again.json", ray="auto"),
            _Quiet())
        out["spread_again_s"] = round(time.perf_counter() - t0, 1)
        out["again_over_serial"] = round(out["spread_again_s"] / out["serial_s"], 2)
        out["spread_over_serial"] = round(out["spread_s"] / out["serial_s"], 2)
        out["with_start_over_serial"] = round(
            (out["spread_s"] + out["cluster_start_s"]) / out["serial_s"], 2)
        ray.shutdown()
        c.shutdown()
    print(json.dumps(out))
    return 0


def _cluster(env: dict):
    import ray
    from ray.cluster_utils import Cluster

    from patchgate.spread.cluster import SLOT

    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {SLOT: 1}, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1, resources={SLOT: 1})
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "fakes.install_in_worker",
                          "env_vars": {"PYTHONPATH": os.pathsep.join(PATHS + [
                              os.environ.get("PYTHONPATH", "")]), **env}})
    return c


def accuracy(args) -> int:
    os.environ["PATCHGATE_FAKE_BATCH_S"] = str(args.batch_s)
    import fakes
    import ray

    from patchgate.guard.lmeval import Tasks, run_guard_tasks
    from patchgate.guard.sequential import scores
    from patchgate.profile import get_profile
    from patchgate.spread.accuracy import EnginePool

    prof = get_profile("default")
    spec = Tasks.of(prof)
    out = {"batch_s": args.batch_s, "actors": 3}
    here = fakes.FakeEngine(prof, [], "reference")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(prof.model_path(), trust_remote_code=True)
    t0 = time.perf_counter()
    serial = run_guard_tasks(here, tok, spec)
    out["serial_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    c = _cluster({"PATCHGATE_FAKE_BATCH_S": str(args.batch_s)})
    out["cluster_start_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    pool = EnginePool(prof, [], "reference", actors=3)
    out["pool_start_s"] = round(time.perf_counter() - t0, 1)
    try:
        t0 = time.perf_counter()
        spread = run_guard_tasks(pool, pool.tokenizer, spec)
        out["spread_s"] = round(time.perf_counter() - t0, 1)
        out["batches_per_node"] = sorted(pool.spread()["batches_per_node"].values())
    finally:
        pool.close()
    out["items"] = sum(len(t) for t in scores(serial).values())
    out["identical_scores"] = scores(spread) == scores(serial)
    out["spread_over_serial"] = round(out["spread_s"] / out["serial_s"], 2)
    out["with_pool_start_over_serial"] = round(
        (out["spread_s"] + out["pool_start_s"]) / out["serial_s"], 2)
    ray.shutdown()
    c.shutdown()
    print(json.dumps(out))
    return 0


def latency(args) -> int:
    os.environ["PATCHGATE_FAKE_BASE_S"] = str(args.base_s)
    import fakes
    import ray
    from transformers import AutoTokenizer

    from patchgate.gate import GuardOptions, run_guard
    from patchgate.profile import get_profile
    from patchgate.report.console import Reporter

    prof = get_profile("default").with_overrides(rounds=12, warmup=1, max_looks=1,
                                                 settle_s=0.0, tasks=("fact_mc",))
    fakes.install_in_worker()  # the serial run: this process builds fake engines
    fakes.FakeEngine.tokenizer = AutoTokenizer.from_pretrained(prof.model_path(),
                                                               trust_remote_code=True)
    out = {"base_s": args.base_s, "rounds": prof.rounds, "nodes": 3}
    with tempfile.TemporaryDirectory() as tmp:
        folder = fakes.write_patch(Path(tmp) / "patches", "0001-slow-20.py")

        def run(name, **kw):
            return run_guard(GuardOptions(
                profile=prof, patches_dir=folder, baselines_dir=Path(tmp) / name,
                changelog=Path(tmp) / f"{name}.md", base="worktree", quiet=True, **kw),
                Reporter(quiet=True))

        serial = run("serial")
        c = _cluster({"PATCHGATE_FAKE_BASE_S": str(args.base_s)})
        spread = run("spread", ray="auto")
        ray.shutdown()
        c.shutdown()
    for name, v in (("serial", serial), ("spread", spread)):
        t = v["timings_s"]
        out[f"{name}_latency_s"] = round(t.get("latency", 0) + t.get("confirm", 0), 1)
        out[f"{name}_engines_s"] = round(t.get("engines", 0) + t.get("confirm_engines", 0), 1)
        out[f"{name}_verdict"] = v["verdict"]
    out["same_decisions"] = [r["outcome"] for r in serial["scenarios"]] == \
        [r["outcome"] for r in spread["scenarios"]]
    out["blocks"] = [(b["node"][:6], b["rounds"]) for b in spread["latency"]["spread"]["blocks"]]
    out["spread_over_serial"] = round(out["spread_latency_s"] / out["serial_latency_s"], 2)
    print(json.dumps(out))
    return 0


class _Quiet:
    def say(self, text):
        pass

    def progress(self, total, desc):
        from patchgate.report.console import Silent

        return Silent(total)


if __name__ == "__main__":
    raise SystemExit(main())
