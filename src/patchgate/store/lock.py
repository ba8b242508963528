"""One writer at a time: a lock on the baselines folder while a run writes.

Two gates on the same ``baselines/`` (two CI jobs, a maintainer beside CI) may both
finish with something to write. The writing step holds an exclusive ``flock`` on the
baselines folder itself (no lock file to commit or leave behind): the second waits up
to ``timeout_s``, then fails clearly. Inside the lock the gate checks that the stored
files it read at the start are unchanged (:func:`patchgate.files.changed`): if another
run wrote them meanwhile, this run writes nothing and says so, so files from two runs
never mix and no history or change-log line is torn.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from ..errors import PatchgateError

WAIT_S = 600.0
POLL_S = 0.2


@contextlib.contextmanager
def writer_lock(folder: Path, timeout_s: float = WAIT_S, say=lambda _text: None):
    """Hold the exclusive lock of ``folder`` for the ``with`` block (of its nearest folder
    that exists, when it does not exist yet: nothing is created to hold a lock)."""
    folder = Path(folder).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    fd = os.open(folder, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PatchgateError(
                        f"another patchgate run is writing to {folder} and did not finish "
                        f"within {timeout_s:.0f} s; nothing was written",
                        hint="wait for it and run again") from None
                if not told:
                    say(f"waiting for another patchgate run writing to {folder}")
                    told = True
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
