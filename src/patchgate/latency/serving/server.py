"""One SGLang server per configuration: its command line, start, readiness, shutdown.

``python -m sglang.launch_server`` runs as a subprocess in its own process group,
with the configuration's settings (the same as the offline engine's,
:func:`patchgate.engines.sglang.server_args`, radix cache off) on a free local port,
its output in a log file. ``apply()`` patches run inside its worker through
``SGLANG_EXTERNAL_MODEL_PACKAGE`` (:mod:`patchgate.engines.sglang_hook`), as for the
offline engine. Unlike the offline engine the server keeps its tokenizer:
``sglang.bench_serving`` reads the streamed text to time each token.

The server is ready when ``GET /health`` answers 200 (SGLang answers 503 until its
warm-up is done). A server that exits, or is not ready after
``serving.startup_timeout_s``, is an error that names the configuration's patches
and quotes the end of its log. :meth:`Server.close` ends the whole process group
(SIGTERM, then SIGKILL after a grace period), so no worker is left behind; it runs
on errors, on Ctrl-C and SIGTERM (the caller's ``with`` block), at exit, and if the
gate's process dies without any of these, the server gets SIGTERM from the kernel
(``PR_SET_PDEATHSIG``, Linux).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ...engines import sglang_hook
from ...engines.base import described
from ...engines.sglang import server_args
from ...errors import PatchgateError
from ...profile import repo_root

HOST = "127.0.0.1"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
LOG_TAIL_LINES = 25
_LIVE: set[Server] = set()  # servers started and not closed yet (closed at exit)


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def cli_flags(args: dict) -> list[str]:
    """SGLang's command-line flags for ServerArgs keyword arguments: ``--name-with-dashes
    value``; True gives the bare flag, False and None nothing, a list several values,
    a dict its JSON."""
    out: list[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list | tuple):
            out += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value, sort_keys=True)]
        else:
            out += [flag, str(value)]
    return out


def tokenizer_path(model_dir: Path) -> Path:
    """The model's folder if it ships a tokenizer, else the default model's: a
    random-weight folder has none, and the server must turn ids into text."""
    if any((model_dir / f).exists() for f in TOKENIZER_FILES):
        return model_dir
    return repo_root() / "models" / "default"


def launch_command(profile, patches, port: int, share: float = 1.0,
                   known: set[str] | None = None, python: str = sys.executable) -> list[str]:
    """``python -m sglang.launch_server ...`` for one configuration: the offline engine's
    settings (:func:`~patchgate.engines.sglang.server_args`: profile, patch SERVER_ARGS,
    radix cache off) with the tokenizer kept, on ``HOST:port``."""
    args = server_args(profile, patches, known, share)
    args.pop("skip_tokenizer_init", None)  # bench_serving times the streamed text
    args["log_level"] = "warning"
    model = Path(args["model_path"])
    tok = tokenizer_path(model)
    if tok != model:
        args["tokenizer_path"] = str(tok)
    args.update(host=HOST, port=port)
    return [python, "-m", "sglang.launch_server", *cli_flags(args)]


def hook_environment(profile, patches, label: str, folder: Path) -> dict[str, str]:
    """Variables that make the server's worker run the patches' ``apply()`` (none if no
    patch has one): the override package written under ``folder``."""
    if not any(p.has_apply for p in patches):
        return {}
    dummy = profile.engine_args.get("load_format") == "dummy"
    pkg = sglang_hook.write_package(folder, label, sglang_hook.architecture(
        profile.model_path()), patches, dummy=dummy)
    path = os.pathsep.join(x for x in (str(folder), os.environ.get("PYTHONPATH")) if x)
    return {"SGLANG_EXTERNAL_MODEL_PACKAGE": pkg, "PYTHONPATH": path}


def stop_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """End ``proc`` and every process of its group: SIGTERM to the group, SIGKILL to
    whatever is left after ``grace_s`` (also children that outlive their leader)."""
    pgid = proc.pid  # started with start_new_session: the group's id is the leader's pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(max(0.0, deadline - time.monotonic()))
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _die_with_parent() -> None:
    """In the server's process, before SGLang starts: SIGTERM when the gate's process
    ends, however it ends (Linux ``PR_SET_PDEATHSIG``; SIGKILL leaves no other way).
    SGLang's own workers die with their parent in turn."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


