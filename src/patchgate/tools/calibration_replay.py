"""``patchgate calibrate --replay FILE``: measure nothing; decide the first look of every
run in a calibration file again, under the rule of the profile given (its test, rounds a
look, threshold and level), on the very rounds the run measured.

Each calibration run keeps its first look's rounds (``first_look_s``: per configuration
and scenario, the seconds of its timed calls, in round order). A GPU run costs five to
eight minutes of device time; replayed, it also says what another rule (the t-test's 4
rounds against the signed-rank test's 8, say) would have decided on the same rounds,
side by side: a paired comparison of two rules, where two calibrations would compare
two sets of draws. It is not an error rate of the other rule: a whole verdict also
takes further looks and a confirmation in fresh engines, which only a calibration of
that profile measures (``patchgate calibrate --profile``).

Pure but for reading the profile's scenarios: records in, decisions out.
"""

from __future__ import annotations

import math

from ..errors import PatchgateError
from ..latency import decide, looks
from ..latency.measure import balanced_rounds
from ..latency.scenarios import make_scenarios
from ..stats import median, order_effect
from ..verdict import evidence
from .calibration_summary import label, outcome_of

SLOWER, ACCEPTED, UNDECIDED = "slower", "accepted", "undecided"
FIRST_LOOKS = (SLOWER, ACCEPTED, UNDECIDED)
LABELS = ("candidate", "current")


def first_look(samples: dict, scenarios, rounds: int) -> dict:
    """A run's first ``rounds`` rounds of both configurations, per scenario, in seconds
    to 6 significant digits (what :func:`replay` decides again)."""
    return {lab: {s.name: [float(f"{x:.6g}") for x in samples[lab][s.name][:rounds]]
                  for s in scenarios} for lab in LABELS}


def replay(doc: dict, prof, source: str) -> dict:
    """Every run of the calibration ``doc`` (read from ``source``) that kept its first
    look, decided again by ``prof``'s first look on its first rounds: ``slower`` (the
    confirmation in fresh engines would follow), ``accepted`` (the score shown not
    slower, nothing slower, nothing left undecided for another look) or ``undecided``
    (another look would follow: the gate looks again while a scenario is undecided, as a
    scenario alone slower rejects); beside it what the run's whole verdict was. Per
    kind, the counts of both."""
    every = doc.get("runs", [])
    runs = [(i, r) for i, r in enumerate(every, start=1) if r.get("first_look_s")]
    if not runs:
        raise PatchgateError(f"{source}: none of its {len(every)} run(s) "
                             "kept its first look's rounds (first_look_s)",
                             hint="replay a calibration measured since 2026-12-07 (the "
                             "runs record them since then)")
    if doc.get("profile") != prof.name:
        raise PatchgateError(f"{source} is a calibration of profile {doc.get('profile')}; "
                             f"the rule given is {prof.name}'s",
                             hint="replay a calibration under a profile of the same name "
                             "(the same model and scenarios), e.g. a copy that sets "
                             "another test or rounds")
    scenarios = make_scenarios(prof)
    k = balanced_rounds(prof.rounds, len(LABELS))
    rows = [_one(run, i, scenarios, prof, k, source) for i, run in runs]
    kinds = {}
    for fraction in sorted({r["planted"] for r in rows}):
        mine = [r for r in rows if r["planted"] == fraction]
        kinds[label(fraction)] = {
            "planted": fraction, "runs": len(mine),
            "first_look": {w: sum(r["first_look"] == w for r in mine) for w in FIRST_LOOKS},
            "verdict": {w: sum(r["verdict"] == w for r in mine)
                        for w in (evidence.REJECTED, evidence.INCONCLUSIVE,
                                  evidence.ACCEPTED)}}
    return {"source": source, "profile": prof.name, "test": prof.test, "rounds": k,
            "threshold": prof.thresholds.latency, "alpha": prof.thresholds.alpha,
            "max_looks": prof.max_looks, "skipped": len(every) - len(runs),
            "kinds": kinds, "runs": rows,
            "order": order_effects([r for _, r in runs], [s.name for s in scenarios])}


