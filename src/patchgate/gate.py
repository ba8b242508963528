"""One guard run: patches -> engines -> latency -> accuracy -> verdict -> files.

The configurations (:mod:`patchgate.configs`) are compared side by side on this
machine: the candidate (every patch that applies), the current baseline (the
accepted patches), the fastest accepted state when it is another one, and the
reference (no patches). Latency is always measured now (:mod:`patchgate.latency`).
The reference's accuracy is loaded from ``reference.json`` only when its
environment fingerprint equals this machine's and it was measured on the same model
files and task data (:mod:`patchgate.workload`); otherwise it is measured now.

Nothing under ``baselines/`` or CHANGELOG.md is written unless the run completes:
``--accept`` (accepted runs) replaces the baselines and appends the change-log entry
in one atomic step; ``--record`` logs the run whatever the verdict, without touching
the baselines.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import accuracy as acc
from . import (
    agreement,
    attribution,
    baselines,
    calibration,
    environment,
    explain,
    history,
    outputs,
    progress,
    workload,
)
from . import latency as lat
from .config import Profile, repo_root
from .configs import Configurations
from .errors import PatchgateError
from .patches import Patch, discover, skipped
from .report import render_terminal
from .verdict import Verdict, accuracy_block, build, task_notes


@dataclass
class GuardOptions:
    profile: Profile
    patches_dir: Path
    baselines_dir: Path
    changelog: Path
    json_path: Path | None = None
    accept: bool = False
    record: bool = False
    force_environment: bool = False
    quiet: bool = False
    allow_slower: str | None = None  # a maintainer's reason: latency regressions pass
    attribute: bool = False  # also measure the new patches one prefix at a time
    explain: bool = False  # profile the scenarios found slower, both sides, and diff


@dataclass
class Run:
    """State of a run in progress (the CLI reads ``step`` when interrupted)."""

    opts: GuardOptions
    step: str = "starting"
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _t: float = field(default_factory=time.perf_counter)

    def enter(self, step: str) -> None:
        now = time.perf_counter()
        self.timings[self.step] = round(self.timings.get(self.step, 0) + now - self._t, 2)
        self.step, self._t = step, now
        self.say(f"[patchgate] {step}")

    def say(self, text: str) -> None:
        """A step line: printed whatever ``quiet`` says (it silences the bars only)."""
        print(text, file=sys.stderr, flush=True)

    def progress(self, total: int | None, desc: str):
        """A bar on a terminal, a plain line now and then elsewhere (patchgate.progress)."""
        return progress.progress(total, desc, self.opts.quiet)


@dataclass
class Measurements:
    """What a run measured, kept apart from the verdict: the latency phase and each
    configuration's accuracy records (what the baselines store)."""

    latency: lat.LatencyResult
    accuracy: dict[str, dict]  # {"candidate": ..., "reference": ...}


def plan(patches: list[Patch], engine: str, current: dict | None, best: dict | None = None
         ) -> tuple[dict[str, list[Patch]], list[str]]:
    """The patch set of each configuration, and notes about the plan. ``best`` (the
    fastest accepted state) joins only if all its patches are still in the folder."""
    notes = [f"{p.name} does not apply to engine {engine} (ENGINES={list(p.engines)}): skipped"
             for p in skipped(patches, engine)]
    applicable = [p for p in patches if p.applies_to(engine)]
    accepted = {(p["name"], p["sha256"]) for p in (current or {}).get("patches", [])}
    cur = [p for p in applicable if (p.name, p.sha256) in accepted]
    present = {(p.name, p.sha256) for p in applicable}
    for name, digest in sorted(accepted - present):
        notes.append(f"{name} is in the current baseline but not in the patch folder "
                     f"(or its content changed, sha256 {digest[:12]}...)")
    for p in applicable:
        if (p.name, p.sha256) not in accepted:
            notes.append(f"new: {p.name} — {p.title}")
    sets = {"candidate": applicable, "current": cur, "reference": []}
    if best is not None:
        wanted = [(p["name"], p["sha256"]) for p in best.get("patches", [])]
        missing = [name for name, digest in wanted if (name, digest) not in present]
        if missing:
            notes.append("the fastest accepted state cannot be measured: "
                         f"{', '.join(missing)} changed or left the patch folder")
        else:
            sets["best"] = [p for p in applicable if (p.name, p.sha256) in set(wanted)]
    return sets, notes


