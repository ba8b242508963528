"""The sequential accuracy guard against a full pass, patch by patch: items evaluated,
accuracy wall time and the decision of each (the numbers of docs/STATISTICS.md and, on
a GPU profile, of docs/gpu-runs).

    python -m patchgate.tools.accuracy_stop [--profile default] [--repeats N]
        [--json OUT.json] PATCH.py [PATCH.py ...]

Each patch alone is loaded once (the profile's engine) and judged against the stored
reference of ``baselines/<profile>/reference.json`` (complete, so the pairing is the
gate's): after an untimed warm-up pass, the sequential guard as the gate runs it, then
every item (the full-set rule), alternately ``--repeats`` times on the same engine. One
line per patch: items, median seconds and decision of both, and whether they agree;
``--json`` keeps every repeat's times, the interval and the machine's fingerprint.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from ..engines import factory
from ..errors import PatchgateError
from ..guard import sequential
from ..guard.decision import AccuracyDecision, limit_of
from ..guard.lmeval import Tasks, make_lm, run_guard_tasks
from ..guard.results import paired_scores
from ..patches import discover
from ..profile import get_profile
from ..store import environment
from ..store.baselines import BaselineStore


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.accuracy_stop")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--baselines", type=Path, default=Path("baselines"))
    ap.add_argument("--repeats", type=int, default=1,
                    help="sequential and full passes, alternately, on the same engine")
    ap.add_argument("--json", type=Path, help="write the rows here (after each patch)")
    ap.add_argument("patches", nargs="+", type=Path)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        raise PatchgateError(f"--repeats {args.repeats}: at least 1")
    prof = get_profile(args.profile)
    stored = BaselineStore(args.baselines, prof.name).load("reference")
    if not stored or not stored.get("accuracy") or stored["accuracy"].get("partial"):
        raise PatchgateError(f"{args.baselines}/{prof.name}/reference.json: no complete "
                             "stored reference accuracy",
                             hint=f"run `patchgate guard --profile {prof.name} --accept` "
                             "with no patches first")
    reference = stored["accuracy"]
    spec = Tasks.of(prof)
    doc = {"profile": prof.name, "repeats": args.repeats,
           "environment": environment.fingerprint(prof.engine, prof.device), "rows": []}
    for path in args.patches:
        patch = next((p for p in discover(path.resolve().parent) if p.name == path.name), None)
        if patch is None:
            raise PatchgateError(f"{path}: not a patch of its folder",
                                 hint="name a NNNN-slug.py patch file")
        row = judge_patch(prof, patch, reference, spec, args.repeats)
        doc["rows"].append(row)
        print(line(row), flush=True)
        if args.json:
            args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def judge_patch(prof, patch, reference, spec: Tasks, repeats: int) -> dict:
    """One patch's row: the full set's ratio and decision, the sequential guard's items,
    decision and stop, and each repeat's seconds of both."""
    t0 = time.perf_counter()
    engine = factory.start(prof, [patch], "candidate").ready()
    start_s = time.perf_counter() - t0
    t_seq, t_full, items = [], [], []
    try:
        run_guard_tasks(engine, engine.tokenizer, spec)  # warm-up: caches, first calls
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = sequential.until_decided(make_lm(engine, engine.tokenizer, spec),
                                             reference, spec, prof, limit=limit_of(prof))
            t_seq.append(time.perf_counter() - t0)
            items.append(found.decision.items)
            t0 = time.perf_counter()
            full = run_guard_tasks(engine, engine.tokenizer, spec)
            t_full.append(time.perf_counter() - t0)
    finally:
        engine.close()
    ref, cand = paired_scores(reference, full)
    whole, early = AccuracyDecision.full_set(ref, cand, limit_of(prof)), found.decision
    return {"patch": patch.name, "items_total": len(ref),
            "full_ratio": whole.ratio, "full_decision": whole.outcome,
            "items_evaluated": early.items, "decision": early.outcome,
            "stopped": early.why, "interval": [early.low, early.high],
            "items_by_repeat": items, "sequential_s": [round(t, 3) for t in t_seq],
            "full_s": [round(t, 3) for t in t_full], "engine_start_s": round(start_s, 1)}


def line(row: dict) -> str:
    """One patch's row as the tool prints it."""
    seq, full = statistics.median(row["sequential_s"]), statistics.median(row["full_s"])
    n, total = row["items_evaluated"], row["items_total"]
    same = "same" if row["decision"] == row["full_decision"] else "DIFFERENT"
    return (f"{row['patch']}: full set {total} items, ratio {100 * row['full_ratio']:.2f} %, "
            f"{row['full_decision']}, {full:.1f} s | sequential {n} items "
            f"({100 * n / total:.0f} %), {row['decision']}, {seq:.1f} s ({row['stopped']}) | "
            f"{same} decision, full/sequential time {full / max(seq, 1e-9):.2f} "
            f"(medians of {len(row['full_s'])})")


if __name__ == "__main__":
    raise SystemExit(main())
