"""``--attribute``: which of several new patches cost what.

A pull request with new patches N1..Nk gets one verdict for all of them. With
``--attribute`` the gate also measures the prefixes of the stack, in order: P0 (the
current baseline), P1 = P0 + N1, ..., Pk = P0 + N1..Nk (the candidate), side by side,
interleaved, one look of ``rounds`` rounds; and runs the accuracy guard on P0..Pk-1
(Pk is the candidate, already measured). Patch j's effect is Pj against Pj-1: its
paired latency ratio per scenario, its pooled score change, and its accuracy change
(each prefix's accuracy as a fraction of the reference's).

These numbers describe; they never change the verdict, which stays the one decision
on the whole change. A patch whose effect depends on an earlier one (a fused kernel
that only helps once the unfused path is gone) is attributed in stack order, as it
would land. A stage of its own: it measures (engines, latency, the guard) after the
verdict's measurements, and the gate puts its rows into the document.
"""

from __future__ import annotations

from collections.abc import Callable

from . import stats
from .engines.configurations import Configurations
from .engines.factory import start_all
from .guard import base as guards
from .guard.base import Outcome
from .latency import decide
from .latency.measure import Rounds, balanced_rounds, measure
from .latency.scenarios import make_scenarios
from .patches import Patch
from .profile import Profile

A = 0.025  # each bound of the descriptive 95 % intervals


def attribute(configs: Configurations, new: list[Patch], found: Outcome, reporter,
              notes: list[str]) -> list[dict] | None:
    """``--attribute`` in a run whose accuracy guard ``found`` both results: each new
    patch's own effect (descriptive), or None (with a note) where there is one new patch."""
    prof = configs.profile
    if len(new) < 2:
        notes.append(f"--attribute: {len(new)} new patch(es): the verdict is its effect")
        return None
    guard = guards.get(prof.guard)
    if not guard.judges_alone:
        notes.append(f"--attribute: the {guard.name} guard cannot judge one prefix alone; "
                     "latency only")
    reporter.say(cost(prof, new))
    reporter.phase("attribution", f"attribution: {len(new)} new patches, one prefix at a time")

    def accuracy(engine):
        return guard.result_of(engine, prof, reporter) or {"mean": 0.0}

    return prefixes(configs, new, accuracy,
                    {"reference": found.reference, "candidate": found.candidate}, reporter)


def cost(prof: Profile, new: list[Patch]) -> str:
    """The extra work, said before the run starts."""
    k = len(new)
    n = k + 1
    calls = balanced_rounds(prof.rounds, n) * len(make_scenarios(prof)) * n
    return (f"--attribute: {k} new patches, so {k - 1} more engine(s) for the prefixes of the "
            f"stack; one look of {calls} more timed calls ({n} configurations) and {k} more "
            "accuracy runs (the current baseline and each prefix but the last)")


def prefixes(configs: Configurations, new: list[Patch], accuracy: Callable, known: dict,
             reporter) -> list[dict]:
    """Measure the prefixes and attribute (see the module docstring). ``accuracy(engine)``
    runs the guard on one engine (``{"mean": 0.0}`` where the guard cannot); ``known``
    holds the run's ``reference`` and ``candidate`` results."""
    prof = configs.profile
    configs.ensure_started(("current", "candidate"))
    base = configs.sets["current"]
    stacks = [base + new[:j] for j in range(len(new) + 1)]
    names = [f"P{j}" for j in range(len(stacks))]
    engines = {names[0]: configs.engine("current"), names[-1]: configs.engine("candidate")}
    extra = {}
    try:
        extra = start_all(prof, {names[j]: stacks[j] for j in range(1, len(stacks) - 1)},
                          reporter.say, share=1 / len(stacks),
                          names={names[j]: f"P{j} (+ {new[j - 1].name})"
                                 for j in range(1, len(stacks) - 1)})
        engines.update(extra)
        ordered = {name: engines[name] for name in names}
        scenarios = make_scenarios(prof)
        n = len(ordered)
        total = (prof.warmup + balanced_rounds(prof.rounds, n)) * len(scenarios) * n
        with reporter.progress(total, "attribute") as bar:
            samples = measure(ordered, scenarios, Rounds.of(prof), bar)
        accs = {}
        for name in names[:-1]:
            reporter.say(f"--attribute: accuracy of {name}")
            accs[name] = accuracy(engines[name])
        accs[names[-1]] = known["candidate"]
    finally:
        for eng in extra.values():
            eng.close()
    ref_mean = known["reference"]["mean"]
    weights = decide.score_weights(scenarios, prof.batch_sizes)
    out = []
    for j, patch in enumerate(new, start=1):
        before, after = samples[names[j - 1]], samples[names[j]]
        diffs = decide.differences(after, before)
        rows = {s.name: _ratio(stats.compare_differences(diffs[s.name], A)) for s in scenarios}
        pooled = stats.compare_differences(stats.pooled_differences(diffs, weights), A)
        acc_before = accs[names[j - 1]]["mean"] / ref_mean if ref_mean else 1.0
        acc_after = accs[names[j]]["mean"] / ref_mean if ref_mean else 1.0
        out.append({"patch": patch.name, "title": patch.title, "scenarios": rows,
                    "score_change": 1 / pooled.ratio - 1, "score": _ratio(pooled),
                    "accuracy_ratio": acc_after, "accuracy_change": acc_after - acc_before})
    return out


def _ratio(cmp: stats.PairedComparison) -> dict:
    return {"ratio": cmp.ratio, "ci_low": cmp.ci_low if cmp.ci_low > 0 else None,
            "ci_high": cmp.ci_high if cmp.ci_high < float("inf") else None}