def run_guard(opts: GuardOptions, run: Run | None = None) -> Verdict:
    """Run the gate; returns the verdict (and writes files as the options say)."""
    run = run or Run(opts)
    prof = opts.profile
    _check_scenarios(opts)
    run.enter("validating patches")
    patches = discover(opts.patches_dir)
    store = baselines.BaselineStore(opts.baselines_dir, prof.name)
    run.enter("loading baselines")
    stored = {role: store.load(role) for role in baselines.ROLES}
    records = store.history()
    sets, run.notes = plan(patches, prof.engine, stored["current"], stored["best"])
    untested = _untested(patches, prof.engine, stored["current"])
    if untested:
        return _skip(run, untested, store, stored["current"], patches)
    new = [p for p in sets["candidate"] if p not in sets["current"]]
    if opts.attribute and len(new) > 1:
        run.say(f"[patchgate] {attribution.cost(prof, new)}")
    with Configurations(prof, sets, lambda s: run.enter(s)) as configs:
        served = _serving(run, prof, sets) if prof.scenarios == "serving" else None
        configs.start()
        env = environment.fingerprint(prof.engine, prof.device)
        work = workload.fingerprint(prof.model_path(), _task_path(prof), prof.model)
        verdict, measured = _evaluate(run, prof, configs, stored, env, work, served)
        if opts.explain and served is None:
            verdict["explain"] = _explain(run, prof, configs, measured.latency)
        if opts.attribute:
            _attribute(run, prof, configs, new, verdict, measured)
    verdict["history"] = {"change_points": history.change_points(records)}
    verdict["calibration"] = calibration.quote(store)
    verdict["timings_s"] = run.timings
    run.enter("writing results")
    outputs.write(opts, store, verdict, measured, configs, stored, env, patches)
    run.enter("done")
    return verdict


def _attribute(run: Run, prof, configs: Configurations, new: list[Patch], verdict: Verdict,
               measured: Measurements) -> None:
    if len(new) < 2:
        run.notes.append(f"--attribute: {len(new)} new patch(es): the verdict is its effect")
        return
    if prof.guard != "lm_eval":
        run.notes.append("--attribute: the accuracy of each prefix needs the lm_eval guard; "
                         "latency only")
    run.enter(f"attribution: {len(new)} new patches, one prefix at a time")

    def accuracy(engine):
        if prof.guard != "lm_eval":
            return {"mean": 0.0}
        return _accuracy(run, prof, engine)

    verdict["attribution"] = attribution.run(
        prof, configs, new, accuracy, measured.accuracy["reference"],
        measured.accuracy["candidate"], run.progress, run.say)


def _known(current: dict | None) -> set[tuple[str, str]]:
    """(name, sha256) of the patches the current baseline has seen: those it contains
    and those for another engine that were in the folder when it was written."""
    current = current or {}
    seen = current.get("patches", []) + current.get("extra", {}).get("other_engines", [])
    return {(p["name"], p["sha256"]) for p in seen}


def _untested(patches: list[Patch], engine: str, current: dict | None) -> str | None:
    """Why nothing can be tested: there are new patches, and none of them applies to
    this profile's engine (None when something can be tested). A patch for another
    engine that the current baseline has already seen is not new."""
    known = _known(current)
    new = [p for p in patches if (p.name, p.sha256) not in known]
    if not new or any(p.applies_to(engine) for p in new):
        return None
    names = ", ".join(f"{p.name} (ENGINES={list(p.engines)})" for p in new)
    return (f"nothing was tested: every new patch is for another engine than this "
            f"profile's {engine}: {names}; run the gate on a profile of that engine")


