"""The latency phase of a run: measure, look, measure more, confirm. No verdict here.

1. **First look.** Every configuration, every scenario, ``rounds`` rounds, interleaved
   and counterbalanced (:func:`patchgate.latency.measure.measure`).
2. **More looks.** Candidate vs current (and vs the fastest accepted state, if that is
   another configuration) is decided item by item (:mod:`patchgate.latency.decide`). Items
   still undecided get ``rounds`` more rounds (the scenarios concerned; all of them
   while the pooled ``score`` item is undecided), up to ``max_looks`` looks in all.
   Each look tests at alpha / ``max_looks``, so the false-alarm rate stays at alpha
   whatever the number of looks taken. The reference runs in the first look only:
   it serves the score, not the decision. Once the pooled score is slower, no more
   looks: the confirmation then tests every scenario as well as the score.
3. **Confirmation in fresh processes.** Two processes running the same code can
   differ steadily (on a shared CPU, measured: decode_b1 up to 44 % between two
   worker processes of the same model). Any item found slower is measured again in
   newly started engines, with its own budget of looks, and stays slower only if
   this second, independent set of processes finds it slower too. Requiring both
   can only lower the false-alarm rate; it costs power only when one of the two
   samples is too small, which the looks prevent. The confirmation replicates a
   finding the first processes made at alpha, so it has a budget of its own: looks of
   ``confirm_rounds`` rounds (the profile's ``rounds`` by default), up to
   ``confirm_looks`` (``max_looks``), each test at alpha / (comparisons it tests x
   ``confirm_looks``). A rejection still needs the first processes' test at their
   level, so the false-alarm rate stays at most alpha whatever the confirmation's
   budget; its rounds are raised to the fewest that can decide the pooled score at its
   level (:func:`patchgate.latency.decide.fewest_rounds`), or a confirmation could
   never confirm and every slowdown would pass. With ``confirm_strongest``, when the
   current baseline is the one comparison flagged, the fresh processes first measure
   one scenario alone (:func:`patchgate.latency.budgets.strongest`: where the slowdown
   stands out most), one look of the fewest rounds that can decide it at half the
   level. Slower again: the rejection stands on it (a scenario slower in the fresh
   processes and the score, or it, in the first ones, as below), and nothing else is
   re-measured. Else every item found slower is measured at the other half, as without.

The result, :class:`~patchgate.latency.result.LatencyResult`, holds the raw samples and
the decisions; the verdict is built from it elsewhere (:mod:`patchgate.verdict.judge`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ..engines.configurations import Configurations
from ..profile import Profile
from ..stats import SLOWER, median, speed_score
from ..stats.score import batch_keys
from . import budgets, decide, offclock
from .measure import Rounds, balanced_rounds, measure
from .result import Alone, LatencyResult, Samples
from .scenarios import Scenario, make_scenarios

# Round numbers of each look and of the confirmation's looks: every round draws its own
# token ids (patchgate.latency.measure), so no two rounds of a run repeat an input.
LOOK_ROUNDS = 100_000
CONFIRM_ROUNDS = 10_000_000
ALONE_ROUNDS = 1_000_000  # after the one scenario measured alone, the others' rounds


def comparisons(configs: Configurations) -> list[str]:
    """The baselines the candidate is judged against: the current one, and the fastest
    accepted state when it is another configuration."""
    out = ["current"]
    if "best" in configs.labels and not configs.same("best", "current"):
        out.append("best")
    return out


def _items(comparison: str, scenarios: list[Scenario]) -> list[str]:
    """Against the current baseline every scenario and the score; against the fastest
    accepted state the score alone (the drift a chain of small changes adds up to)."""
    return [*(s.name for s in scenarios), decide.SCORE] if comparison == "current" \
        else [decide.SCORE]


def _needed(items: list[str], scenarios: list[Scenario]) -> list[Scenario]:
    if decide.SCORE in items:
        return list(scenarios)
    return [s for s in scenarios if s.name in items]


def _extend(into: Samples, more: Samples, configs: Configurations,
            labels: tuple[str, ...]) -> None:
    for label in labels:
        for name, xs in more[configs.name(label)].items():
            into.setdefault(label, {}).setdefault(name, []).extend(xs)


@dataclass(frozen=True)
class Schedule:
    """What the looks measure: the ``scenarios``, the ``batch_sizes`` that stand for S1,
    S8 and Sinf, and the ``timer`` (:func:`patchgate.latency.measure.measure`'s
    signature: engines, scenarios, :class:`~patchgate.latency.measure.Rounds`, bar).
    ``stands_in``: the batch sizes are not the profile's (the serving set's
    concurrencies), and the result says so. ``answers``: the timer keeps each call's
    first tokens (its ``answers`` argument), and the result holds them; it also meters
    the other work each call met over the whole phase (its ``meter`` argument,
    :mod:`.offclock`)."""

    scenarios: list
    batch_sizes: tuple[int, ...]
    timer: Callable = measure
    stands_in: bool = False
    answers: bool = False

    @classmethod
    def static(cls, profile) -> Schedule:
        """The profile's six scenarios on the configurations' engines."""
        return cls(make_scenarios(profile), tuple(profile.batch_sizes), answers=True)


def run(configs: Configurations, prof: Profile, reporter, schedule: Schedule | None = None
        ) -> LatencyResult:
    """The latency phase (see the module docstring) on ``configs``' engines (started).
    ``reporter`` (:class:`patchgate.report.console.Reporter`) gets the step lines and
    gives the bars; ``schedule`` defaults to the profile's six scenarios."""
    schedule = schedule or Schedule.static(prof)
    scenarios, sizes, timer = schedule.scenarios, schedule.batch_sizes, schedule.timer
    answers: dict | None = {} if schedule.answers else None
    meter = None
    if answers is not None:  # the static set's timer: answers, and other work met
        meter = offclock.Meter()
        timer = functools.partial(timer, answers=answers, meter=meter)
    against = comparisons(configs)
    k_max = max(1, prof.max_looks)
    # one family per comparison; each family's alpha is split over the looks
    alpha_look = prof.thresholds.alpha / (len(against) * k_max)
    engines = configs.by_name()
    n = len(engines)
    reporter.say(f"latency: {len(scenarios)} scenarios x {n} configurations x "
                 f"{balanced_rounds(prof.rounds, n)} rounds (+{prof.warmup} warm-up"
                 f"{_short_warmup(prof)}), "
                 f"interleaved; up to {k_max} looks")
    with reporter.progress(_calls(prof, scenarios, n, prof.warmup), "latency") as bar:
        # the first look measures every configuration, the reference too: it gives the
        # score's weights, which every later decision uses
        named = timer(engines, scenarios, Rounds.of(prof), bar)
        samples: Samples = {label: {k: list(v) for k, v in named[configs.name(label)].items()}
                            for label in configs.labels}
        speed = {key: speed_score([median(samples["reference"][s.name]) for s in sel],
                                  [median(samples["current"][s.name]) for s in sel])
                 for key, sel in _by_batch(scenarios, sizes).items()}
        weights = decide.score_weights(scenarios, sizes, speed)
        result = LatencyResult(scenarios=scenarios, samples=samples, decisions={},
                               weights=weights, looks=1, max_looks=k_max,
                               alpha_look=alpha_look,
                               same_as_current=configs.same("candidate", "current"),
                               batch_sizes=sizes if schedule.stands_in else None,
                               answers=answers)
        result.notes += budgets.power_notes(balanced_rounds(prof.rounds, n), alpha_look,
                                            len(scenarios), prof.test)
        first = _Series(labels=("candidate", *against), samples=samples,
                        decisions=result.decisions, first_round=0,
                        items={comp: _items(comp, scenarios) for comp in against},
                        alpha=alpha_look, rounds=prof.rounds, max_looks=k_max)
        _decide(first, result, prof, look=1)
        if not result.same_as_current:
            _looks(configs, prof, result, first, start=2, reporter=reporter, bar=bar,
                   timer=timer)
        result.looks = first.looks
    if prof.confirm and not result.same_as_current:
        _confirm(configs, prof, result, against, reporter, timer)
    result.offclock = meter.finding if meter is not None else None
    return result


