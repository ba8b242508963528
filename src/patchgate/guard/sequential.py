"""The accuracy guard that stops as soon as the full-set answer is certain.

The rule and the statistics that predict it from a share of the items are
:mod:`patchgate.stats.sequential`'s (an anytime-valid confidence sequence for sampling
without replacement; an early decision differs from the full set's with probability at
most ``sequential.delta``). This module runs it through lm-eval and the engines:

1. **Survey.** lm-eval runs the tasks once with no item answered (every request gets an
   empty answer, no engine call): the tasks, their items and ids, the primary metric and
   filter, for the pairing and for the stored reference's check.
2. **Order.** The items in a seeded order stratified over the tasks
   (:func:`patchgate.stats.strata.stratified_order`, the profile's seed).
3. **Looks.** The first look holds at least one engine batch per task (lm-eval batches
   each task's requests apart, and a batch of 3 costs nearly what a batch of 16 does),
   later ones grow by ``sequential.growth`` (:func:`patchgate.stats.sequential.looks`). A
   look also waits until it adds answering time worth :data:`ANSWERING_PER_OVERHEAD` times
   its lm-eval runs' fixed cost (the survey's time), and one that, predicted from the last,
   could not decide is skipped (:mod:`patchgate.stats.schedule`). Each look is one lm-eval
   run of the whole tasks in which only the items chosen so far are answered
   (:attr:`EngineLM.only`), so every prompt is the one a full run builds; answers already
   computed are not computed again. The candidate's scores are paired with the
   reference's on the same items: the stored reference where it stands in, else the
   reference engine on the same items.

:func:`until_decided` returns both results on the evaluated items and the
:class:`~patchgate.guard.decision.AccuracyDecision`, with how it got there
(:meth:`SequentialRun.details`).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field

from ..stats.schedule import next_point
from ..stats.sequential import CONTINUE, SequentialGuard, SequentialResult, SequentialSettings
from ..stats.sequential import looks as look_sizes
from ..stats.strata import pooled_weights, stratified_order
from .decision import ALL_ITEMS, UNDECIDED, AccuracyDecision
from .lmeval import Tasks, collect, evaluate
from .results import AccuracyResult


@dataclass(frozen=True)
class Survey:
    """The suite as lm-eval builds it: leaf ``tasks`` (sorted), each task's lm-eval doc
    ids and item ids in the same order, and the unanswered result (tasks, metrics,
    filters and ids as a run gives them; its scores mean nothing)."""

    tasks: tuple[str, ...]
    docs: tuple[tuple[int, ...], ...]
    ids: tuple[tuple[str, ...], ...]
    result: AccuracyResult
    seconds: float = 0.0  # one lm-eval run with no item answered: a look's fixed cost

    @property
    def sizes(self) -> list[int]:
        return [len(d) for d in self.docs]


def survey(lm, spec: Tasks) -> Survey:
    """Run the tasks through ``lm`` with no item answered (step 1)."""
    import lm_eval.evaluator  # noqa: F401 - imported before the clock: not a look's cost

    t0 = time.perf_counter()
    lm.only = set()
    res = evaluate(lm, spec)
    result = collect(res, spec.primary)
    tasks = tuple(sorted(result["tasks"]))
    docs = tuple(tuple(sorted({s["doc_id"] for s in res["samples"][t]})) for t in tasks)
    ids = tuple(tuple(i["id"] for i in result["tasks"][t]["samples"]) for t in tasks)
    return Survey(tasks, docs, ids, result, time.perf_counter() - t0)


# A look costs one lm-eval run per engine whatever it adds; where answering is cheap (a
# small model on CPU) the next look waits until it adds at least this many times that cost
# in answering time, so the runs never cost more than a fifth of the guard's time.
ANSWERING_PER_OVERHEAD = 4


def next_look(points: list[int], done: int, step: int) -> int:
    """The first of the schedule's ``points`` that adds at least ``step`` items to the
    ``done`` ones (the last point where none does). Any look schedule keeps the guard's
    error rate: the confidence sequence holds at every stopping time."""
    return next((p for p in points if p >= done + max(1, step)), points[-1])


def answering_s(look_s: float, added: int, runs: int, overhead_s: float) -> float:
    """Seconds of answering one item in the last look: its ``look_s`` less its ``runs``
    lm-eval runs' fixed cost (``overhead_s`` each), over the ``added`` items."""
    return max(look_s - runs * overhead_s, 0.0) / max(1, added)