def _skip(run: Run, reason: str, store, current: dict | None, patches: list[Patch]
          ) -> Verdict:
    """Nothing measured (:func:`patchgate.outputs.write_skipped` says what is written)."""
    from .verdict import skipped_verdict

    verdict = skipped_verdict(run.opts.profile.name, reason)
    verdict["notes"] = run.notes
    run.enter("writing results")
    outputs.write_skipped(run.opts, store, verdict, current, patches)
    run.enter("done")
    return verdict


def _check_scenarios(opts: GuardOptions) -> None:
    """Refuse a scenario set the run cannot use, before anything starts."""
    if opts.profile.scenarios != "static":
        from .serving import phase

        phase.check(opts.profile, accept=opts.accept, record=opts.record,
                    attribute=opts.attribute)


def _serving(run: Run, prof: Profile, sets):
    """The serving latency phase (patchgate.serving), before any engine holds the GPU:
    one server per configuration, all ended when it returns."""
    from .serving import phase

    out = explain.folder_for(run.opts.json_path) if run.opts.explain else None
    return phase.run(prof, sets, run.progress, run.enter, explain_dir=out,
                     explicit_folder=run.opts.json_path is None)


def _explain(run: Run, prof: Profile, configs: Configurations, latency) -> dict:
    """``--explain`` on the static set: the slower scenarios profiled in the engines."""
    return explain.in_engines(configs, latency, prof.seed,
                              explain.folder_for(run.opts.json_path), run.enter,
                              explicit_folder=run.opts.json_path is None)


def _evaluate(run, prof, configs: Configurations, stored, env, work, served=None
              ) -> tuple[Verdict, Measurements]:
    latency = served.latency if served else lat.run(configs, prof, run.progress, run.enter)
    run.notes.extend(latency.notes)
    _latency_notes(run, latency)
    mode = None
    if prof.guard == "token_agreement":
        ref_acc, cand_acc, ref_source = _agreement(run, prof, configs)
        mode = agreement.MODE
    else:
        ref_acc, cand_acc, ref_source = _task_accuracy(run, prof, configs, stored, env,
                                                       work)
    ref_items, cand_items = acc.paired_scores(ref_acc, cand_acc)
    flipped = acc.flips(ref_acc, cand_acc)
    accuracy = accuracy_block(ref_items, cand_items, ref_acc, cand_acc, prof, flips=flipped)
    accuracy["reference_source"] = ref_source
    if mode:
        accuracy["mode"] = mode
    compared_with = "current baseline" if not configs.same("current", "reference") or \
        stored["current"] else "reference"
    verdict = build(prof, latency, accuracy, compared_with=compared_with,
                    allow_slower=run.opts.allow_slower)
    run.notes.extend(task_notes(accuracy, prof.thresholds.accuracy_reject))
    if latency.same_as_current:
        run.notes.append("the candidate is the current baseline (no new or changed patches): "
                         "its latency is compared with itself")
    sets = configs.sets
    confirm = "; slowdowns measured again in fresh engine processes" if prof.confirm else ""
    how = ("sglang.bench_serving against one server per configuration" if served else
           "measured now") + ", side by side, rounds interleaved and counterbalanced, " \
        f"paired by round{confirm}"
    verdict.update({
        "profile": prof.name,
        "patches": {label: [p.record() for p in sets[label]] for label in configs.labels},
        "new_patches": [p.name for p in sets["candidate"] if p not in sets["current"]],
        "environment": env,
        "workload": work,
        "measured": {"latency": how,
                     "candidate_accuracy": "measured now", "reference_accuracy": ref_source},
        "notes": run.notes,
    })
    if served:
        verdict["serving"] = served.metrics
        if served.explain is not None:
            verdict["explain"] = served.explain
    return verdict, Measurements(latency, {"candidate": acc.stored(cand_acc),
                                           "reference": acc.stored(ref_acc), "flips": flipped})


