"""How often each patch's timed calls give the reference's first tokens: the numbers
behind :mod:`patchgate.latency.outputs` (kappa, agreement beyond chance).

    python -m patchgate.tools.answers [--profile default] [--patches model_patches]
                                      [--rounds 4]

Each patch alone and the unpatched model are timed side by side as the gate times them
(:func:`patchgate.latency.measure.measure`, fresh ids every round); one line per patch:
agreeing / compared first tokens in each timed round, the median round's kappa and each
scenario's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..engines import factory
from ..errors import PatchgateError
from ..latency import outputs
from ..latency.measure import Rounds, measure
from ..latency.scenarios import make_scenarios
from ..patches import discover
from ..profile import get_profile


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.answers")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--patches", type=Path, default=Path("model_patches"))
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    prof = get_profile(args.profile).with_overrides(rounds=args.rounds)
    scenarios = make_scenarios(prof)
    reference = factory.start(prof, [], "reference").ready()
    print(f"{prof.name}: vocabulary {reference.vocab_size}; the gate requires kappa >= "
          f"{outputs.KAPPA_FLOOR} in the median round and in each scenario")
    try:
        for patch in discover(args.patches.resolve()):
            if not patch.applies_to(prof.engine):
                print(f"{patch.name}: not for engine {prof.engine}")
                continue
            answers: dict = {}
            candidate = factory.start(prof, [patch], "candidate").ready()
            try:
                measure({"reference": reference, "candidate": candidate}, scenarios,
                        Rounds.of(prof), answers=answers)
            except PatchgateError as e:
                print(f"{patch.name}: {e.message}")
                continue
            finally:
                candidate.close()
            rounds = outputs.by_round(answers, "candidate", "reference")
            scen = outputs.by_scenario(answers, "candidate", "reference")
            print(f"{patch.name}: agreeing/compared by round "
                  f"{' '.join(f'{a.same}/{a.total}' for a in rounds)}; kappa: median round "
                  f"{_k(outputs.typical(rounds))}, by scenario "
                  + ", ".join(f"{n} {_k(a.kappa)}" for n, a in scen.items()), flush=True)
    finally:
        reference.close()
    return 0


def _k(kappa: float | None) -> str:
    return "n/a" if kappa is None else f"{kappa:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
