"""The guard ``lm_eval`` (:mod:`patchgate.registry`): the profile's lm-eval tasks on the
candidate and on the reference, through the run's engines (:mod:`.lmeval`), stopping
as soon as the full-set answer is certain (:mod:`.sequential`) unless the profile says
``[sequential] full``; a stored reference stands in where it matches (:mod:`.reference`).
"""

from __future__ import annotations

from ..errors import PatchgateError
from . import sequential
from .base import Context, Outcome, decided_on_every_item
from .lmeval import Tasks, make_lm, run_guard_tasks
from .reference import reusable
from .results import AccuracyResult, differences


class LmEvalGuard:
    """The guard ``lm_eval``: the profile's tasks on the candidate, and on the reference
    unless a stored result of this environment, model and task data stands in."""

    name = "lm_eval"
    judges_alone = True

    def check(self, profile) -> None:
        """Before any engine starts: the task names known, every task file of the task
        folder readable, each task built with its data (:func:`.tasks.check_tasks`)."""
        from .tasks import check_tasks

        if not profile.tasks:
            raise PatchgateError(f"profile {profile.name}: no tasks",
                                 hint="name at least one lm-eval task or group")
        check_tasks(list(profile.tasks), str(profile.task_folder()), profile.task_args)

    def result_of(self, engine, profile, reporter) -> AccuracyResult:
        with reporter.progress(None, "accuracy") as bar:
            return run_guard_tasks(engine, engine.tokenizer, Tasks.of(profile), bar)

    def evaluate(self, ctx: Context) -> Outcome:
        """Both results, decided: every item with ``sequential.full``
        (``--full-accuracy``), else the items the sequential guard needs
        (:mod:`.sequential`)."""

        prof, configs, reporter = ctx.profile, ctx.configs, ctx.reporter
        reporter.phase("accuracy_candidate", "accuracy: candidate")
        same = configs.same("reference", "candidate")
        if not prof.sequential.full and not (same and ctx.full_reference):
            return self._sequential(ctx)
        cand = self.result_of(configs.accuracy_engine("candidate"), prof, reporter)
        if same:  # with --accept it becomes the stored reference: every item
            return Outcome(reference=cand, candidate=cand,
                           decision=decided_on_every_item(cand, cand, ctx.limit),
                           source="measured now (the candidate has no patches)",
                           reference_full=cand)
        notes: list[str] = []
        stored = _stored(ctx, cand, notes)
        if stored is not None:
            return Outcome(reference=stored, candidate=cand,
                           decision=decided_on_every_item(stored, cand, ctx.limit),
                           source=f"loaded from {ctx.stored_name}", notes=notes)
        reporter.phase("accuracy_reference", "accuracy: reference (no stored result for "
                       "this environment, model and tasks)")
        ref = self.result_of(configs.accuracy_engine("reference"), prof, reporter)
        return Outcome(reference=ref, candidate=cand,
                       decision=decided_on_every_item(ref, cand, ctx.limit),
                       source="measured now", notes=notes, reference_full=ref)

    def _sequential(self, ctx: Context) -> Outcome:
        """The sequential guard: the stored reference where it stands in; else, with
        ``--accept``, the reference on every item first (it will be stored); else the
        reference on the candidate's items, look by look."""

        prof, configs, reporter = ctx.profile, ctx.configs, ctx.reporter
        spec = Tasks.of(prof)
        notes: list[str] = []
        with reporter.progress(None, "accuracy") as bar:
            engine = configs.accuracy_engine("candidate")
            cand_lm = make_lm(engine, engine.tokenizer, spec, bar)
            suite = sequential.survey(cand_lm, spec)
            if configs.same("reference", "candidate"):
                reference, source, full = None, "measured now (the candidate has no " \
                    "patches)", None
            else:
                reference, source, full = self._reference(ctx, suite, spec, bar, notes)
            found = sequential.until_decided(cand_lm, reference, spec, prof, limit=ctx.limit,
                                             say=reporter.say, suite=suite)
        decision = found.decision
        notes.append(f"accuracy: {decision.items} of {decision.total} items ({decision.why})")
        return Outcome(reference=found.reference, candidate=found.candidate,
                       decision=decision, source=source, notes=notes,
                       sequential=found.details(), reference_full=full)

    def _reference(self, ctx: Context, suite, spec: Tasks, bar, notes: list[str]):
        """(what the candidate is paired with, where it came from, the full reference or
        None): see :meth:`_sequential`."""

        configs, reporter = ctx.configs, ctx.reporter
        stored = _stored(ctx, suite.result, notes)
        if stored is not None:
            return stored, f"loaded from {ctx.stored_name}", stored
        engine = configs.accuracy_engine("reference")
        if ctx.full_reference:
            reporter.phase("accuracy_reference", "accuracy: reference, every item (it will "
                           "be stored: --accept)")
            full = run_guard_tasks(engine, engine.tokenizer, spec, bar)
            return full, "measured now (every item)", full
        reporter.say("accuracy: the reference on the candidate's items, look by look (no "
                     "stored result for this environment, model and tasks)")
        return make_lm(engine, engine.tokenizer, spec, bar), "measured now (the same " \
            "items)", None


def _stored(ctx, result: AccuracyResult, notes: list[str]) -> AccuracyResult | None:
    """The stored reference accuracy where it stands in for ``result``'s tasks, items,
    metrics and filters (and this environment); else None, with a note saying why."""
    stored = ctx.stored_reference
    if not reusable(stored, ctx.environment, ctx.workload, ctx.force_environment, notes):
        return None
    changed = differences(stored["accuracy"], result)
    if changed:
        notes.append("stored reference accuracy not used: it was measured on "
                     f"{'; '.join(changed)}; measured now")
        return None
    return stored["accuracy"]
