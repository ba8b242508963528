"""One guard run: patches -> engines -> latency -> accuracy -> verdict -> files.

The run only orchestrates; each stage is a folder of its own. The configurations
(:mod:`patchgate.patches.plan`) are compared side by side on this machine: the
candidate, the current baseline, the fastest accepted state when it is another one,
and the reference (no patches). The profile's scenario set measures latency
(:mod:`patchgate.latency.sets`), its guard judges accuracy (:mod:`patchgate.guard`),
the judgement and the document come from :mod:`patchgate.verdict` (a candidate that
passes the accuracy rule must also have computed its timed calls:
:mod:`patchgate.latency.outputs`), and
:mod:`patchgate.store.writes` writes the files, in one atomic step at the end:
nothing under ``baselines/`` or CHANGELOG.md is written unless the run completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import attribution, files
from .engines.configurations import Configurations
from .guard import base as guards
from .guard.results import flips, stored
from .latency import explain, offclock, outputs, sets
from .patches import Patch, discover
from .patches.plan import plan, untested
from .patches.probe import probe
from .profile import Profile
from .report.console import Reporter
from .store import base, calibration, environment, history, workload, writes
from .store import flips as flips_file
from .store.baselines import BaselineStore
from .verdict import accuracy, document, evidence
from .verdict.judge import judge, latency_notes


@dataclass(kw_only=True)
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
    base: str | None = None  # the git revision whose stored state judges (None: HEAD)
    origin: dict | None = None  # the profile's file, hash and overrides (profile.origin)
    ray: str | None = None  # a Ray cluster's address: latency and accuracy spread over it
    ray_actors: int | None = None  # accuracy engines per configuration (None: half the nodes)
    ray_benches: int | None = None  # latency benches (None: one per node; 0: here)


@dataclass
class _Run:
    """A run in progress: its options, reporter, the store it writes (the working tree),
    the stored state it is judged against (the base's, :mod:`patchgate.store.base`),
    patches, and the fingerprints of the files it watches (nothing is written if they
    change)."""

    opts: GuardOptions
    reporter: Reporter
    store: BaselineStore
    state: base.State
    patches: list[Patch]
    watch: writes.Watch

    @property
    def stored(self) -> dict:
        return self.state.results


def run_guard(opts: GuardOptions, reporter: Reporter | None = None) -> document.Verdict:
    """Run the gate; returns the verdict (and writes files as the options say)."""
    reporter = reporter or Reporter(opts.quiet)
    prof = opts.profile
    scenario_set, guard = sets.get(prof.scenarios), guards.get(prof.guard)
    scenario_set.check(prof, sets.Options(accept=opts.accept, record=opts.record,
                                          attribute=opts.attribute, explain=opts.explain))
    guard.check(prof)
    store = BaselineStore(opts.baselines_dir, prof.name)
    files.check_writable(writes.planned(opts, store))
    reporter.phase("validate", "validating patches")
    patches = discover(opts.patches_dir)
    reporter.phase("baselines", "loading baselines")
    state = base.read(opts.baselines_dir, opts.changelog, prof.name, opts.base)
    reporter.say(state.base["note"])
    run = _Run(opts, reporter, store, state, patches, writes.Watch.start(opts))
    patch_sets, notes = plan(patches, prof.engine, run.stored["current"], run.stored["best"])
    reason = untested(patches, prof.engine, run.stored["current"])
    if reason:
        return _skip(run, reason, notes)
    reporter.phase("probe", "importing the patches in a scratch process")
    probe([p for p in patch_sets["candidate"] if p.has_apply], prof.import_timeout_s,
          run.watch.roots, restore=run.watch.stored)
    with Configurations(prof, patch_sets, reporter.say) as configs:
        if opts.ray:  # accuracy in pools of actors; latency in benches, a round on one node
            from .spread import accuracy as spread_accuracy
            from .spread import latency as spread_latency

            spread_latency.check(opts, prof)
            configs.spread_accuracy(spread_accuracy.pools(opts.ray, opts.ray_actors,
                                                          say=reporter.say))
            if opts.ray_benches != 0:
                configs.spread_latency(spread_latency.benches(opts.ray, opts.ray_benches,
                                                              say=reporter.say))
        verdict, record = _measure(run, configs, scenario_set, guard, notes)
    reporter.phase("write", "writing results")
    writes.write(opts, store, verdict, record, run.watch)
    reporter.phase("done", "done")
    return verdict


def _measure(run: _Run, configs: Configurations, scenario_set, guard, notes: list[str]
             ) -> tuple[document.Verdict, writes.Record]:
    """Latency, accuracy and attribution on the configurations; the verdict."""
    opts, prof, reporter = run.opts, run.opts.profile, run.reporter
    out = explain.folder_for(opts.json_path) if opts.explain else None
    lat = scenario_set.measure(sets.Phase(profile=prof, configs=configs, reporter=reporter,
                                          explain_dir=out,
                                          explicit_folder=opts.json_path is None))
    env = environment.fingerprint(prof.engine, prof.device)
    work = workload.fingerprint(prof.model_path(), prof.task_folder(), prof.model,
                                prof.engine_args)
    where = f"{_rel(opts.baselines_dir)}/{prof.name}/reference.json"
    found = guard.evaluate(guards.Context(
        profile=prof, configs=configs, reporter=reporter,
        stored_reference=run.stored["reference"], environment=env, workload=work,
        force_environment=opts.force_environment, stored_name=where,
        full_reference=opts.accept))
    flipped = flips(found.reference, found.candidate)
    accuracy_doc = accuracy.block_of(found, prof, flipped)
    new = [p for p in configs.sets["candidate"] if p not in configs.sets["current"]]
    blocks = {"serving": lat.serving, "explain": lat.explain, "base": run.state.base,
              "profile_source": opts.origin,
              "attribution": attribution.attribute(configs, new, found, reporter, notes)
              if opts.attribute else None}
    if opts.json_path and flipped:
        accuracy_doc["flips_file"] = flips_file.path_for(opts.json_path).name
    spread = configs.accuracy_spread()
    if spread:
        accuracy_doc["spread"] = spread
    lat_spread = configs.latency_spread()
    reporter.phase("judge")
    compared = "current baseline" if not configs.same("current", "reference") or \
        run.stored["current"] else "reference"
    cal = calibration.pick(run.state.calibrations, env)  # this hardware class's rates
    judgement = judge(prof, lat.latency, accuracy_doc, found.decision, compared_with=compared,
                      allow_slower=opts.allow_slower,
                      calibrated_noise=calibration.own_noise(cal))
    if lat_spread:
        judgement["latency"]["spread"] = lat_spread
    offclock_notes = offclock.after_judgement(lat.latency.offclock,
                                              judgement["verdict"] == evidence.REJECTED)
    if lat.latency.answers and not found.decision.fails:
        outputs.check(lat.latency.answers, configs.name("reference"), configs.described())
    notes = notes + configs.notes + lat.latency.notes + latency_notes(lat.latency) + \
        found.notes + offclock_notes + \
        accuracy.task_notes(accuracy_doc, found.decision) + \
        writes.notes(opts, judgement["verdict"], [p.name for p in new])
    facts = document.Facts(
        profile=prof.name, new_patches=[p.name for p in new],
        patches={label: [p.record() for p in configs.sets[label]] for label in configs.labels},
        environment=env, workload=work, notes=notes,
        measured={"latency": lat.how, "candidate_accuracy": "measured now",
                  "reference_accuracy": found.source},
        history={"change_points": history.change_points(run.state.history)},
        calibration=cal, timings_s={**reporter.timings, "total": reporter.elapsed()},
        blocks=blocks)
    record = writes.Record(configs.sets, run.patches, lat.latency,
                           {"candidate": stored(found.candidate),
                            "reference": stored(found.reference_full or found.reference),
                            "flips": flipped},
                           run.stored, env)
    return document.assemble(judgement, facts), record


def _skip(run: _Run, reason: str, notes: list[str]) -> document.Verdict:
    """Nothing measured (:func:`patchgate.store.writes.write_skipped` says what is written)."""
    opts = run.opts
    current = run.stored["current"]
    verdict = document.skipped(opts.profile.name, reason, [run.state.base["note"], *notes,
                               *writes.skipped_notes(opts, current, run.patches)])
    run.reporter.phase("write", "writing results")
    writes.write_skipped(opts, run.store, verdict, current, run.patches, run.watch)
    run.reporter.phase("done", "done")
    return verdict


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
