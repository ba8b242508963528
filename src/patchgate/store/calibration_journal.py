"""A calibration's runs kept as they end, so that a cut-off calibration loses only the
run it was in.

A GPU calibration is spread over device calls that end at a fixed limit and leases that
can be taken back mid-run. ``patchgate calibrate`` writes its file only at the end (an
interrupted calibration leaves the stored file as it was), and keeps each finished run
meanwhile in a journal beside it, ``<file>.runs.jsonl``: a header line (profile,
settings, environment), then one line per run. ``--append`` takes the journal's runs
with the file's, after the same checks; a calibration that ends writes the file and
removes the journal. A run cut off mid-way is in neither.

Lines are appended and flushed one at a time; a last line cut off mid-write (the
process killed while writing it) is dropped, any other unreadable line is an error
that names the journal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import PatchgateError
from ..files import atomic_write_text

SUFFIX = ".runs.jsonl"


def path_of(target: Path) -> Path:
    """The journal of the calibration file ``target``."""
    return target.with_name(target.name + SUFFIX)


def _line(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True) + "\n"


def start(journal: Path, header: dict, runs: Sequence[dict] = ()) -> None:
    """A new journal (atomically): ``header``, then ``runs`` (carried over from an old
    one)."""
    atomic_write_text(journal, "".join(_line(obj) for obj in (header, *runs)))


def add(journal: Path, run: dict) -> None:
    """One finished run, appended and flushed to disk."""
    with journal.open("a", encoding="utf-8") as f:
        f.write(_line(run))
        f.flush()
        os.fsync(f.fileno())


def read(journal: Path) -> tuple[dict, list[dict]] | None:
    """``(header, runs)`` of a journal, or None where there is none."""
    if not journal.exists():
        return None
    hint = (f"delete {journal} (its runs are lost) and calibrate again, or repair the "
            "line named")
    lines = journal.read_text(encoding="utf-8").splitlines()
    objs = []
    for i, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except ValueError:
            if i == len(lines) and i > 1:  # the last line, cut off mid-write: not a run
                break
            raise PatchgateError(f"{journal}: line {i} is not JSON", hint=hint) from None
        if not isinstance(obj, dict):
            raise PatchgateError(f"{journal}: line {i} is not a JSON object", hint=hint)
        objs.append(obj)
    if not objs or "profile" not in objs[0]:
        raise PatchgateError(f"{journal}: no header line (profile, settings, environment)",
                             hint=hint)
    return objs[0], objs[1:]


def end(journal: Path) -> None:
    """The calibration file holds every run now: the journal goes."""
    journal.unlink(missing_ok=True)
