"""What a finished guard run writes (:func:`write`): the baselines, the change-log entry,
the history line and the verdict file, all in one atomic step, so an interrupted or
failed run leaves every stored file as it was.

The current baseline also records the patches for other engines that were in the
folder (``extra.other_engines``): a patch the profile's engine can never run is not
"new" on every later run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from . import accuracy as acc
from . import baselines, changelog, history, storage
from .configs import Configurations
from .patches import Patch, skipped
from .verdict import Verdict


def write(opts, store, verdict: Verdict, measured, configs: Configurations, stored: dict,
          env: dict, patches: list[Patch]) -> None:
    """Everything a finished run writes, in one atomic step: the baselines (``--accept``
    and accepted), the change-log entry and the history line (``--accept`` or
    ``--record``, when something is new), the verdict file and its flipped items."""
    files: dict[Path, str] = {}
    accepted = verdict["verdict"] == "accepted"
    keep = opts.accept and accepted
    log_it = keep or opts.record
    if keep:
        files.update(store.render_many(envelopes(opts, verdict, measured, configs, stored,
                                                 env, patches)))
    if log_it and verdict["new_patches"]:
        old = opts.changelog.read_text(encoding="utf-8") if opts.changelog.exists() else ""
        files[opts.changelog] = changelog.with_entry(old, entry(verdict, configs.sets))
        path = store.history_path()
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        files[path] = old + history.line(history.record(verdict, kept=keep))
    elif log_it:
        verdict["notes"].append("no new or changed patches: no change-log entry")
    if opts.accept and not accepted:
        verdict["notes"].append("not accepted: baselines/ and CHANGELOG.md left as they were")
    if opts.json_path:
        if measured.accuracy.get("flips"):  # every flipped item, next to the verdict
            path = acc.flips_path(opts.json_path)
            verdict["accuracy"]["flips_file"] = path.name
            files[path] = acc.flips_jsonl(measured.accuracy["flips"])
        files[opts.json_path] = storage.json_text(verdict, opts.json_path)
    if files:
        storage.atomic_write_many(files)


def write_skipped(opts, store, verdict: Verdict, current: dict | None,
                  patches: list[Patch]) -> None:
    """What a skipped run writes: the verdict file, and with ``--accept`` the current
    baseline with the patches for other engines noted as seen (its measurements
    unchanged), so they are not new next time."""
    files: dict[Path, str] = {}
    if opts.accept and current is not None:
        others = other_engines(patches, opts.profile.engine)
        files.update(store.render_many({"current": dict(
            current, extra=dict(current.get("extra", {}), **others))}))
        verdict["notes"].append(
            "--accept: the current baseline notes "
            f"{', '.join(p['name'] for p in others['other_engines'])} as for other engines "
            "(nothing measured)")
    if opts.json_path:
        files[opts.json_path] = storage.json_text(verdict, opts.json_path)
    if files:
        storage.atomic_write_many(files)


def other_engines(patches: list[Patch], engine: str) -> dict:
    """The current baseline's record of the folder's patches for other engines."""
    return {"other_engines": [p.record() for p in skipped(patches, engine)]}


def is_new_best(verdict: Verdict) -> bool:
    """An accepted candidate becomes the fastest accepted state unless its score is
    estimated lower than that state's (or, without one, the current baseline's). An
    acknowledged slowdown (``--allow-slower``) resets it: later changes are judged
    against the state the maintainer accepted, not the one before."""
    if verdict.get("allowed_slower"):
        return True
    block = verdict["latency"]
    against = block["best"] or block["score"]
    return against["ratio"] <= 1.0


def envelopes(opts, verdict: Verdict, measured, configs: Configurations,
               stored: dict, env, patches: list[Patch]) -> dict[str, dict]:
    commit = baselines.git_commit(opts.baselines_dir.parent)
    samples = measured.latency.samples
    scenarios = measured.latency.scenarios

    others = other_engines(patches, opts.profile.engine)

    def envelope(role: str, label: str, accuracy: dict | None, extra: dict) -> dict:
        scen = {s.name: s.record() | {"samples_s": samples[label][s.name]} for s in scenarios}
        return baselines.make_envelope(
            opts.profile.name, role, env, [p.record() for p in configs.sets[label]], scen,
            accuracy, commit=commit, extra={"workload": verdict["workload"]} | extra)

    summary = {"score": verdict["score"], "S": verdict["S"], "C": verdict["C"],
               "accuracy_ratio": verdict["accuracy"]["ratio"]}
    out = {"reference": envelope("reference", "reference", measured.accuracy["reference"],
                                 {}),
           "current": envelope("current", "candidate", measured.accuracy["candidate"],
                               summary | others)}
    if is_new_best(verdict):
        out["best"] = envelope("best", "candidate", measured.accuracy["candidate"], summary)
    elif "best" in configs.labels:
        pass  # the stored fastest state stays as it is
    elif stored["current"] is not None:
        # the state being replaced was faster: it becomes the fastest accepted state
        out["best"] = envelope("best", "current", None, {})
    return out


def entry(verdict: Verdict, sets) -> str:
    new = [p for p in sets["candidate"] if p.name in verdict["new_patches"]]
    title = "; ".join(p.title.rstrip(".") for p in new) + "."
    description = " ".join(p.description.split("\n\n")[0] for p in new)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    return changelog.format_entry(date, title, description, verdict["verdict"],
                                  changelog.result_sentence(verdict), [p.name for p in new],
                                  profile=verdict["profile"])
