"""``patchgate calibrate --merge FILE...``: measure nothing; add the runs of calibration
files measured elsewhere to the calibration of their hardware class.

A GPU session that is lent another card than the profile's file was measured on writes
its runs to files of their own (``--out``); runners of one class in a fleet calibrate
apart. Merged, their runs are one calibration: the file ``--append`` on that machine
would have taken (:func:`patchgate.store.calibration.path_for`: the profile's main file
where it holds that class, else ``calibration-<machine key>.json`` beside it), its own
runs first, then each file's in the order given. Every file must be of the same
profile, settings and environment (:func:`.calibration_file.same_calibration`); the summary
is computed again from the runs.
"""

from __future__ import annotations

from pathlib import Path

from .. import files
from ..errors import PatchgateError
from ..store import calibration
from ..store.baselines import BaselineStore
from .calibration_file import document, same_calibration


def merge(sources: list[Path], baselines_dir: Path, out: Path | None = None
          ) -> tuple[Path, dict]:
    """Where the merged calibration was written, and its document."""
    docs = []
    for path in sources:
        doc = calibration.load(path)
        if doc is None:
            raise PatchgateError(f"{path} does not exist",
                                 hint="give calibration files written by `patchgate "
                                 "calibrate --out`")
        docs.append((path, doc))
    if not docs:
        raise PatchgateError("--merge: no file given", hint="e.g. --merge a.json b.json")
    first = docs[0][1]
    target = out or calibration.path_for(BaselineStore(baselines_dir, first["profile"]),
                                         first["environment"])
    mine = calibration.load(target)
    if mine is not None and not any(Path(p).resolve() == target.resolve() for p, _ in docs):
        docs.insert(0, (target, mine))
    hint = ("merge only calibrations of one profile, settings and machine; the others "
            "go to a file of their own (--out)")
    for path, doc in docs:
        same_calibration(path, doc, first, hint)
    runs = [run for _, doc in docs for run in doc.get("runs") or []]
    head = {"profile": first["profile"], "environment": first["environment"],
            "settings": first["settings"], "load": first.get("load") or {},
            "wall_s": round(sum(doc.get("wall_s") or 0 for _, doc in docs), 1)}
    merged = document(head, runs, baselines_dir)
    files.atomic_write_json(target, merged)
    return target, merged
