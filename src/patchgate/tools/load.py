"""A load beside the gate: busy processes that compete for the CPU, started and ended by
``patchgate calibrate --load N`` around each run it measures under load.

A CI runner shared with other jobs is the normal case for a self-hosted runner, and
noise is what turns a slowdown into an accepted change. Each busy process spins in pure
Python at normal priority; they are started before a run's engines and ended (the
whole group) after it, so the quiet runs stay quiet.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

# Each spinner dies with the process that started it, however that one ends (SIGKILL
# included: Linux PR_SET_PDEATHSIG), so a killed calibration leaves no CPU hog behind.
SPIN = (
    "import ctypes, os, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, 9)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(0)\n"
    "while True:\n"
    "    pass\n"
)


@contextlib.contextmanager
def cpu_load(processes: int):
    """``processes`` busy processes for the ``with`` block (0: none)."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid())],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
             for _ in range(max(0, processes))]
    try:
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait(10)