def order_effects(runs: list[dict], names: list[str]) -> dict:
    """Per scenario, over the ``runs``' whole first looks (the candidate timed first in
    rounds 1, 3, ...: :func:`patchgate.latency.measure.orders`): the median of each
    run's order effect (:func:`patchgate.stats.order_effect`, in %: how much slower a
    configuration is timed second in a round than first) and of the spread of its
    paired log ratios before and after removing it (``sd``, ``sd_without``, %)."""
    out = {}
    for name in names:
        found = []
        for run in runs:
            c, u = run["first_look_s"]["candidate"][name], run["first_look_s"]["current"][name]
            diffs = [100 * math.log(a / b) for a, b in zip(c, u, strict=False)]
            if len(diffs) >= 5:
                found.append(order_effect(diffs))
        if found:
            out[name] = {"effect": median([f[0] for f in found]),
                         "sd": median([f[1] for f in found]),
                         "sd_without": median([f[2] for f in found]), "runs": len(found)}
    return out


def _one(run: dict, number: int, scenarios, prof, rounds: int, source: str) -> dict:
    """Run ``number`` of the file (counted from 1) decided again (:func:`replay`)."""
    kept = run["first_look_s"]
    where = f"{source}, run {number} of the file ({label(run['planted'])})"
    names = {s.name for s in scenarios}
    for lab in LABELS:
        missing = names - set(kept.get(lab, {}))
        if missing:
            raise PatchgateError(f"{where}: no {lab} rounds of {', '.join(sorted(missing))}",
                                 hint="replay it under a profile of the same scenarios "
                                 f"(it kept {', '.join(sorted(kept.get(lab, {}))) or 'none'})")
    have = min(len(kept[lab][n]) for lab in LABELS for n in names)
    if have < rounds:
        raise PatchgateError(f"{where}: it kept {have} rounds of its first look; "
                             f"{prof.name}'s first look takes {rounds}",
                             hint=f"replay with --rounds {have} or fewer")
    samples = {lab: {n: kept[lab][n][:rounds] for n in names} for lab in LABELS}
    result = looks.judged(samples, scenarios, prof)
    decisions = result.decisions["current"]
    slower = decide.slower(decisions)
    if slower:
        first = SLOWER
    elif decide.pending(decisions) and prof.max_looks > 1:
        first = UNDECIDED  # the gate looks again at what is undecided, a scenario too
    else:
        first = ACCEPTED if evidence.status(result) == evidence.ACCEPTED else UNDECIDED
    return {"run": number, "planted": run["planted"],
            "condition": run.get("condition", "quiet"), "first_look": first,
            "slower": slower,
            "score_ratio": decisions[decide.SCORE].comparison.ratio,
            "verdict": outcome_of(run), "verdict_looks": run.get("looks")}


def render(rep: dict) -> str:
    """The replay as a table: per kind, the first look's decisions under the profile's
    rule beside the runs' whole verdicts."""
    from tabulate import tabulate

    rows = []
    for name, k in rep["kinds"].items():
        f, v = k["first_look"], k["verdict"]
        rows.append([name, k["runs"], f[SLOWER], f[ACCEPTED], f[UNDECIDED],
                     f"{v[evidence.REJECTED]} / {v[evidence.INCONCLUSIVE]} / "
                     f"{v[evidence.ACCEPTED]}"])
    head = (f"{rep['source']}: the first look of {sum(k['runs'] for k in rep['kinds'].values())} "
            f"run(s) decided again under {rep['profile']}'s rule ({rep['test']} test, "
            f"{rep['rounds']} rounds, threshold {100 * rep['threshold']:g} %, level "
            f"{rep['alpha']:g} over {rep['max_looks']} look(s)); nothing measured")
    if rep["skipped"]:
        head += f"; {rep['skipped']} run(s) without their first look's rounds left out"
    table = tabulate(rows, headers=["kind", "runs", "first look: slower", "accepted",
                                    "undecided", "whole verdict: rejected / inconclusive / "
                                    "accepted"], tablefmt="github")
    order = tabulate([[name, f"{o['effect']:+.2f} %", f"{o['sd']:.2f} %",
                       f"{o['sd_without']:.2f} %"] for name, o in rep["order"].items()],
                     headers=["scenario", "timed second vs first", "spread of a round",
                              "without the order effect"], tablefmt="github")
    return (f"{head}\n\n{table}\n\n"
            "A first look found slower goes on to the confirmation in fresh engines, an "
            "undecided one to another look; the whole verdicts are the runs' own, under "
            "the rule they ran with. Not an error rate of this rule: only a calibration "
            "of its profile measures that.\n\n"
            f"The order within a round, over all {len(rep['runs'])} first looks (medians; "
            "the balanced order cancels the effect from the estimate, not from the "
            f"spread):\n\n{order}")