@dataclass(kw_only=True)
class _Series:
    """One set of engine processes and what its looks found: the ``labels`` measured,
    their ``samples``, per comparison the ``items`` decided and their ``decisions``, the
    number of its ``first_round`` (each series draws its own token ids) and how many
    ``looks`` it took; its budget: ``rounds`` a look, at most ``max_looks`` looks, each
    test at level ``alpha``."""

    labels: tuple[str, ...]
    samples: Samples
    decisions: dict[str, dict[str, decide.Decision]]
    items: dict[str, list[str]]
    first_round: int
    alpha: float
    rounds: int
    max_looks: int
    looks: int = 1


def _decide(series: _Series, result: LatencyResult, prof: Profile, look: int) -> None:
    """Every comparison of ``series`` after ``look`` (:func:`patchgate.latency.decide.look`:
    each test at the series' level); outcomes reached at an earlier look stand."""
    level = decide.Level(prof.thresholds.latency, series.alpha, prof.test)
    for comp, items in series.items.items():
        diffs = decide.differences(series.samples["candidate"], series.samples[comp])
        series.decisions[comp] = decide.look(diffs, result.weights, level, look,
                                             series.decisions.get(comp), items=items)
    series.looks = look


def _looks(configs: Configurations, prof: Profile, result: LatencyResult, series: _Series, *,
           start: int, reporter, bar, timer: Callable) -> None:
    """Looks ``start``..``series.max_looks``, the one loop of the phase: each measures
    ``series.rounds`` more rounds of the scenarios its undecided items need (every
    scenario while the pooled score is undecided) and decides them; a series that starts
    at look 1 (fresh engines) measures every item it decides, after a warm-up."""
    use = configs.by_name(series.labels)
    for k in range(start, series.max_looks + 1):
        if k == 1:
            wanted = sorted({i for items in series.items.values() for i in items})
        else:
            wanted = sorted({i for d in series.decisions.values() for i in decide.pending(d)})
            if wanted and _score_slower(series):
                result.notes.append(
                    f"the pooled score was slower after look {k - 1}: {', '.join(wanted)} "
                    "got no more looks in these processes; the fresh processes test them "
                    "with the score")
                return
            if not wanted:
                return
        pend = _needed(wanted, result.scenarios)
        if k > 1:
            again = "confirmation " if series.first_round else ""
            reporter.say(f"{again}undecided: {', '.join(wanted)}; look {k} of "
                         f"{series.max_looks}: {series.rounds} more rounds of {len(pend)} "
                         "scenario(s)")
            bar.total += balanced_rounds(series.rounds, len(use)) * len(pend) * len(use)
            bar.refresh()
        more = timer(use, pend, Rounds.of(prof, warmup=k == 1, rounds=series.rounds,
                                          first=series.first_round + k * LOOK_ROUNDS), bar)
        _extend(series.samples, more, configs, series.labels)
        _decide(series, result, prof, look=k)