def least_step(per_item_s: float, runs: int, overhead_s: float) -> int:
    """Items the next look must add so that its answering (``per_item_s`` an item)
    takes at least :data:`ANSWERING_PER_OVERHEAD` times its ``runs`` lm-eval runs'
    fixed cost (``overhead_s`` each)."""
    return math.ceil(ANSWERING_PER_OVERHEAD * runs * overhead_s / max(per_item_s, 1e-9))


def subset(result: AccuracyResult, keep: dict[str, set[str]], total: int) -> AccuracyResult:
    """``result`` on the items of ``keep`` only ({task: item ids}): values recomputed,
    lm-eval's other aggregates dropped (they were over every item), marked partial."""
    tasks = {}
    for name, task in result["tasks"].items():
        samples = [s for s in task["samples"] if s["id"] in keep.get(name, ())]
        if samples:
            tasks[name] = {**{k: v for k, v in task.items() if k != "others"},
                           "samples": samples,
                           "value": math.fsum(s["score"] for s in samples) / len(samples)}
    evaluated = sum(len(t["samples"]) for t in tasks.values())
    out = AccuracyResult(tasks=tasks, mean=math.fsum(t["value"] for t in tasks.values())
                         / max(1, len(tasks)))
    if evaluated < total:
        out["partial"] = {"evaluated": evaluated, "total": total}
    return out


@dataclass(kw_only=True)
class SequentialRun:
    """What :func:`until_decided` found: both results on the evaluated items, the guard's
    last standing (``standing``: a :class:`~patchgate.stats.sequential.SequentialResult`),
    the accuracy ``limit`` it decided against, and how it got there."""

    candidate: AccuracyResult
    reference: AccuracyResult
    standing: SequentialResult
    limit: float
    seed: int
    order_sha: str
    runs: int = 0  # lm-eval runs per engine
    seconds: float = 0.0
    looks: list[dict] = field(default_factory=list)
    saved_s: float = 0.0  # the answering time of the items not evaluated, estimated
    first_look: int = 0  # items at the first look (and the least a look adds)

    @property
    def decision(self) -> AccuracyDecision:
        """The guard's decision: the confidence sequence's, or the exact full-set rule's
        at the last item."""
        r = self.standing
        outcome = UNDECIDED if r.decision == CONTINUE else r.decision
        return AccuracyDecision(outcome=outcome, limit=self.limit, ratio=r.ratio_estimate,
                                items=r.items_evaluated, total=r.items_total,
                                why=r.stopped or ALL_ITEMS, low=r.ratio_low,
                                high=r.ratio_high)

    def details(self) -> dict:
        """The accuracy block's ``sequential``: level, seed, order, looks, time."""
        r = self.standing
        return {"delta": r.delta, "seed": self.seed, "order_sha256": self.order_sha,
                "block": self.first_look, "ratio_estimate": r.ratio_estimate,
                "reference_exact": r.reference_exact, "looks": self.looks,
                "lm_eval_runs": self.runs, "seconds": round(self.seconds, 1),
                "saved_s_estimate": round(self.saved_s, 1)}


