"""One process per configuration, so a patch's global changes stay in its configuration.

Patches often change a class or a module-level function (``SomeAttention.forward =
...``, ``modeling.apply_rotary_pos_emb = ...``). With every configuration's model in
one process, such a change would reach the reference and the current baseline too,
and the gate would compare a patched model with itself. So each configuration of
the transformers engine lives in its own spawned process (as each SGLang engine
has its own workers); this proxy forwards the engine verbs over a pipe. Timing is
taken inside the worker (``timed_generate``), so pipe overhead is not measured.

The worker ignores SIGINT: Ctrl-C reaches the gate, which closes the workers.

Workers start with :data:`WORKER_ENV` (unless the caller's environment sets the same
variables): huge pages for torch's CPU allocations and a glibc heap that keeps freed
memory instead of unmapping it after every call. Measured on a shared 2-core VM (A/A,
the same model in two fresh worker processes, 12 rounds): without them decode_b1
differed between the two processes by up to 59 % (one process steadily 1.6x slower)
and prefill_b64 by up to 15 %; with them most process pairs agreed within 5 %, and
prefill_b64 got 25 % faster (no page faults on every call's fresh buffers).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import traceback
from pathlib import Path

from ..errors import PatchgateError
from . import cpu
from .base import Timing, described

_START_TIMEOUT_S = 600
WORKER_ENV = {
    "THP_MEM_ALLOC_ENABLE": "1",  # torch: large CPU allocations on transparent huge pages
    # glibc: serve buffers up to 32 MiB from the heap and never trim it, so a call does
    # not fault in fresh pages for its activations every time
    "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:"
                      "glibc.malloc.trim_threshold=68719476736:glibc.malloc.top_pad=268435456",
}
_DOING = {"timed_generate": "timing a generate call (latency)", "generate": "generating",
          "generate_until": "generating (accuracy tasks)",
          "loglikelihood": "scoring log-likelihoods (accuracy tasks)",
          "profile_generate": "profiling a generate call (--explain)"}


def patch_frame(exc: BaseException, patches) -> tuple[str, int, str] | None:
    """Where in a patch file an exception was raised: (patch name, line, function) of
    the innermost traceback frame in one of ``patches``; None if no patch is on the
    stack (a bug, or a patch's change that fails later inside a library)."""
    by_path = {str(Path(p.path).resolve()): p.name for p in patches}
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        name = by_path.get(str(Path(frame.filename).resolve()))
        if name:
            found = (name, frame.lineno or 0, frame.name)
    return found


def _failure(e: BaseException, patches) -> tuple:
    return ("error", (f"{type(e).__name__}: {e}", traceback.format_exc(),
                      patch_frame(e, patches)))


def _serve(conn, profile, patches, label) -> None:
    """The worker: patch code runs here, in a scratch working directory, removed after."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # patch paths given relative to the gate's working folder (--patches model_patches)
    # must still lead to the files once the worker works in its scratch folder
    patches = [dataclasses.replace(p, path=Path(p.path).resolve()) for p in patches]
    scratch = tempfile.mkdtemp(prefix=f"patchgate-worker-{label}-")
    os.chdir(scratch)
    try:
        _loop(conn, profile, patches, label)
    finally:
        os.chdir(tempfile.gettempdir())
        shutil.rmtree(scratch, ignore_errors=True)


def _loop(conn, profile, patches, label) -> None:
    try:
        from .. import sandbox
        from .transformers import TransformersEngine

        if any(p.has_apply for p in patches):  # before the first line of patch code
            try:
                sandbox.enter()
            except OSError as e:
                raise PatchgateError(f"the worker of {label} could not enter the sandbox: {e}",
                                     hint=f"report it with your kernel version; "
                                     f"{sandbox.ENV}=off runs without it") from e

        engine = TransformersEngine(profile, patches, label,
                                    lambda name: conn.send(("patch", name)))
        conn.send(("ok", {"vocab_size": engine.vocab_size}))
    except PatchgateError as e:
        conn.send(("user-error", (e.message, e.hint)))
        return
    except BaseException as e:  # a bug or an unexpected failure: keep the traceback
        conn.send(_failure(e, patches))
        return
    while True:
        try:
            verb, args = conn.recv()
        except EOFError:
            return
        if verb == "close":
            conn.send(("ok", None))
            return
        try:
            result = getattr(engine, verb)(*args)
            conn.send(("ok", tuple(result) if isinstance(result, tuple) else result))
        except PatchgateError as e:
            conn.send(("user-error", (e.message, e.hint)))
        except BaseException as e:
            conn.send(_failure(e, patches))


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """Variables a spawned worker inherits (those already set here win)."""
    added = [k for k in values if k not in os.environ]
    os.environ.update({k: values[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class IsolatedEngine:
    """A :class:`TransformersEngine` in its own process (same verbs)."""

    name = "transformers"

    def __init__(self, profile, patches, label: str, share: float = 1.0):
        # ``share`` is for the device: CPU threads are the profile's (or the patch's)
        self.label = label
        self._patch_names = [p.name for p in patches]
        self._patch_dir = str(Path(patches[0].path).parent) if patches else ""
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, profile, list(patches), label),
                                 name=f"patchgate-{label}", daemon=True)
        with _environment(WORKER_ENV):
            self._proc.start()
        child.close()
        self._ready = False
        self._vocab_size = 0
        self._model_path = profile.model_path()
        self._timeout = profile.call_timeout_s
        self._tokenizer = None

    def ready(self) -> IsolatedEngine:
        """Wait until the worker has loaded and patched its model: the model within
        ``max(600 s, call_timeout_s)``, each patch's import and ``apply()`` within
        ``call_timeout_s`` (the worker names each patch as it starts it)."""
        what, limit = "loading the model", max(_START_TIMEOUT_S, self._timeout)
        if not self._ready:
            self._preload_tokenizer()
        while not self._ready:
            info = self._receive(what, limit)
            if isinstance(info, tuple) and info[:1] == ("patch",):
                what, limit = f"importing and applying patch {info[1]}", self._timeout
                continue
            self._vocab_size = info["vocab_size"]
            self._ready = True
        return self

    def _preload_tokenizer(self) -> None:
        """Load the tokenizer here while the worker loads the model: the first one costs
        this process transformers' tokenizer imports, about 5 s on the 2-core runner, which
        the accuracy guard (its only user) would otherwise wait for. Best effort: a model
        folder without a tokenizer fails where the guard asks for it, as before."""
        with contextlib.suppress(Exception):  # the property keeps it only if it loads
            self.tokenizer  # noqa: B018

    @property
    def vocab_size(self) -> int:
        return self.ready()._vocab_size

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._model_path,
                                                            trust_remote_code=True)
        return self._tokenizer

    def _receive(self, what: str, timeout: float | None = None):
        try:
            if timeout is not None and not self._conn.poll(timeout):
                self.close()
                raise PatchgateError(
                    f"engine {self.describe()}: no answer after {timeout:.0f} s while {what}",
                    hint="a patch may hang (a loop, a lock, a wait): fix it, or raise the "
                         "profile's call_timeout_s if the work is real")
            status, payload = self._conn.recv()
        except (EOFError, ConnectionError, OSError):
            proc = self._proc
            if proc is not None:
                proc.join(2)  # reap it, so its exit code is known
            code = proc.exitcode if proc is not None else None
            self.close()
            raise PatchgateError(
                f"engine {self.describe()}: its worker process died while {what} "
                f"(exit code {code})",
                hint="a patch may end the interpreter (os._exit, a crash in native code); "
                     "run the patches of this configuration one at a time") from None
        if status == "ok":
            return payload
        if status == "patch":
            return ("patch", payload)
        if status == "user-error":
            raise PatchgateError(*payload)
        message, tb, where = payload
        if where:
            name, line, func = where
            raise PatchgateError(
                f"patch {name} failed while {what} (engine {self.label}, line {line} in "
                f"{func}): {message}",
                hint=f"fix the patch or move it out of {self._patch_dir}")
        raise PatchgateError(f"engine {self.describe()} failed while {what}: {message}",
                             hint="worker traceback:\n" + tb.rstrip())

    def describe(self) -> str:
        """The configuration and its patches, for messages: ``candidate (0001-x.py)``."""
        return described(self.label, self._patch_names)

    def _call(self, verb: str, *args):
        self.ready()
        self._conn.send((verb, args))
        return self._receive(_DOING.get(verb, verb.replace("_", " ")), self._timeout)

    def generate(self, batch, max_new_tokens):
        return self._call("generate", batch, max_new_tokens)

    def timed_generate(self, batch, max_new_tokens) -> Timing:
        seconds, first = self._call("timed_generate", batch, max_new_tokens)
        return Timing(float(seconds), tuple(first))

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        return self._call("generate_until", prompts, max_new_tokens, stop_ids)

    def loglikelihood(self, requests):
        return self._call("loglikelihood", requests)

    def profile_generate(self, batch, max_new_tokens, out_dir) -> dict:
        """Profile one generate call inside the worker (``--explain``)."""
        return self._call("profile_generate", batch, max_new_tokens, str(out_dir))

    def synchronize(self) -> None:
        """Nothing to wait for: every call returns once the worker has finished."""

    def cpu_seconds(self) -> float | None:
        """The worker process's CPU seconds so far (every thread of it)."""
        proc = self._proc
        return None if proc is None or proc.pid is None else cpu.process_seconds(proc.pid)

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is None:
            return
        self._proc = None
        try:
            if proc.is_alive():
                self._conn.send(("close", ()))
                if self._conn.poll(5):
                    self._conn.recv()
        except (OSError, EOFError, BrokenPipeError):
            pass
        proc.join(5)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        if proc.is_alive():
            proc.kill()
        self._conn.close()