def _score_slower(series: _Series) -> bool:
    """The pooled score is slower against a baseline: the rejection is settled in this
    series (pending the fresh processes' word), and the undecided scenarios get no more
    looks here: they would only say which scenarios, at the price of a look (on the GPU
    profile, three minutes). The confirmation measures every scenario anyway, as the
    score needs them all."""
    return any(d.get(decide.SCORE) is not None and d[decide.SCORE].outcome == SLOWER
               for d in series.decisions.values())


def judged(samples: Samples, scenarios: list[Scenario], profile: Profile, against=("current",),
           speed: dict | None = None, batch_sizes: tuple[int, ...] | None = None
           ) -> LatencyResult:
    """A :class:`LatencyResult` decided from given samples in one look (no engines):
    what the verdict tests build on."""
    weights = decide.score_weights(scenarios, batch_sizes or profile.batch_sizes, speed)
    k_max = max(1, profile.max_looks)
    alpha_look = profile.thresholds.alpha / (len(against) * k_max)
    result = LatencyResult(scenarios=scenarios, samples=samples, decisions={},
                           weights=weights, looks=1, max_looks=k_max, alpha_look=alpha_look,
                           batch_sizes=batch_sizes)
    _decide(_Series(labels=("candidate", *against), samples=samples,
                    decisions=result.decisions, first_round=0,
                    items={comp: _items(comp, scenarios) for comp in against},
                    alpha=alpha_look, rounds=profile.rounds, max_looks=k_max),
            result, profile, look=1)
    return result