def until_decided(candidate_lm, reference, spec: Tasks, prof, *, limit: float,
                  say=lambda _: None, suite: Survey | None = None) -> SequentialRun:
    """The sequential guard (module docstring) on ``candidate_lm`` against ``limit``;
    ``reference`` is a complete stored result (:class:`AccuracyResult`), another engine's
    lm to evaluate on the same items, or None where the candidate is the reference.
    ``suite``: the survey, where the caller made it already."""
    t0 = time.perf_counter()
    suite = suite or survey(candidate_lm, spec)
    sizes, knobs = suite.sizes, prof.sequential
    order = stratified_order(sizes, prof.seed)
    # a look fills the engine's batches: lm-eval batches each task's requests apart, and a
    # batch of 3 costs nearly what a batch of 16 does (``eval_batch_size`` per task)
    first_look = max(knobs.block, min(len(order), spec.batch_size * len(sizes)))
    settings = SequentialSettings(theta=limit, delta=knobs.delta, block=first_look,
                                  growth=knobs.growth, skip_margin=knobs.skip_margin)
    guard = SequentialGuard(sizes, pooled_weights(sizes), settings)
    stored = reference if isinstance(reference, dict) else None
    ref_mean = stored_mean(stored) if stored else None
    done, runs, step, per_item = 0, 1, 1, 0.0
    sides = 2 if reference is not None and stored is None else 1
    points = look_sizes(len(order), settings)
    trail: list[dict] = []
    cand = ref = suite.result
    standing = None  # where the guard stands after the last look
    while done < len(order):
        n, t_look = next_look(points, done, step), time.perf_counter()
        if standing is not None and settings.skip_margin > 0:  # skip looks that cannot decide
            n = next_point(points, n, standing.low, standing.high, done, settings.skip_margin)
        chosen = {(suite.tasks[t], suite.docs[t][k]) for t, k in order[:n]}
        cand = _answered(candidate_lm, chosen, spec)
        if reference is None:
            ref = cand
        elif stored is None:
            ref = _answered(reference, chosen, spec)
        else:
            ref = stored
        runs += 1
        ri, ci = scores(ref), scores(cand)
        pairs = [(ri[suite.tasks[t]][suite.ids[t][k]], ci[suite.tasks[t]][suite.ids[t][k]])
                 for t, k in order[done:n]]
        guard.add([p[0] for p in pairs], [p[1] for p in pairs])
        look_s = time.perf_counter() - t_look
        per_item = answering_s(look_s, n - done, sides, suite.seconds)
        step = least_step(per_item, sides, suite.seconds)
        done = n
        standing = guard.result(ref_mean)
        trail.append({"items": n, "interval": [standing.ratio_low, standing.ratio_high],
                      "seconds": round(look_s, 2)})
        say(f"accuracy: {n} of {len(order)} items, ratio interval "
            f"{_show(standing.ratio_low)}..{_show(standing.ratio_high)}"
            + ("" if guard.decision == CONTINUE else f": {standing.stopped}"))
        if guard.decision != CONTINUE:
            break
    keep: dict[str, set[str]] = {}
    for t, k in order[:done]:
        keep.setdefault(suite.tasks[t], set()).add(suite.ids[t][k])
    return SequentialRun(
        candidate=subset(cand, keep, len(order)), reference=subset(ref, keep, len(order)),
        standing=guard.result(ref_mean), limit=limit, seed=prof.seed,
        order_sha=hashlib.sha256(repr(order).encode()).hexdigest()[:16], runs=runs,
        seconds=time.perf_counter() - t0, looks=trail,
        saved_s=per_item * (len(order) - done), first_look=first_look)


def stored_mean(result: AccuracyResult) -> float:
    """The mean over every item of a complete result (the full-set reference mean)."""
    scores = [s["score"] for t in result["tasks"].values() for s in t["samples"]]
    return math.fsum(scores) / max(1, len(scores))


def _answered(lm, chosen: set, spec: Tasks) -> AccuracyResult:
    lm.only = chosen
    return collect(evaluate(lm, spec), spec.primary)


def scores(result: AccuracyResult) -> dict[str, dict[str, float]]:
    """{task: {item id: score}}."""
    return {name: {s["id"]: s["score"] for s in task["samples"]}
            for name, task in result["tasks"].items()}


def _show(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.1f} %"
