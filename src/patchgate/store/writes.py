"""What a finished guard run writes: the baselines, the change-log entry, the history
line, the verdict file and its flipped items, all in one atomic step
(:func:`patchgate.files.atomic_write_many`), so an interrupted or failed run leaves
every stored file as it was.

The current baseline also records the patches for other engines that were in the
folder (``extra.other_engines``): a patch the profile's engine can never run is not
"new" on every later run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import files
from ..errors import PatchgateError
from ..patches import Patch, skipped
from . import baselines, changelog, flips, history
from .lock import writer_lock


@dataclass
class Record:
    """What the run measured, as the store keeps it: the patch set of each configuration
    (``sets``, by label), every patch of the folder, the latency result (raw samples
    per label), the accuracy results (``candidate``, ``reference``, ``flips``), the
    stored results the run started from (by role), and the environment fingerprint."""

    sets: dict[str, list[Patch]]
    patches: list[Patch]
    latency: object
    accuracy: dict
    stored: dict
    environment: dict


@dataclass
class Watch:
    """The files a run reads, fingerprinted at its start (before any patch code ran):
    the baselines of its profile, the change log, the patch folder, and what the
    engines load and the guard reads (the model folder, the task folder). A patch that
    rewrites any of them (the reference's weights, a stored result) cannot reach a
    verdict: the run refuses to write or report. The same holds for the code every
    process of the run imports (``code``, by file status: :func:`files.code_state`):
    a patch that edits lm-eval's metrics, torch, or this package on disk would change
    what later processes run (a confirmation's fresh engines, the accuracy guard)."""

    roots: list[Path]
    before: dict
    code_roots: list[Path] = field(default_factory=list)
    code: dict = field(default_factory=dict)

    @property
    def stored(self) -> list[Path]:
        """The stored state among the roots: the profile's baselines and the change log
        (small files: the probe keeps their bytes and puts them back)."""
        return self.roots[:2]

    @classmethod
    def start(cls, opts) -> Watch:
        prof = opts.profile
        roots = [Path(opts.baselines_dir) / prof.name, Path(opts.changelog),
                 Path(opts.patches_dir), prof.model_path(), prof.task_folder()]
        code_roots = files.code_roots()
        return cls(roots, files.fingerprint(roots), code_roots, files.code_state(code_roots))

    def check(self) -> None:
        """Refuse to go on if a watched file changed since the start, naming them."""
        touched = files.changed(self.before, self.roots)
        if touched:
            raise PatchgateError(
                f"stored files changed during the run: {', '.join(map(str, touched))}; "
                "nothing was written and no verdict is given",
                hint="a patch must not write files (patch code runs in the engines), or "
                "another run wrote them meanwhile: restore them (git checkout) and run again")
        code = files.code_changes(self.code, self.code_roots) if self.code_roots else []
        if code:
            more = f" and {len(code) - 5} more" if len(code) > 5 else ""
            raise PatchgateError(
                f"code that the run's processes import changed during the run: "
                f"{', '.join(code[:5])}{more}; nothing was written and no verdict is given",
                hint="a patch must not write outside its engine's scratch folder; reinstall "
                "what changed (pip install --force-reinstall <package>, git checkout for "
                "this package) and run again, with no install running beside the gate")


def planned(opts, store: baselines.BaselineStore) -> list[Path]:
    """The files this run may write, as its options say (checked writable up front)."""
    out = [p for p in (opts.json_path,) if p]
    if opts.json_path:
        out.append(flips.path_for(opts.json_path))
    if opts.accept:
        out += [store.path(role) for role in baselines.ROLES]
    if opts.accept or opts.record:
        out += [Path(opts.changelog), store.history_path()]
    return out


def notes(opts, status: str, new_patches: list[str]) -> list[str]:
    """What the verdict says about what this run writes (before it is assembled)."""
    out = []
    keep = opts.accept and status == "accepted"
    if (keep or opts.record) and not new_patches:
        out.append("no new or changed patches: no change-log entry")
    if opts.accept and status == "inconclusive":
        out.append("inconclusive, so not accepted: baselines/ and CHANGELOG.md left as they "
                   "were (--accept stores only what was shown not slower)")
    elif opts.accept and status != "accepted":
        out.append("not accepted: baselines/ and CHANGELOG.md left as they were")
    return out


def write(opts, store: baselines.BaselineStore, verdict: dict, record: Record | None,
          watch: Watch | None = None) -> None:
    """Everything a finished run writes, in one atomic step: the baselines (``--accept``
    and accepted), the change-log entry and the history line (``--accept`` or
    ``--record``, when something is new), the verdict file and its flipped items. Under
    the writer lock, and only if the stored files are as the run found them (``watch``)."""
    texts: dict[Path, str] = {}
    keep = opts.accept and verdict["verdict"] == "accepted"
    if keep:
        texts.update(store.render_many(envelopes(opts, verdict, record)))
    if (keep or opts.record) and verdict["new_patches"]:
        old = opts.changelog.read_text(encoding="utf-8") if opts.changelog.exists() else ""
        texts[opts.changelog] = changelog.with_entry(old, entry(verdict, record.sets))
        path = store.history_path()
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        texts[path] = old + history.line(history.record(verdict, kept=keep))
    if opts.json_path:
        if record is not None and record.accuracy.get("flips"):
            texts[flips.path_for(opts.json_path)] = flips.text(record.accuracy["flips"])
        texts[opts.json_path] = files.json_text(verdict, opts.json_path)
    _commit(store, texts, watch)


def _commit(store: baselines.BaselineStore, texts: dict[Path, str], watch: Watch | None
            ) -> None:
    with writer_lock(store.root):
        if watch is not None:
            watch.check()
        if texts:
            files.check_writable(texts)
            files.atomic_write_many(texts)


def skipped_notes(opts, current: dict | None, patches: list[Patch]) -> list[str]:
    """What a skipped run's verdict says about what it writes."""
    if not (opts.accept and current is not None):
        return []
    names = ", ".join(p["name"] for p in other_engines(patches, opts.profile.engine)
                      ["other_engines"])
    return [f"--accept: the current baseline notes {names} as for other engines "
            "(nothing measured)"]


def write_skipped(opts, store: baselines.BaselineStore, verdict: dict, current: dict | None,
                  patches: list[Patch], watch: Watch | None = None) -> None:
    """What a skipped run writes: the verdict file, and with ``--accept`` the current
    baseline with the patches for other engines noted as seen (its measurements
    unchanged), so they are not new next time."""
    texts: dict[Path, str] = {}
    if opts.accept and current is not None:
        others = other_engines(patches, opts.profile.engine)
        texts.update(store.render_many({"current": dict(
            current, extra=dict(current.get("extra", {}), **others))}))
    if opts.json_path:
        texts[opts.json_path] = files.json_text(verdict, opts.json_path)
    _commit(store, texts, watch)


def other_engines(patches: list[Patch], engine: str) -> dict:
    """The current baseline's record of the folder's patches for other engines."""
    return {"other_engines": [p.record() for p in skipped(patches, engine)]}


def is_new_best(verdict: dict) -> bool:
    """An accepted candidate becomes the fastest accepted state unless its score is
    estimated lower than that state's (or, without one, the current baseline's). An
    acknowledged slowdown (``--allow-slower``) resets it: later changes are judged
    against the state the maintainer accepted, not the one before."""
    if verdict.get("allowed_slower"):
        return True
    block = verdict["latency"]
    against = block["best"] or block["score"]
    return against["ratio"] <= 1.0


def envelopes(opts, verdict: dict, record: Record) -> dict[str, dict]:
    """The stored results an accepted run writes, by role."""
    commit = baselines.git_commit(opts.baselines_dir.parent)
    samples, scenarios = record.latency.samples, record.latency.scenarios
    others = other_engines(record.patches, opts.profile.engine)

    def envelope(role: str, label: str, accuracy: dict | None, extra: dict) -> dict:
        scen = {s.name: s.record() | {"samples_s": samples[label][s.name]} for s in scenarios}
        measured = {"patches": [p.record() for p in record.sets[label]], "scenarios": scen,
                    "accuracy": accuracy}
        return baselines.make_envelope(opts.profile.name, role, record.environment, measured,
                                       commit=commit,
                                       extra={"workload": verdict["workload"]} | extra)

    summary = {"score": verdict["score"], "S": verdict["S"], "C": verdict["C"],
               "accuracy_ratio": verdict["accuracy"]["ratio"]}
    out = {"reference": envelope("reference", "reference", record.accuracy["reference"], {}),
           "current": envelope("current", "candidate", record.accuracy["candidate"],
                               summary | others)}
    if is_new_best(verdict):
        out["best"] = envelope("best", "candidate", record.accuracy["candidate"], summary)
    elif "best" in record.sets:
        pass  # the stored fastest state stays as it is
    elif record.stored.get("current") is not None:
        # the state being replaced was faster: it becomes the fastest accepted state
        out["best"] = envelope("best", "current", None, {})
    return out


def entry(verdict: dict, sets) -> str:
    """The change-log entry of the run's new patches."""
    new = [p for p in sets["candidate"] if p.name in verdict["new_patches"]]
    title = "; ".join(p.title.rstrip(".") for p in new) + "."
    description = " ".join(p.description.split("\n\n")[0] for p in new)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    return changelog.format_entry(changelog.Entry(
        date, title, description, verdict["verdict"], changelog.result_sentence(verdict),
        [p.name for p in new], profile=verdict["profile"]))