def _latency_notes(run: Run, result: lat.LatencyResult) -> None:
    """Say where the first processes and the fresh ones disagreed."""
    for comp, decisions in result.decisions.items():
        for item, d in decisions.items():
            if result.final(comp, item) != "unconfirmed":
                continue
            again = result.confirmation.get(comp, {}).get(item)
            what = "" if again is None else (
                f" but {100 * (again.comparison.ratio - 1):+.1f} % in fresh ones "
                f"({again.outcome}, p={again.comparison.p_slower:.2g})")
            against = "the fastest accepted state" if comp == "best" else "the current baseline"
            run.notes.append(
                f"{item} vs {against}: {100 * (d.comparison.ratio - 1):+.1f} % in the first "
                f"engine processes (p={d.comparison.p_slower:.2g}){what}: not confirmed, "
                "not counted as a slowdown")


def _agreement(run, prof, configs: Configurations):
    run.enter("accuracy: token agreement with the reference (random weights)")
    with run.progress(None, "agreement") as bar:
        ref_acc, cand_acc = agreement.run(configs.engine("reference"),
                                          configs.engine("candidate"), prof, bar)
    return ref_acc, cand_acc, "measured now (token agreement)"


def _task_accuracy(run, prof, configs: Configurations, stored, env, work):
    run.enter("accuracy: candidate")
    cand_acc = _accuracy(run, prof, configs.engine("candidate"))
    if configs.same("reference", "candidate"):
        return cand_acc, cand_acc, "measured now (the candidate has no patches)"
    if _reusable(run, stored["reference"], env, work):
        changed = acc.differences(stored["reference"]["accuracy"], cand_acc)
        if not changed:
            return (stored["reference"]["accuracy"], cand_acc,
                    f"loaded from {_rel(run.opts.baselines_dir)}/{prof.name}/reference.json")
        run.notes.append("stored reference accuracy not used: it was measured on "
                         f"{'; '.join(changed)}; measured now")
    run.enter("accuracy: reference (no stored result for this environment, model and tasks)")
    return _accuracy(run, prof, configs.engine("reference")), cand_acc, "measured now"


def _reusable(run, stored: dict | None, env: dict, work: dict) -> bool:
    """A stored reference accuracy stands in for a measurement only from this very
    environment (or with --force-environment, with the differences noted) and only
    for the same model files and task data (never forced)."""
    if not stored or not stored.get("accuracy"):
        return False
    changed = workload.differences((stored.get("extra") or {}).get("workload"), work)
    if changed:
        run.notes.append("stored reference accuracy not used: it was measured on other "
                         f"model files or task data ({'; '.join(changed)}); measured now")
        return False
    try:
        differences = baselines.check_comparable(stored, env, run.opts.force_environment)
    except PatchgateError:
        return False  # another environment: measure it now instead
    if differences:
        run.notes.append("stored reference accuracy from another environment used "
                         f"(--force-environment): {'; '.join(differences)}")
    return True


def _accuracy(run, prof, engine) -> dict:
    if prof.guard != "lm_eval":
        raise PatchgateError(f"profile {prof.name}: unknown guard {prof.guard!r}",
                             hint="use guard='lm_eval' or 'token_agreement'")
    with run.progress(None, "accuracy") as bar:
        return acc.run_guard_tasks(engine, engine.tokenizer, prof.tasks, str(_task_path(prof)),
                                   prof.eval_batch_size, bar, primary=prof.primary,
                                   task_args=prof.task_args, chat_template=prof.chat_template)


def _task_path(prof: Profile) -> Path:
    task_path = Path(prof.task_path)
    return task_path if task_path.is_absolute() else repo_root() / task_path


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def print_report(verdict: Verdict) -> None:
    print(render_terminal(verdict))
