"""Progress of long phases: a bar on a terminal, a plain line now and then in a log.

A progress bar redraws itself with carriage returns; written to a CI log, every redraw
becomes a line (about 560 per latency phase on the H200). So:

- on a terminal, a tqdm bar (``TQDM_DISABLE=1`` and tqdm's other ``TQDM_*`` variables
  apply, since nothing is passed that would override them);
- anywhere else, :class:`LineProgress`: a plain line at most every ``every_s``
  seconds, and one at the end;
- ``--quiet``: neither (the step lines stay; they are one per step).

Every object here has what the gate uses of a tqdm bar: ``total`` (which may grow),
``update(n)``, ``set_postfix_str(s)``, ``refresh()`` and the context manager.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

EVERY_S = 10.0


class Silent:
    """Counts, prints nothing."""

    def __init__(self, total: int | None = None):
        self.total, self.n = total, 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LineProgress(Silent):
    """One plain line at most every ``every_s`` seconds, and a last one when done."""

    def __init__(self, total: int | None, desc: str, stream: TextIO,
                 every_s: float = EVERY_S, clock=time.monotonic):
        super().__init__(total)
        self.desc, self.stream, self.every_s, self.clock = desc, stream, every_s, clock
        self.postfix = ""
        self.start = self.last = clock()
        self.printed = 0

    def _line(self, final: bool = False) -> None:
        of = f"/{self.total}" if self.total else ""
        where = f" ({self.postfix})" if self.postfix and not final else ""
        took = f" in {self.clock() - self.start:.0f} s" if final else ""
        print(f"[patchgate] {self.desc}: {self.n}{of} calls{took}{where}", file=self.stream,
              flush=True)
        self.printed += 1

    def update(self, n: int = 1) -> None:
        super().update(n)
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            self._line()

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def close(self) -> None:
        if self.n:
            self._line(final=True)
            self.n = 0


def progress(total: int | None, desc: str, quiet: bool = False, stream: TextIO | None = None):
    """The progress object for a phase of ``total`` calls (None: not known)."""
    stream = stream or sys.stderr
    if quiet:
        return Silent(total)
    if stream.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="call", file=stream, dynamic_ncols=True,
                    leave=False)
    return LineProgress(total, desc, stream)


class Reporter:
    """What a run tells the person watching it, and how long each phase took.

    - :meth:`phase` enters a phase: a stable key (``timings`` are keyed by it: "engines",
      "latency", "accuracy_candidate", ...) and a step line saying what happens;
    - :meth:`say`: a step line within the phase;
    - :meth:`progress`: a bar or plain lines for a phase of many calls (:func:`progress`).

    Step lines go to ``stream`` (stderr) whatever ``quiet`` says; ``quiet`` silences the
    bars only. ``phase_key`` is the phase in progress (the CLI names it when interrupted);
    :meth:`elapsed` is the time since the reporter was made (a run's wall time so far).
    """

    def __init__(self, quiet: bool = False, stream: TextIO | None = None,
                 clock=time.perf_counter):
        self.quiet, self.stream, self.clock = quiet, stream, clock
        self.timings: dict[str, float] = {}
        self.phase_key = "start-up"
        self.doing = "start-up"
        self._t = self._started = clock()

    def elapsed(self) -> float:
        """Seconds since this reporter was made."""
        return round(self.clock() - self._started, 2)

    def phase(self, key: str, text: str | None = None) -> None:
        """End the phase in progress (its time adds to ``timings[key]``), start ``key``."""
        now = self.clock()
        if self.phase_key != "start-up":
            self.timings[self.phase_key] = round(
                self.timings.get(self.phase_key, 0.0) + now - self._t, 2)
        self.phase_key, self._t = key, now
        self.doing = text or key
        if text:
            self.say(text)

    def say(self, text: str) -> None:
        """A step line, ``[patchgate] text``."""
        print(f"[patchgate] {text}", file=self.stream or sys.stderr, flush=True)

    def progress(self, total: int | None, desc: str):
        """A bar on a terminal, a plain line now and then elsewhere; nothing if quiet."""
        return progress(total, desc, self.quiet, self.stream)
