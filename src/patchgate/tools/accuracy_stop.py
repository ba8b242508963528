"""The sequential accuracy guard against a full pass, patch by patch: items evaluated,
accuracy wall time and the decision of each (the numbers of docs/STATISTICS.md).

    python -m patchgate.tools.accuracy_stop [--profile default] PATCH.py [PATCH.py ...]

Each patch alone is loaded once (the profile's engine) and judged against the stored
reference of ``baselines/<profile>/reference.json`` (complete, so the pairing is the
gate's): after an untimed warm-up pass, first the sequential guard as the gate runs it,
then every item, the full-set rule. One line per patch: items, seconds and decision of
both, and whether they agree.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..engines import factory
from ..errors import PatchgateError
from ..guard import sequential
from ..guard.lmeval import Tasks, make_lm, run_guard_tasks
from ..guard.results import paired_scores
from ..patches import discover
from ..profile import get_profile
from ..stats.strata import full_set_decision
from ..store.baselines import BaselineStore


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.accuracy_stop")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--baselines", type=Path, default=Path("baselines"))
    ap.add_argument("patches", nargs="+", type=Path)
    args = ap.parse_args(argv)
    prof = get_profile(args.profile)
    stored = BaselineStore(args.baselines, prof.name).load("reference")
    if not stored or not stored.get("accuracy") or stored["accuracy"].get("partial"):
        raise PatchgateError(f"{args.baselines}/{prof.name}/reference.json: no complete "
                             "stored reference accuracy",
                             hint=f"run `patchgate guard --profile {prof.name} --accept` "
                             "with no patches first")
    reference = stored["accuracy"]
    spec = Tasks.of(prof)
    for path in args.patches:
        patch = next((p for p in discover(path.resolve().parent) if p.name == path.name), None)
        if patch is None:
            raise PatchgateError(f"{path}: not a patch of its folder",
                                 hint="name a NNNN-slug.py patch file")
        engine = factory.start(prof, [patch], "candidate").ready()
        try:
            run_guard_tasks(engine, engine.tokenizer, spec)  # warm-up: caches, first calls
            t0 = time.perf_counter()
            found = sequential.run(make_lm(engine, engine.tokenizer, spec), reference,
                                   spec, prof)
            t_seq = time.perf_counter() - t0
            t0 = time.perf_counter()
            full = run_guard_tasks(engine, engine.tokenizer, spec)
            t_full = time.perf_counter() - t0
        finally:
            engine.close()
        ref, cand = paired_scores(reference, full)
        ratio = sum(cand) / sum(ref)
        whole = full_set_decision([ref], [cand], [1.0], prof.thresholds.accuracy_reject)
        r = found.result
        print(f"{patch.name}: full set {len(ref)} items, ratio {100 * ratio:.2f} %, {whole}, "
              f"{t_full:.0f} s | sequential {r.items_evaluated} items "
              f"({100 * r.items_evaluated / r.items_total:.0f} %), {r.decision}, "
              f"{t_seq:.0f} s ({r.stopped}) | {'same' if r.decision == whole else 'DIFFERENT'}"
              f" decision, full/sequential time {t_full / max(t_seq, 1e-9):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
