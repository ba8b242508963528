"""The accuracy guard that stops as soon as the full-set verdict is certain.

The rule is today's: the candidate passes iff its accuracy over all the items is at
least ``accuracy_reject`` (99 %) of the reference's (the mean over the items). The guard
predicts that outcome from a share of the items (:mod:`patchgate.stats.sequential`):

1. **Survey.** lm-eval runs the tasks once with no item answered (every request gets an
   empty answer, no engine call): the tasks, their items and ids, the primary metric and
   filter, for the pairing and for the stored reference's check.
2. **Order.** The items in a seeded order stratified over the tasks
   (:func:`patchgate.stats.strata.stratified_order`, the profile's seed).
3. **Blocks.** The first ``sequential.block`` items, but at least one engine batch per
   task (``eval_batch_size`` x tasks: lm-eval batches each task's requests apart, and a
   batch of 3 costs nearly what a batch of 16 does), then ``sequential.growth`` times as
   many at each look, at least a block more (16 x 6 tasks on the default suite: 96, 192,
   288, 384, 480, 600; :func:`patchgate.stats.sequential.looks`). A look also waits until it adds
   answering time worth :data:`ANSWERING_PER_OVERHEAD` times its lm-eval runs' fixed cost
   (the survey's time, measured): on a small model on CPU a run's fixed cost is the
   answering time of dozens of items, on a real evaluation that of a fraction of one.
   And a look whose interval, predicted from the last one, could not clear the limit is
   skipped (``sequential.skip_margin``, :mod:`patchgate.stats.schedule`): near the limit
   the default suite's six looks become about four (the repository's chain: three).
   Each block is one lm-eval run of the whole tasks
   in which only the items chosen so far are answered (:attr:`EngineLM.only`), so every
   prompt is the one a full run builds (few-shot examples included); answers already
   computed are not computed again. The candidate's scores are paired with the
   reference's on the same items: the stored reference where it stands in, else the
   reference engine on the same blocks.
4. **Decide.** After each block, the betting confidence sequence for the full-set
   difference: wholly at or above the limit passes, wholly below rejects, else the next
   block; at the last item, the exact full-set rule. An early decision differs from the
   full set's with probability at most ``sequential.delta`` (1 %).

:func:`run` returns both results on the evaluated items (paired, flips and all) and the
verdict's fields: items evaluated of the total, why it stopped, the ratio interval, and
the time a full pass would have taken more (estimated from the time per item).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field

from ..stats.schedule import next_point
from ..stats.sequential import CONTINUE, SequentialGuard, SequentialSettings
from ..stats.sequential import looks as look_sizes
from ..stats.strata import pooled_weights, stratified_order
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


@dataclass
class Run:
    """What :func:`run` found: both results on the evaluated items, and the verdict's
    fields (:meth:`fields`)."""

    candidate: AccuracyResult
    reference: AccuracyResult
    result: object  # patchgate.stats.sequential.SequentialResult
    seed: int
    order_sha: str
    runs: int = 0  # lm-eval runs per engine
    seconds: float = 0.0
    looks: list[dict] = field(default_factory=list)
    saved_s: float = 0.0  # the answering time of the items not evaluated, estimated
    block: int = 0  # items at the first look (and the least a look adds)

    def fields(self) -> dict:
        """The accuracy block's ``items_evaluated``, ``items_total``, ``stopped``,
        ``interval`` and ``sequential`` (how: level, seed, order, looks, time)."""
        r = self.result
        return {
            "items_evaluated": r.items_evaluated, "items_total": r.items_total,
            "stopped": r.stopped or "all items evaluated", "decision": r.decision,
            "interval": [r.ratio_low, r.ratio_high],
            "sequential": {
                "delta": r.delta, "seed": self.seed, "order_sha256": self.order_sha,
                "block": self.block,
                "ratio_estimate": r.ratio_estimate, "reference_exact": r.reference_exact,
                "looks": self.looks, "lm_eval_runs": self.runs,
                "seconds": round(self.seconds, 1),
                "saved_s_estimate": round(self.saved_s, 1),
            },
        }


def run(candidate_lm, reference, spec: Tasks, prof, say=lambda _: None,
        sv: Survey | None = None) -> Run:
    """The sequential guard (module docstring) on ``candidate_lm``; ``reference`` is a
    complete stored result (:class:`AccuracyResult`), another engine's lm to evaluate on
    the same blocks, or None where the candidate is the reference. ``sv``: the survey,
    where the caller made it already."""
    t0 = time.perf_counter()
    sv = sv or survey(candidate_lm, spec)
    sizes, settings = sv.sizes, prof.sequential
    order = stratified_order(sizes, prof.seed)
    # a look fills the engine's batches: lm-eval batches each task's requests apart, and a
    # batch of 3 costs nearly what a batch of 16 does (``eval_batch_size`` per task)
    block = max(settings.block, min(len(order), spec.batch_size * len(sizes)))
    how = SequentialSettings(theta=prof.thresholds.accuracy_reject, delta=settings.delta,
                             block=block, growth=settings.growth,
                             skip_margin=settings.skip_margin)
    guard = SequentialGuard(sizes, pooled_weights(sizes), how)
    stored = reference if isinstance(reference, dict) else None
    ref_mean = stored_mean(stored) if stored else None
    done, runs, step, per_item = 0, 1, 1, 0.0
    sides = 2 if reference is not None and stored is None else 1
    points = look_sizes(len(order), how)
    trail: list[dict] = []
    cand = ref = sv.result
    now = None  # where the guard stands after the last look
    while done < len(order):
        n, t_look = next_look(points, done, step), time.perf_counter()
        if now is not None and how.skip_margin > 0:  # skip looks that cannot decide
            n = next_point(points, n, now.low, now.high, done, how.skip_margin)
        chosen = {(sv.tasks[t], sv.docs[t][k]) for t, k in order[:n]}
        cand = _answered(candidate_lm, chosen, spec)
        if reference is None:
            ref = cand
        elif stored is None:
            ref = _answered(reference, chosen, spec)
        else:
            ref = stored
        runs += 1
        ri, ci = scores(ref), scores(cand)
        pairs = [(ri[sv.tasks[t]][sv.ids[t][k]], ci[sv.tasks[t]][sv.ids[t][k]])
                 for t, k in order[done:n]]
        guard.add([p[0] for p in pairs], [p[1] for p in pairs])
        look_s = time.perf_counter() - t_look
        per_item = answering_s(look_s, n - done, sides, sv.seconds)
        step = least_step(per_item, sides, sv.seconds)
        done = n
        now = guard.result(ref_mean)
        trail.append({"items": n, "interval": [now.ratio_low, now.ratio_high],
                      "seconds": round(look_s, 2)})
        say(f"accuracy: {n} of {len(order)} items, ratio interval "
            f"{_show(now.ratio_low)}..{_show(now.ratio_high)}"
            + ("" if guard.decision == CONTINUE else f": {now.stopped}"))
        if guard.decision != CONTINUE:
            break
    keep: dict[str, set[str]] = {}
    for t, k in order[:done]:
        keep.setdefault(sv.tasks[t], set()).add(sv.ids[t][k])
    sha = hashlib.sha256(repr(order).encode()).hexdigest()[:16]
    return Run(subset(cand, keep, len(order)), subset(ref, keep, len(order)),
               guard.result(ref_mean), prof.seed, sha, runs, time.perf_counter() - t0, trail,
               per_item * (len(order) - done), block)


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
