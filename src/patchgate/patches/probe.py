"""Importing the patches once, in a throwaway process with a time limit.

:func:`discover` reads patches without running them. Their module-level code still has
to run somewhere before the engines load them, or an import that fails or never
returns would surface minutes later, or never. :func:`probe` imports every patch file
in a separate Python process whose working directory is an empty scratch folder, one
file at a time, each within ``timeout_s``; the first that raises, exits or does not
return is an error naming it. Meanwhile the files named in ``watch`` (the stored
baselines, the change log) are fingerprinted after each import: a patch that writes
into them at import is an error naming it. ``patchgate check`` and ``patchgate
guard`` both probe; nothing a patch does in the probe reaches the verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import PatchgateError
from ..files import changed, fingerprint
from .patch import Patch

_CHILD = r"""
import importlib.util, json, sys, traceback
sys.path.insert(0, sys.argv[2])
from patchgate.sandbox import enter
try:
    enter()  # before the first line of patch code (patchgate.sandbox)
except OSError as exc:
    print(json.dumps({"sandbox": str(exc)}), flush=True)
    sys.exit(0)
sys.path.pop(0)
for name, path in json.loads(sys.argv[1]):
    print(json.dumps({"importing": name}), flush=True)
    try:
        spec = importlib.util.spec_from_file_location("patchgate_probe_" + name[:4], path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except BaseException as exc:
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == path:
                line = frame.lineno
        print(json.dumps({"error": name, "type": type(exc).__name__, "line": line,
                          "message": str(exc)[:500]}), flush=True)
        sys.stdin.readline()  # the gate says whether to go on (check reports every file)
        continue
    print(json.dumps({"ok": name}), flush=True)
    sys.stdin.readline()  # the gate checks the watched files before the next import
"""


def probe(patches: list[Patch], timeout_s: float, watch: Iterable[Path] = (),
          restore: Iterable[Path] = (), keep_going: bool = False) -> list[PatchgateError]:
    """Import ``patches`` in a scratch process (see the module docstring); an error names
    a patch that fails, hangs past ``timeout_s`` or writes into ``watch``. Each patch is
    imported from a copy in the scratch folder (its own path does not lead to the
    checkout). The files under ``restore`` (the stored state: small files) are kept in
    memory first and put back as they were if an import changed them. The first error is
    raised; with ``keep_going`` (``patchgate check``) every patch is imported and the
    errors are returned (a hang or an exit ends the scratch process: the patches after it
    are named as not imported)."""
    if not patches:
        return []
    state = _Watched([Path(p) for p in watch], _contents([Path(p) for p in restore]))
    with tempfile.TemporaryDirectory(prefix="patchgate-probe-") as scratch:
        copies = Path(scratch) / "patches"
        copies.mkdir()
        for p in patches:
            shutil.copyfile(p.path, copies / p.name)
        args = json.dumps([(p.name, str(copies / p.name)) for p in patches])
        package_root = str(Path(__file__).resolve().parents[2])
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, args, package_root], cwd=scratch,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _follow(proc, {p.name: p for p in patches}, timeout_s, state, keep_going)
        except PatchgateError as e:
            _end(proc)
            raise state.after(e) from e
        finally:
            _end(proc)
    return state.errors


class _Watched:
    """The watched files' fingerprints and the stored files' bytes, while patches are
    imported; the errors found so far (``keep_going``)."""

    def __init__(self, watch: list[Path], kept: dict[Path, dict[Path, bytes]]) -> None:
        self.watch, self.kept = watch, kept
        self.before = fingerprint(watch)
        self.errors: list[PatchgateError] = []

    def touched(self) -> str:
        """The watched files changed since the last call (or the start), with the stored
        ones put back as they were, in words ('' if none)."""
        found = changed(self.before, self.watch)
        if not found:
            return ""
        put_back = _restore(self.kept)
        self.before = fingerprint(self.watch)
        text = ", ".join(map(str, found))
        return text + (f"; restored as they were: {', '.join(map(str, put_back))}"
                       if put_back else "")

    def after(self, e: PatchgateError) -> PatchgateError:
        """``e``, and any stored file put back as it was since (an import that wrote and
        then hung, say)."""
        put_back = _restore(self.kept)
        if put_back:
            return PatchgateError(f"{e.message}; restored as they were: "
                                  f"{', '.join(map(str, put_back))}", e.hint)
        return e


def _contents(roots: list[Path]) -> dict[Path, dict[Path, bytes]]:
    """{root: {file: bytes}} of every file under each root (a root may be one file)."""
    out: dict[Path, dict[Path, bytes]] = {}
    for root in roots:
        if root.is_file():
            out[root] = {root: root.read_bytes()}
        elif root.is_dir():
            out[root] = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        else:
            out[root] = {}
    return out


def _restore(kept: dict[Path, dict[Path, bytes]]) -> list[Path]:
    """Put every file under the roots back as :func:`_contents` found it (changed or
    removed files rewritten, new files removed); returns the files put back."""
    put_back = []
    for root, before in kept.items():
        now = _contents([root])[root]
        for path in sorted(set(before) | set(now)):
            if before.get(path) == now.get(path):
                continue
            if path in before:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(before[path])
            else:
                path.unlink(missing_ok=True)
            put_back.append(path)
    return put_back


def _follow(proc: subprocess.Popen, by_name: dict[str, Patch], timeout_s: float,
            state: _Watched, keep_going: bool) -> None:
    lines = _reader(proc)
    current, done = None, set()

    def ended(why: str, hint: str) -> None:
        """The scratch process is gone (a hang, an exit): no later patch can be imported."""
        left = [n for n in by_name if n not in done and n != current]
        more = (f"; not imported after it: {', '.join(left)}" if keep_going and left else "")
        raise PatchgateError(f"{why}{more}", hint=hint)

    while True:
        try:
            msg = lines.get(timeout_s if current else max(timeout_s, 60.0))
        except TimeoutError:
            patch = by_name.get(current)
            ended(f"patch {patch.path if patch else current}: importing it did not return "
                  f"within {timeout_s:.0f} s",
                  "module-level code must not wait or loop; move work into apply() "
                  "(the profile's import_timeout_s is the limit)")
        if msg is None:
            if done == set(by_name):
                return
            current = current or next(n for n in by_name if n not in done)
            ended(f"patch {by_name[current].path}: importing it ended the process (exit "
                  f"code {proc.wait(10)})",
                  "module-level code must not exit; move work into apply()")
        if "sandbox" in msg:
            raise PatchgateError(f"the scratch import could not enter the sandbox: "
                                 f"{msg['sandbox']}", hint="report it with your kernel "
                                 "version; PATCHGATE_SANDBOX=off runs without it")
        name = msg.get("importing") or msg.get("error") or msg.get("ok")
        if name not in by_name:
            continue  # a patch printed JSON of its own
        if "importing" in msg:
            current = name
            continue
        patch = by_name[name]
        found = []
        if "error" in msg:
            where = f" at line {msg['line']}" if msg.get("line") else ""
            found.append(PatchgateError(
                f"patch {patch.path}: import raised {msg['type']}{where}: {msg['message']}",
                hint=f"fix the patch or move it out of {patch.path.parent}"))
        touched = state.touched()
        if touched:
            found.append(PatchgateError(f"patch {patch.path}: importing it changed {touched}",
                                        hint="patch code must not write files: fix the patch"))
        if found and not keep_going:
            raise found[-1]
        state.errors += found
        done.add(name)
        current = None
        try:
            proc.stdin.write("\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it ended; the next message (or its end) says how


class _Lines:
    """JSON lines of the child's stdout, read by a thread; ``get`` waits with a limit."""

    def __init__(self) -> None:
        self.items: list = []
        self.cond = threading.Condition()

    def put(self, item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify()

    def get(self, timeout_s: float):
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not self.items:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.cond.wait(left)
            return self.items.pop(0)


def _reader(proc: subprocess.Popen) -> _Lines:
    out = _Lines()

    def run() -> None:
        for line in proc.stdout:
            try:
                out.put(json.loads(line))
            except ValueError:
                continue  # a patch printed something: not ours
        out.put(None)

    threading.Thread(target=run, daemon=True).start()
    return out


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait(10)
