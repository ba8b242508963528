"""``patchgate calibrate``: the gate's latency error rates, measured on this runner.

A false-alarm rate and a power are measurements, not design figures. Calibration
runs the latency phase of the gate (:mod:`patchgate.latency.looks`: the same looks,
Holm, pooled score and fresh-process confirmation as a real run) many times on
planted patches (:mod:`patchgate.tools.planted`) whose truth is known:

- A/A: a patch that changes nothing; a rejection is a false alarm;
- slowdowns of 2, 5 and 10 % (by default) of every forward pass; a rejection is a
  catch, and the share caught is the power at that size.

Runs of each kind are interleaved (A/A, 2 %, 5 %, 10 %, A/A, ...), so a drift of the
machine falls on all kinds alike, and each run starts its engines afresh, as a gate
run does. The accuracy guard is not run: the planted patches do not change outputs.
Each configuration is compared with the unpatched model (two configurations per
run; a real run with accepted patches has three).

The result goes to ``baselines/<profile>/calibration.json`` (atomically, at the end:
an interrupted calibration leaves it as it was; each finished run is kept meanwhile in
a journal beside it, :mod:`patchgate.store.calibration_journal`, which ``--append``
takes up). Reports quote it: "on this runner:
0/20 false alarms, 19/20 caught at 5 %". Each run also records the width of the
paired interval of every scenario beside the unpaired one on the same samples
(:func:`patchgate.stats.shift_interval`): the gain of pairing, measured.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from .. import files
from ..errors import PatchgateError, interrupted_by, interruption
from ..report.console import Reporter
from ..report.timing import time_line
from ..stats import paired_t
from ..store import baselines, calibration, calibration_journal, environment
from ..store.calibration import load
from ..verdict import evidence
from .calibration_file import document, same_calibration
from .calibration_run import run_job
from .calibration_summary import expected_s, kinds_of, label, outcome_of


def _settings(prof) -> dict:
    th = prof.thresholds
    out = {"rounds": prof.rounds, "max_looks": prof.max_looks, "threshold": th.latency,
           "alpha": th.alpha, "confirm": prof.confirm, "settle_s": prof.settle_s}
    # keys of the test that newer profiles set: only where set, so that a calibration
    # recorded before them still takes --append
    for key in ("confirm_rounds", "confirm_looks"):
        if getattr(prof, key) is not None:
            out[key] = getattr(prof, key)
    if prof.confirm_strongest:
        out["confirm_strongest"] = True
    if prof.test != paired_t.SIGNED_RANK:
        out["test"] = prof.test
    if prof.repeats:
        out["repeats"] = dict(prof.repeats)
    if prof.primed:
        out["primed"] = list(prof.primed)
    return out


def _previous(target: Path, prof, env: dict) -> tuple[list[dict], list[dict]]:
    """The runs of an earlier calibration to add to (``--append``): those of the file
    and those its journal kept from a calibration cut off before it wrote the file;
    each of the same profile, settings and machine, or an error saying which differs."""
    doc = load(target)
    journal_path = calibration_journal.path_of(target)
    journal = calibration_journal.read(journal_path)
    hint = f"calibrate without --append (replaces {target}), or with the same settings"
    now = {"profile": prof.name, "settings": _settings(prof), "environment": env}
    for where, head in ((target, doc), (journal_path, journal[0] if journal else None)):
        if head is not None:
            same_calibration(where, head, now, hint)
    return list((doc or {}).get("runs") or []), journal[1] if journal else []


@dataclass(frozen=True)
class Plan:
    """What to calibrate: ``runs`` of each kind (A/A and each planted ``slowdowns``
    fraction) in each of the ``conditions`` ("quiet", and "load": ``load`` busy
    processes beside the gate, :mod:`.load`), where the file goes (``out``; None: the
    profile's calibration file), and whether to add to the runs already there
    (``append``: a calibration spread over several sessions, as GPU leases are)."""

    runs: int
    slowdowns: tuple[float, ...]
    out: Path | None = None
    append: bool = False
    load: int = 0
    conditions: tuple[str, ...] = ("quiet",)
    ray: str | None = None  # a Ray cluster's address: the runs spread over its nodes
    aa: bool = True  # A/A runs beside the planted ones (False: planted runs only)
    # seconds from the start: no run is started that would end after them (by the
    # longest finished run of its kind, :func:`expected_s`); None: no limit
    time_limit: float | None = None


def calibrate(prof, baselines_dir: Path, plan: Plan, reporter) -> dict:
    """Run the calibration and write its file; returns the document. The runs of every
    kind and condition are interleaved (A/A quiet, 5 % quiet, ..., A/A load, ...), so a
    drift of the machine falls on all alike."""
    runs, slowdowns, out, append = plan.runs, list(plan.slowdowns), plan.out, plan.append
    if runs < 1:
        raise PatchgateError("--runs must be at least 1", hint="20 gives a useful interval")
    if plan.time_limit is not None and plan.ray:
        raise PatchgateError("--time-limit applies to runs on this machine, not with --ray",
                             hint="leave out one of them")
    if any(not 0 < f < 1 for f in slowdowns):
        raise PatchgateError(f"slowdowns must be fractions in (0, 1), got {slowdowns}",
                             hint="e.g. --slowdowns 0.02,0.05,0.1")
    store = baselines.BaselineStore(baselines_dir, prof.name)
    env = environment.fingerprint(prof.engine, prof.device)
    target = out or calibration.path_for(store, env)  # never another class's file
    journal = calibration_journal.path_of(target)
    stored, kept = _previous(target, prof, env) if append else ([], [])
    if not append and journal.exists():
        reporter.say(f"{journal}: the runs a cut-off calibration kept there are dropped "
                     "(without --append this calibration replaces the file)")
    calibration_journal.start(journal, {"profile": prof.name, "settings": _settings(prof),
                                        "environment": env}, kept)
    if kept:
        reporter.say(f"{len(kept)} run(s) kept in {journal} by a cut-off calibration: "
                     "added to this one")
    earlier = stored + kept
    records: list[dict] = []
    t0 = time.perf_counter()
    kinds = [f for f in kinds_of(slowdowns) if plan.aa or f != 0.0]
    if not kinds:
        raise PatchgateError("--no-aa and no --slowdowns: nothing to run",
                             hint="e.g. --no-aa --slowdowns 0.05")
    jobs = [(prof, f, c, plan.load if c == "load" else 0, i) for i in range(runs)
            for c in plan.conditions for f in kinds]

    def said(n: int, rec: dict) -> None:
        calibration_journal.add(journal, rec)
        records.append(rec)
        kind = [r for r in records if r["planted"] == rec["planted"]
                and r["condition"] == rec["condition"]]
        tally = ", ".join(f"{sum(outcome_of(r) == w for r in kind)} {w}"
                          for w in (evidence.REJECTED, evidence.INCONCLUSIVE,
                                    evidence.ACCEPTED))
        where = f" on {rec['node']['class']}" if rec.get("node") else ""
        took = time_line({"timings_s": {**rec.get("timings_s", {}), "total": rec["wall_s"]}})
        reporter.say(f"calibrate {len(records)}/{len(jobs)} {label(rec['planted'])} "
                     f"{rec['condition']}: {rec['outcome']}, score ratio "
                     f"{rec['score_ratio']:.3f}, {rec['looks']} look(s), {took}{where}; "
                     f"so far {tally}")

    deadline = None if plan.time_limit is None else t0 + plan.time_limit
    try:
        done = _run_jobs(plan, prof, jobs, said, reporter,
                         deadline=deadline, finished=earlier)
    except BaseException as e:
        n = len(kept) + len(records)
        kept_line = (f"{n} finished run(s) kept in {journal}" if n else
                     "no run had finished")
        stop = interruption(e)  # also where an engine turned it into its own error
        if stop is not None:
            then = "" if stop is e else f" (then: {e})"
            raise PatchgateError(f"calibration interrupted{interrupted_by(stop)}: {target} "
                                 f"left as it was; {kept_line}{then}",
                                 hint="`patchgate calibrate --append` with the same "
                                 "settings adds the runs kept") from e
        if n:
            reporter.say(f"{kept_line}; `patchgate calibrate --append` with the same "
                         "settings adds them")
        raise
    if len(done) < len(jobs):
        reporter.say(f"{len(jobs) - len(done)} of {len(jobs)} run(s) not started: they "
                     f"would have ended after --time-limit {plan.time_limit:g} s "
                     "(`--append` adds them later)")
    records = earlier + done  # in the interleaved order of the jobs, wherever they ran
    doc = document({"profile": prof.name, "environment": env, "settings": _settings(prof),
                    "load": {"busy_processes": plan.load, "cpu_count": os.cpu_count()},
                    "wall_s": round(time.perf_counter() - t0, 1)},
                   records, baselines_dir)
    files.atomic_write_json(target, doc)
    calibration_journal.end(journal)
    return doc


def _run_jobs(plan: Plan, prof, jobs: list, said, reporter, *, deadline: float | None = None,
              finished: list[dict] = ()) -> list[dict]:
    """Every job run, here one after another or over the Ray cluster's nodes; ``said``
    hears of each as it ends. The runs in the jobs' order. Here, with a ``deadline``
    (a ``time.perf_counter`` value), a job that would end after it is left out: by
    :func:`expected_s` over the ``finished`` runs and those done here; while none has
    finished, the first job runs."""
    if plan.ray:
        from ..spread import cluster
        from ..spread import runs as spread_runs

        cluster.connect(plan.ray)
        # planted runs are the long ones (a rejection measures again in fresh engines)
        return spread_runs.spread(
            run_job, jobs, engine=prof.engine, device=prof.device, said=said,
            long=lambda job: job[1] != 0.0,
            waiting=lambda n, total, s: reporter.say(
                f"on the cluster: {n}/{total} run(s) done, {total - n} running or "
                f"waiting for a bench slot, {s:.0f} s so far"))
    done: list[dict] = []
    for job in jobs:
        if deadline is not None:
            need = expected_s(job[1], job[2], [*finished, *done])
            left = deadline - time.perf_counter()
            if need is not None and need > left:
                reporter.say(f"not starting {label(job[1])} {job[2]} run {job[4] + 1}: "
                             f"{left:.0f} s left of --time-limit, a run of its kind "
                             f"took {need:.0f} s")
                continue
        done.append(run_job(*job, reporter=reporter))
        said(len(done) - 1, done[-1])
    return done


def add_command(sub, root: Path) -> None:
    """``patchgate calibrate``."""
    c = sub.add_parser("calibrate", help="measure the gate's latency error rates on this "
                       "machine: A/A runs and planted slowdowns")
    c.add_argument("--profile", default="default", help="profile name (see `patchgate profiles`)")
    c.add_argument("--runs", type=int, default=20, help="runs of each kind (default: 20)")
    c.add_argument("--slowdowns", default="0.02,0.05,0.1",
                   help="planted slowdowns, comma-separated fractions (default: 0.02,0.05,0.1; "
                   "\"\": A/A runs only)")
    c.add_argument("--no-aa", action="store_true",
                   help="planted runs only, no A/A run (a GPU call holds one run: the A/A "
                   "runs come from calls of their own, --append)")
    c.add_argument("--baselines", type=Path, default=root / "baselines",
                   help="folder of stored results; the result goes to "
                   "<baselines>/<profile>/calibration.json, or beside it to "
                   "calibration-<machine key>.json where that file holds another "
                   "hardware class")
    c.add_argument("--out", type=Path, help="write the calibration here instead")
    c.add_argument("--rounds", type=int, help="timed rounds per look (profile default)")
    c.add_argument("--append", action="store_true",
                   help="add the runs to the calibration file's (same profile, settings and "
                   "machine): a calibration spread over several sessions")
    c.add_argument("--stored", action="store_true",
                   help="measure nothing: the paired and unpaired interval widths of the "
                   "samples stored in <baselines>/<profile>/{reference,current}.json")
    c.add_argument("--replay", type=Path, metavar="FILE",
                   help="measure nothing: decide the first look of every run in the "
                   "calibration FILE again under --profile's rule (its test, rounds, "
                   "threshold, level), on the rounds the run measured; e.g. the t-test "
                   "profile against the signed-rank runs of the same machine")
    c.add_argument("--merge", type=Path, nargs="+", metavar="FILE",
                   help="measure nothing: add the runs of these calibration files (same "
                   "profile, settings and machine, e.g. written with --out on another "
                   "card) to the calibration of their hardware class under --baselines "
                   "(or --out)")
    c.add_argument("--load", type=int, default=0, metavar="N",
                   help="also measure under load: N busy processes beside the gate, started "
                   "and ended around each loaded run (the runs are interleaved with quiet "
                   "ones); 0: quiet only")
    c.add_argument("--conditions", choices=("both", "quiet", "load"),
                   help="which conditions to run (default: both with --load, else quiet)")
    c.add_argument("--ray", metavar="ADDRESS",
                   help="spread the runs over a Ray cluster's nodes, one run per node at a "
                   "time (`auto`: the cluster this machine belongs to); each run records "
                   "its node and hardware class (pip install -e .[ray])")
    c.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="start no run that would end more than SECONDS after the start "
                   "(by the longest finished run of its kind, here or in the file and "
                   "journal with --append); the file gets the runs that ran. For a "
                   "device call or CI job of fixed length")
    c.add_argument("--quiet", action="store_true", help="no progress bars or lines")
    c.set_defaults(handler=handle)


def handle(args) -> int:
    from ..profile import get_profile
    from ..report.calibration import render

    profile = get_profile(args.profile)
    if args.stored:
        from .pairing_gain import show

        return show(args.baselines, args.profile)
    if args.rounds is not None:
        if args.rounds < 2:
            raise PatchgateError("--rounds must be at least 2", hint="use 5 or more")
        profile = profile.with_overrides(rounds=args.rounds)
    if args.merge:
        from .calibration_merge import merge

        target, doc = merge(args.merge, args.baselines, args.out)
        print(f"{len(doc['runs'])} run(s) in {target}")
        print(render(doc))
        return 0
    if args.replay is not None:
        from .calibration_replay import render as render_replay
        from .calibration_replay import replay

        doc = load(args.replay)
        if doc is None:
            raise PatchgateError(f"{args.replay} does not exist",
                                 hint="give a calibration file, e.g. "
                                 "baselines/<profile>/calibration.json")
        print(render_replay(replay(doc, profile, str(args.replay))))
        return 0
    try:
        slowdowns = tuple(float(x) for x in args.slowdowns.split(",") if x.strip())
    except ValueError:
        raise PatchgateError(f"--slowdowns {args.slowdowns!r}: not comma-separated numbers",
                             hint="e.g. --slowdowns 0.02,0.05,0.1") from None
    if args.time_limit is not None and not args.time_limit > 0:
        raise PatchgateError(f"--time-limit {args.time_limit:g}: must be a positive number "
                             "of seconds", hint="e.g. --time-limit 560 for a 10-minute call")
    which = args.conditions or ("both" if args.load else "quiet")
    conditions = ("quiet", "load") if which == "both" else (which,)
    if "load" in conditions and args.load < 1:
        raise PatchgateError("--conditions load needs --load N (busy processes)",
                             hint=f"e.g. --load {os.cpu_count()}")
    reporter = Reporter(quiet=args.quiet)
    reporter.say(f"calibrating {profile.name}: {args.runs} runs x "
                 f"{len(slowdowns) + (not args.no_aa)} kind(s) "
                 f"x {len(conditions)} condition(s) ({', '.join(conditions)}), each the "
                 "latency phase of a gate run; the file is written at the end, each "
                 "finished run kept meanwhile in its journal (*.runs.jsonl)")
    plan = Plan(runs=args.runs, slowdowns=slowdowns, out=args.out, append=args.append,
                load=args.load, conditions=conditions, ray=args.ray, aa=not args.no_aa,
                time_limit=args.time_limit)
    doc = calibrate(profile, args.baselines, plan, reporter)
    print(render(doc))
    return 0