@dataclass(frozen=True)
class Limits:
    """How long a server may take to get ready, how long it gets between SIGTERM and
    SIGKILL, and the folder for its log (None: a temporary one)."""

    startup_timeout_s: float = 900.0
    grace_s: float = 15.0
    folder: Path | None = None


class Server:
    """One configuration's server: ``start()``, ``wait_ready()``, requests, ``close()``."""

    def __init__(self, label: str, patches, command: list[str], env: dict[str, str] | None = None,
                 port: int | None = None, limits: Limits | None = None):
        limits = limits or Limits()
        self.label = label
        self.patch_names = [p.name for p in patches]
        self.command = list(command)
        self.env = dict(env or {})
        self.port = port if port is not None else free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.startup_timeout_s = limits.startup_timeout_s
        self.grace_s = limits.grace_s
        folder = limits.folder
        self._tmp = None
        if folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"patchgate-server-{label}-")
            folder = Path(self._tmp.name)
        self.folder = Path(folder)
        self.log_path = self.folder / "server.log"
        self.proc: subprocess.Popen | None = None
        self._log = None

    def describe(self) -> str:
        return described(self.label, self.patch_names)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Server:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in close())
        env = os.environ | self.env
        linux = sys.platform.startswith("linux")
        # the server's folder is its working directory: patch code runs there, not in the
        # checkout
        self.proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                     cwd=self.folder,
                                     preexec_fn=_die_with_parent if linux else None)
        _LIVE.add(self)
        return self

    def wait_ready(self, poll_s: float = 0.5) -> Server:
        """Block until ``GET /health`` answers 200; an error if the server exits first
        or is not ready after ``startup_timeout_s``."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                self._fail(f"exited with code {code} before it was ready")
            # SGLang answers 503 at once while starting; once up, /health runs a 1-token
            # generation and answers within its own 20 s limit
            if self._status("/health", timeout=25) == 200:
                return self
            if time.monotonic() > deadline:
                self._fail(f"was not ready after {self.startup_timeout_s:.0f} s "
                           "(GET /health never answered 200)")
            time.sleep(poll_s)

    def _fail(self, what: str):
        tail = log_tail(self.log_path)
        err = self._worker_error()
        self.close()
        if err:
            raise PatchgateError(
                f"SGLang server for {self.describe()} {what}: patch {err['patch']}: apply() "
                f"raised {err['type']} inside the server's worker: {err['message']}",
                hint="fix the patch or limit it with ENGINES")
        raise PatchgateError(f"SGLang server for {self.describe()} {what}",
                             hint=f"the end of its log:\n{tail}")

    def _worker_error(self) -> dict | None:
        pkg = self.env.get("SGLANG_EXTERNAL_MODEL_PACKAGE")
        folder = (self.env.get("PYTHONPATH") or "").split(os.pathsep)[0]
        return sglang_hook.read_worker_error(Path(folder), pkg) if pkg and folder else None

    def close(self) -> None:
        """End the server's process group (safe to call twice)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_group(proc, self.grace_s)
        _LIVE.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    # ------------------------------------------------------------------ requests
    def request(self, path: str, method: str = "POST", body: dict | None = None,
                timeout: float = 120.0) -> int | None:
        """The HTTP status of one request (None if nothing answered); never an error."""
        return self._status(path, method, body if body is not None else {}, timeout)

    def _status(self, path: str, method: str = "GET", body: dict | None = None,
                timeout: float = 30.0) -> int | None:
        """The HTTP status of one request (None if nothing answered)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read()
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, OSError):
            return None

    def post(self, path: str, body: dict | None = None, timeout: float = 120.0) -> None:
        """POST ``path``; an error naming the server unless it answers 200."""
        status = self._status(path, "POST", body if body is not None else {}, timeout)
        if status != 200:
            raise PatchgateError(f"SGLang server for {self.describe()}: POST {path} answered "
                                 f"{status or 'nothing'}",
                                 hint=f"the end of its log:\n{log_tail(self.log_path)}")

    def flush_cache(self) -> None:
        """Empty the server's caches (no request may be running)."""
        self.post("/flush_cache")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@atexit.register
def _close_live() -> None:
    """Servers still running when the interpreter exits (a path that skipped close)."""
    for server in list(_LIVE):
        server.close()
