"""The bench client's process: Python benchmark commands run one after another, in
one process, so that their imports are paid once.

``python -m sglang.bench_serving`` imports SGLang, transformers and aiohttp before it
sends a request: seconds of start-up, paid again by every run (48 runs in one look of
the serving set), although none of it is inside the ``duration`` it measures. This
process runs each command as the interpreter would (``runpy``, ``__main__``, its own
``sys.argv``), with its output going to the run's log, and answers with the exit code;
the imported modules stay loaded between runs.

Protocol: one JSON line per job on stdin, ``{"argv": [...], "log": path}``, where
``argv`` is the command without the interpreter (``["-m", module, args...]`` or
``[script, args...]``); one JSON line per job on the original stdout,
``{"code": int}``. It ends at the end of stdin. Started by
:class:`patchgate.latency.serving.client.BenchClient`.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def run_one(argv: list[str], log: str) -> int:
    """Run one command with fds 1 and 2 sent to ``log``; its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    old_argv = sys.argv
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # noqa: BLE001 - the command's own failure: its traceback, code 1
        traceback.print_exc()
        code = 1
    finally:
        sys.argv = old_argv
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    return code


def main() -> None:
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # between jobs nothing printed can reach the answers
    os.close(quiet)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        code = run_one(job["argv"], job["log"])
        reply.write(json.dumps({"code": code}) + "\n")


if __name__ == "__main__":
    main()
