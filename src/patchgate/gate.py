"""One guard run: patches -> engines -> six scenarios -> accuracy -> verdict -> files.

Three configurations are compared side by side in this process, on this machine:

- candidate: every patch that applies to the profile's engine;
- current: the patches already accepted (named, with the same content hash, in
  ``baselines/<profile>/current.json``);
- reference: no patches (the unpatched model), for accuracy and the score.

Configurations with the same patch set share one engine. Latency is always
measured now. The reference's accuracy is loaded from ``reference.json`` only when
its environment fingerprint equals this machine's and it was measured on the same
model files and task data (:mod:`patchgate.workload`); otherwise it is measured now.
The verdict says which numbers were measured and which were loaded.

Nothing under ``baselines/`` or CHANGELOG.md is written unless the run completes:
``--accept`` (accepted runs) replaces both baselines and appends the change-log
entry in one atomic step; ``--record`` logs the run whatever the verdict (a rejected
change, or one that is accepted but not kept), without touching the baselines.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import accuracy as acc
from . import agreement, baselines, changelog, environment, storage, workload
from .config import Profile, repo_root
from .engines import load_engine
from .errors import PatchgateError
from .measure import balanced_rounds, measure
from .patches import Patch, content_key, discover, skipped
from .report import render_terminal
from .scenarios import make_scenarios
from .stats import compare_latency, median
from .verdict import accuracy_block, compare_scenarios, decide, inconclusive_slowdowns, task_notes

LABELS = ("candidate", "current", "reference")
HISTORY = "history.jsonl"
HISTORY_SCHEMA_VERSION = 1


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
        if not self.opts.quiet:
            print(text, file=sys.stderr, flush=True)


def _progress(total: int | None, desc: str, quiet: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="call", disable=quiet, file=sys.stderr,
                dynamic_ncols=True, leave=False)


def plan(patches: list[Patch], engine: str, current: dict | None
         ) -> tuple[dict[str, list[Patch]], list[str]]:
    """The patch set of each configuration, and notes about the plan."""
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
    return {"candidate": applicable, "current": cur, "reference": []}, notes


def run_guard(opts: GuardOptions, run: Run | None = None) -> dict:
    """Run the gate; returns the verdict dict (and writes files as the options say)."""
    run = run or Run(opts)
    prof = opts.profile
    run.enter("validating patches")
    patches = discover(opts.patches_dir)
    store = baselines.BaselineStore(opts.baselines_dir, prof.name)
    run.enter("loading baselines")
    stored = {role: store.load(role) for role in ("reference", "current")}
    sets, run.notes = plan(patches, prof.engine, stored["current"])
    keys = {label: content_key(ps) for label, ps in sets.items()}
    engines: dict[str, object] = {}

    def start() -> dict:
        """(Re)start one engine per distinct patch set; ``engines`` is updated in place."""
        for eng in engines.values():
            eng.close()
        unique = list(dict.fromkeys(keys.values()))
        for key in unique:
            label = next(lb for lb in LABELS if keys[lb] == key)
            names = [lb for lb in LABELS if keys[lb] == key]
            run.enter(f"loading engine for {'+'.join(names)} ({len(sets[label])} patches)")
            engines[key] = load_engine(prof, sets[label], label, share=1 / len(unique))
        for eng in engines.values():  # engines in worker processes load in parallel
            if hasattr(eng, "ready"):
                eng.ready()
        return engines

    try:
        start()
        env = environment.fingerprint(prof.engine, prof.device)
        work = workload.fingerprint(prof.model_path(), _task_path(prof), prof.model)
        verdict = _evaluate(run, prof, sets, keys, engines, stored, env, work, start)
    finally:
        for eng in engines.values():
            eng.close()
    verdict["timings_s"] = run.timings
    run.enter("writing results")
    _write(opts, store, verdict, sets, stored, env)
    run.enter("done")
    return verdict


def _evaluate(run, prof, sets, keys, engines, stored, env, work, restart) -> dict:
    scenarios = make_scenarios(prof)
    names = {k: "+".join(lb for lb in LABELS if keys[lb] == k) for k in engines}
    run.enter(f"latency: {len(scenarios)} scenarios x {len(names)} configurations x "
              f"{balanced_rounds(prof.rounds, len(names))} rounds (+{prof.warmup} warm-up), "
              "interleaved")
    with _progress(_calls(prof, scenarios, names), "latency", run.opts.quiet) as bar:
        named_engines = {names[k]: e for k, e in engines.items()}
        named = measure(named_engines, scenarios, prof.rounds, prof.warmup, prof.seed, bar,
                        prof.settle_s)
        of_label = {label: names[keys[label]] for label in LABELS}
        looks = _more_rounds(run, prof, scenarios, named_engines, named, of_label, bar)
        s = {label: named[of_label[label]] for label in LABELS}
    rows = compare_scenarios(scenarios, s["candidate"], s["current"], s["reference"], prof,
                             looks)
    if prof.confirm and keys["candidate"] != keys["current"]:
        _confirm(run, prof, scenarios, rows, keys, names, restart)
    mode = None
    if prof.guard == "token_agreement":
        ref_acc, cand_acc, ref_source = _agreement(run, prof, engines, keys)
        mode = agreement.MODE
    else:
        ref_acc, cand_acc, ref_source = _task_accuracy(run, prof, engines, keys, stored, env,
                                                       work)
    ref_items, cand_items = acc.paired_scores(ref_acc, cand_acc)
    accuracy = accuracy_block(ref_items, cand_items, ref_acc, cand_acc, prof)
    accuracy["reference_source"] = ref_source
    if mode:
        accuracy["mode"] = mode
    compared_with = "current baseline" if keys["current"] != keys["reference"] or \
        stored["current"] else "reference"
    verdict = decide(prof, rows, accuracy, compared_with=compared_with)
    run.notes.extend(task_notes(accuracy, prof.thresholds.accuracy_reject))
    same = keys["candidate"] == keys["current"]
    if same:
        run.notes.append("the candidate is the current baseline (no new or changed patches): "
                         "its latency is compared with itself")
    verdict.update({
        "profile": prof.name,
        "patches": {label: [p.record() for p in sets[label]] for label in LABELS},
        "new_patches": [p.name for p in sets["candidate"] if p not in sets["current"]],
        "environment": env,
        "workload": work,
        "measured": {"latency": "measured now, side by side, rounds interleaved and "
                                "counterbalanced" + ("; slowdowns measured again in fresh "
                                                     "engine processes" if prof.confirm else ""),
                     "candidate_accuracy": "measured now", "reference_accuracy": ref_source},
        "notes": run.notes,
        "_samples": s, "_accuracy": {"candidate": cand_acc, "reference": ref_acc},
        "_scenarios": scenarios,
    })
    return verdict


def _calls(prof, scenarios, configurations) -> int:
    """Timed and warm-up calls of one :func:`measure` (the progress bar's total)."""
    n = len(configurations)
    return (prof.warmup + balanced_rounds(prof.rounds, n)) * len(scenarios) * n


def _confirm(run, prof, scenarios, rows, keys, names, restart) -> None:
    """Measure the regressed scenarios again in fresh engine processes; a slowdown
    stands only if this second, independent measurement finds it too (``rows`` are
    updated in place: each checked row gets a ``confirmation``).

    Why: two processes running the same code can differ steadily by several per cent
    on a shared machine (memory placement, thread scheduling), which no number of
    rounds inside those processes averages out. A real slowdown shows in any pair
    of processes; a process effect does not repeat in the same place. Requiring both
    measurements keeps the test at level alpha (it only adds a condition).
    """
    slow = [r["name"] for r in rows if r["regressed"]]
    if not slow:
        return
    pending = [sc for sc in scenarios if sc.name in slow]
    run.enter(f"confirming the slowdown of {', '.join(slow)} in fresh engine processes")
    engines = restart()
    named_engines = {names[k]: e for k, e in engines.items()}
    with _progress(_calls(prof, pending, names), "confirm", run.opts.quiet) as bar:
        fresh = measure(named_engines, pending, prof.rounds, prof.warmup, prof.seed + 1, bar,
                        prof.settle_s)
    th = prof.thresholds
    alpha = th.alpha / len(scenarios)
    cand, cur = names[keys["candidate"]], names[keys["current"]]
    for r in rows:
        if r["name"] not in slow:
            continue
        c, b = fresh[cand][r["name"]], fresh[cur][r["name"]]
        cmp = compare_latency(c, b, threshold=th.latency, alpha=alpha, confidence=1 - alpha,
                              seed=prof.seed)
        r["confirmation"] = {"median_s": median(c), "baseline_median_s": median(b),
                             "ratio": cmp.ratio, "ci_low": cmp.ci_low, "ci_high": cmp.ci_high,
                             "p_value": cmp.p_value, "alpha": alpha, "rounds": len(c),
                             "regressed": cmp.regressed}
        if not cmp.regressed:
            r["regressed"], r["mark"] = False, "~"
            run.notes.append(
                f"{r['name']}: {100 * (r['ratio'] - 1):.1f} % slower in the first engine "
                f"processes (p={r['p_value']:.2g}) but {100 * (cmp.ratio - 1):+.1f} % in fresh "
                f"ones (p={cmp.p_value:.2g}): not confirmed, not counted as a slowdown")


def _more_rounds(run, prof, scenarios, engines, samples, of_label, bar) -> dict[str, int]:
    """Measure again where a slowdown beyond the threshold is not yet significant, up to
    ``prof.extra_looks`` times. ``samples`` (per engine name) grow in place;
    ``of_label`` names the engine of each configuration. Returns the looks per
    scenario, which the final test divides alpha by."""
    looks = {sc.name: 1 for sc in scenarios}
    same = of_label["candidate"] == of_label["current"]  # compared with itself: no point
    for _ in range(0 if same else prof.extra_looks):
        view = {label: samples[name] for label, name in of_label.items()}
        rows = compare_scenarios(scenarios, view["candidate"], view["current"],
                                 view["reference"], prof, looks)
        slow = set(inconclusive_slowdowns(rows))
        pending = [sc for sc in scenarios if sc.name in slow]
        if not pending:
            break
        run.say(f"[patchgate] inconclusive slowdown in {', '.join(sorted(slow))}: "
                f"{prof.rounds} more rounds")
        bar.total += balanced_rounds(prof.rounds, len(engines)) * len(pending) * len(engines)
        bar.refresh()
        more = measure(engines, pending, prof.rounds, 0, prof.seed, bar, prof.settle_s)
        for name in engines:
            for sc in pending:
                samples[name][sc.name].extend(more[name][sc.name])
        for sc in pending:
            looks[sc.name] += 1
    return looks


def _agreement(run, prof, engines, keys):
    run.enter("accuracy: token agreement with the reference (random weights)")
    with _progress(None, "agreement", run.opts.quiet) as bar:
        ref_acc, cand_acc = agreement.run(engines[keys["reference"]],
                                          engines[keys["candidate"]], prof, bar)
    return ref_acc, cand_acc, "measured now (token agreement)"


def _task_accuracy(run, prof, engines, keys, stored, env, work):
    run.enter("accuracy: candidate")
    cand_acc = _accuracy(run, prof, engines[keys["candidate"]])
    if keys["reference"] == keys["candidate"]:
        return cand_acc, cand_acc, "measured now (the candidate has no patches)"
    if _reusable(run, stored["reference"], env, work):
        return (stored["reference"]["accuracy"], cand_acc,
                f"loaded from {_rel(run.opts.baselines_dir)}/{prof.name}/reference.json")
    run.enter("accuracy: reference (no stored result for this environment, model and tasks)")
    return _accuracy(run, prof, engines[keys["reference"]]), cand_acc, "measured now"


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
    with _progress(None, "accuracy", run.opts.quiet) as bar:
        return acc.run_guard_tasks(engine, engine.tokenizer, prof.tasks, str(_task_path(prof)),
                                   prof.eval_batch_size, bar)


def _task_path(prof: Profile) -> Path:
    task_path = Path(prof.task_path)
    return task_path if task_path.is_absolute() else repo_root() / task_path


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def public(verdict: dict) -> dict:
    """The verdict without the private fields (raw data kept for the baselines)."""
    return {k: v for k, v in verdict.items() if not k.startswith("_")}


def _write(opts: GuardOptions, store, verdict, sets, stored, env) -> None:
    files: dict[Path, str] = {}
    accepted = verdict["verdict"] == "accepted"
    log_it = (opts.accept and accepted) or opts.record
    if opts.accept and accepted:
        files.update(store.render_many(_envelopes(opts, verdict, sets, env)))
    if log_it and verdict["new_patches"]:
        old = opts.changelog.read_text(encoding="utf-8") if opts.changelog.exists() else ""
        files[opts.changelog] = changelog.with_entry(old, _entry(verdict, sets))
        hist = store.root / opts.profile.name / HISTORY
        old = hist.read_text(encoding="utf-8") if hist.exists() else ""
        files[hist] = old + json.dumps(history_record(verdict), sort_keys=True) + "\n"
    elif log_it:
        verdict["notes"].append("no new or changed patches: no change-log entry")
    if opts.accept and not accepted:
        verdict["notes"].append("not accepted: baselines/ and CHANGELOG.md left as they were")
    if opts.json_path:
        files[opts.json_path] = storage.json_text(public(verdict), opts.json_path)
    if files:
        storage.atomic_write_many(files)


def history_record(verdict: dict) -> dict:
    """One line of ``baselines/<profile>/history.jsonl``: a logged change in brief
    (what the trend plot and badges read)."""
    return {
        "schema_version": HISTORY_SCHEMA_VERSION,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": verdict["profile"],
        "verdict": verdict["verdict"],
        "new_patches": verdict["new_patches"],
        "patches": [p["name"] for p in verdict["patches"]["candidate"]],
        "score": verdict["score"], "S": verdict["S"], "C": verdict["C"],
        "accuracy_ratio": verdict["accuracy"]["ratio"],
        "scenarios": {r["name"]: {"median_s": r["median_s"],
                                  "reference_median_s": r["reference_median_s"]}
                      for r in verdict["scenarios"]},
    }


def _envelopes(opts, verdict, sets, env) -> dict[str, dict]:
    commit = baselines.git_commit(opts.baselines_dir.parent)
    out = {}
    for role, label in (("reference", "reference"), ("current", "candidate")):
        scen = {s.name: s.record() | {"samples_s": verdict["_samples"][label][s.name]}
                for s in verdict["_scenarios"]}
        out[role] = baselines.make_envelope(
            opts.profile.name, role, env, [p.record() for p in sets[label]], scen,
            verdict["_accuracy"][label], commit=commit,
            extra={"workload": verdict["workload"]} | (
                {"score": verdict["score"], "S": verdict["S"], "C": verdict["C"],
                 "accuracy_ratio": verdict["accuracy"]["ratio"]} if role == "current" else {}))
    return out


def _entry(verdict: dict, sets) -> str:
    new = [p for p in sets["candidate"] if p.name in verdict["new_patches"]]
    title = "; ".join(p.title for p in new)
    description = " ".join(p.description.split("\n\n")[0] for p in new)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    return changelog.format_entry(date, title, description, verdict["verdict"],
                                  changelog.result_sentence(verdict), [p.name for p in new],
                                  profile=verdict["profile"])


def print_report(verdict: dict) -> None:
    print(render_terminal(verdict))
