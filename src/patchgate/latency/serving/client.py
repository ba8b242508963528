"""The bench client: one long-lived process that runs the phase's benchmark commands.

A run of ``python -m sglang.bench_serving`` spends seconds importing before its first
request, and one look of the serving set is 3 scenarios x the configurations x the
rounds of runs. :class:`BenchClient` keeps one process (:mod:`.runner`) that runs each
command as ``python`` would run it, in its own process group and this process's
environment, so the imports are paid once; what a run measures (bench_serving's
``duration``, from its first request to its last answer) is unchanged. A command that
is not a Python command of this interpreter, or needs another environment, runs in a
process of its own as before (:func:`patchgate.latency.serving.bench.run_bench`).

A run that outlives its time limit, a runner that dies, and Ctrl-C end the runner's
whole process group; the next run starts a fresh one.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

from .server import stop_group

TIMED_OUT = None  # what run() answers when the limit passed (the runner is ended)


class BenchClient:
    """Runs commands ``[python, ...]`` of interpreter ``python`` in one :mod:`.runner`
    process; its own output (outside the runs' logs) goes to ``log``."""

    def __init__(self, log: Path, python: str = sys.executable, grace_s: float = 5.0):
        self.log, self.python, self.grace_s = Path(log), python, grace_s
        self._proc: subprocess.Popen | None = None
        self.starts = 0

    def can_run(self, cmd: list[str], env: dict | None) -> bool:
        """Whether ``cmd`` is a Python command of this interpreter in this environment."""
        return env is None and len(cmd) >= 2 and cmd[0] == self.python

    def run(self, cmd: list[str], log: Path, timeout_s: float) -> int | None:
        """Run ``cmd`` with its output to ``log``: its exit code, or :data:`TIMED_OUT`.
        A runner that died answers with its own exit code (or 1)."""
        proc = self._ensure()
        try:
            proc.stdin.write((json.dumps({"argv": cmd[1:], "log": str(log)}) + "\n").encode())
            proc.stdin.flush()
            line = _read_line(proc, timeout_s)
        except BrokenPipeError:
            line = b""
        except BaseException:  # Ctrl-C while a run was in flight: end it with the runner
            self.close()
            raise
        if line is None:
            self.close()
            return TIMED_OUT
        if not line:
            code = proc.poll()
            self.close()
            return code or 1
        return int(json.loads(line)["code"])

    def _ensure(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as err:
            self._proc = subprocess.Popen(
                [self.python, "-m", "patchgate.latency.serving.runner"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                start_new_session=True, env=_with_this_package(os.environ))
        self.starts += 1
        return self._proc

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            stop_group(proc, self.grace_s)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def __enter__(self) -> BenchClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_line(proc: subprocess.Popen, timeout_s: float) -> bytes | None:
    """One line from the runner's answers; b"" at its end, None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    fd = proc.stdout.fileno()
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not sel.select(left):
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return b""
            buf += chunk
    return buf.split(b"\n", 1)[0]


def _with_this_package(env) -> dict[str, str]:
    """The environment with this package importable (an editable or source checkout
    whose folder is not on ``PYTHONPATH``)."""
    env = dict(env)
    src = str(Path(__file__).resolve().parents[3])
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in parts:
        env["PYTHONPATH"] = os.pathsep.join([*parts, src])
    return env