def _confirm(configs: Configurations, prof: Profile, result: LatencyResult, against,
             reporter, timer: Callable = measure) -> None:
    """Step 3 of the docstring: the items found slower, measured again in fresh engine
    processes (the configurations concerned restarted), with their own looks."""
    flagged = {comp: decide.slower(result.decisions[comp]) for comp in against}
    flagged = {comp: items for comp, items in flagged.items() if items}
    if not flagged:
        return
    for comp in flagged:  # a slower score: the fresh processes test every item of it
        if decide.SCORE in flagged[comp]:  # (they measure every scenario for it anyway)
            flagged[comp] = _items(comp, result.scenarios)
    items_all = sorted({i for items in flagged.values() for i in items})
    labels = ("candidate", *flagged)
    reporter.phase("confirm_engines", f"slower: {', '.join(items_all)}; measuring again in "
                   "fresh engine processes")
    configs.start(labels)
    reporter.phase("confirm")
    x = budgets.strongest(result.decisions["current"], prof.thresholds.latency) \
        if prof.confirm_strongest and set(flagged) == {"current"} else None
    if x is not None:
        a = result.alone = _alone(configs, prof, result, x, reporter, timer)
        if a.confirmed:
            result.confirm_looks, result.confirm_rounds, result.confirm_alpha = \
                1, a.rounds, a.alpha
            return
        reporter.say(f"confirmation: {x} alone was {a.decision.outcome}; "
                     f"measuring {', '.join(items_all)}")
    budget = budgets.confirm_budget(prof, flagged, steps=2 if x else 1)
    if budget.note:
        result.notes.append(budget.note)
    again = _Series(labels=labels, samples=result.confirm_samples, decisions={},
                    items=flagged, first_round=CONFIRM_ROUNDS + (ALONE_ROUNDS if x else 0),
                    looks=0, alpha=budget.alpha, rounds=budget.rounds, max_looks=budget.looks)
    _fresh(configs, prof, result, again, reporter, timer)
    result.confirmation, result.confirm_looks = again.decisions, again.looks
    result.confirm_rounds, result.confirm_alpha = budget.rounds, budget.alpha


def _alone(configs: Configurations, prof: Profile, result: LatencyResult, item: str,
           reporter, timer: Callable) -> Alone:
    """The first step of a ``confirm_strongest`` confirmation: ``item`` alone, one look
    (:func:`patchgate.latency.budgets.alone_budget`) in the fresh processes."""
    budget = budgets.alone_budget(prof)
    labels = ("candidate", "current")
    reporter.say(f"confirmation: {item} alone first, {budget.rounds} rounds, its test at "
                 f"{budget.alpha:.3g}")
    series = _Series(labels=labels, samples={}, decisions={}, items={"current": [item]},
                     first_round=CONFIRM_ROUNDS, looks=0, alpha=budget.alpha,
                     rounds=budget.rounds, max_looks=1)
    _fresh(configs, prof, result, series, reporter, timer)
    return Alone(item, series.decisions["current"][item], series.samples, budget.rounds,
                 budget.alpha)


def _fresh(configs: Configurations, prof: Profile, result: LatencyResult, series: _Series,
           reporter, timer: Callable) -> None:
    """The looks of a ``series`` in the fresh processes, from their first (with its
    warm-up), under the confirmation's progress bar."""
    items = sorted({i for items in series.items.values() for i in items})
    pend = _needed(items, result.scenarios)
    use = len(configs.by_name(series.labels))
    with reporter.progress(_calls(prof, pend, use, prof.warmup, series.rounds),
                           "confirm") as bar:
        _looks(configs, prof, result, series, start=1, reporter=reporter, bar=bar, timer=timer)


def _by_batch(scenarios: list[Scenario], batch_sizes) -> dict[str, list[Scenario]]:
    keys = batch_keys(batch_sizes)
    out: dict[str, list[Scenario]] = {}
    for s in scenarios:
        if s.batch_size in keys:
            out.setdefault(keys[s.batch_size], []).append(s)
    return out


def _short_warmup(prof) -> str:
    """``", <= 2 tokens a call"`` where warm-up calls stop early, else nothing."""
    if not prof.warmup or prof.warmup_tokens is None:
        return ""
    return f", <= {prof.warmup_tokens} tokens a call"


def _calls(prof, scenarios, configurations: int, warmup: int, rounds: int | None = None
           ) -> int:
    """Timed and warm-up calls of one :func:`measure` (a progress bar's total), of
    ``rounds`` timed rounds (the profile's by default)."""
    return (warmup + balanced_rounds(rounds or prof.rounds, configurations)) * \
        len(scenarios) * configurations
