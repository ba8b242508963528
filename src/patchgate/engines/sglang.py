"""The SGLang engine: the offline ``sglang.Engine``, token ids in and out.

Always ``skip_tokenizer_init=True`` and ``disable_radix_cache=True`` (a profile or
patch that turns the radix cache on is refused); greedy (``temperature=0``);
latency requests use ``ignore_eos=True`` and fixed output lengths, checked on
every call. Patch ``SERVER_ARGS`` map one to one onto SGLang's ``ServerArgs``
(unknown names are errors naming the patch); ``apply(model)`` runs inside the
worker through :mod:`patchgate.engines.sglang_hook`. One engine per configuration,
shut down on close, errors and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..errors import PatchgateError
from ..patches import merged_server_args
from . import sglang_hook
from .base import Timed, check_lengths, described

FORCED = {"skip_tokenizer_init": True, "disable_radix_cache": True}


def known_server_args() -> set[str] | None:
    """Field names of SGLang's ServerArgs, or None where SGLang is not installed."""
    try:
        from sglang.srt.server_args import ServerArgs
    except ImportError:
        return None
    return {f.name for f in dataclasses.fields(ServerArgs)}


def server_args(profile, patches, known: set[str] | None = None, share: float = 1.0) -> dict:
    """The keyword arguments of ``sglang.Engine`` for one configuration."""
    args = {"model_path": str(profile.model_path()), "dtype": profile.dtype,
            "trust_remote_code": True, "random_seed": profile.seed, "log_level": "error",
            "mem_fraction_static": round(0.8 * share, 3)}
    for key, value in profile.engine_args.items():
        if key in FORCED and value != FORCED[key]:
            raise PatchgateError(f"profile {profile.name}: engine_args sets {key}={value!r}; "
                                 f"patchgate always runs with {key}={FORCED[key]!r}",
                                 hint=f"remove {key} from the profile")
        args[key] = value
    for key, value in merged_server_args(patches, "sglang").items():
        owner = next(p.name for p in patches if key in p.server_args)
        if key in FORCED and value != FORCED[key]:
            raise PatchgateError(f"patch {owner}: SERVER_ARGS sets {key}={value!r}; the radix "
                                 "cache stays off and token ids stay untokenized in every run",
                                 hint=f"remove {key} from the patch")
        if known is not None and key not in known:
            raise PatchgateError(f"patch {owner}: SERVER_ARGS sets {key!r}, which is not a "
                                 "setting of SGLang's ServerArgs",
                                 hint="check the name against `python -m sglang.launch_server "
                                 "--help` (dashes become underscores)")
        args[key] = value
    args.update(FORCED)
    return args


def prefill_chunks(profile, chunk: int) -> set[int]:
    """Token counts of the prefill forward passes the six static scenarios run, with
    SGLang's chunked prefill of ``chunk`` tokens: a scenario's ``batch x input`` tokens
    go in full chunks, then the rest. A profile that captures prefill CUDA graphs only
    for some sizes (``cuda_graph_bs_prefill``) must hold these, or the timed calls
    would run other code than the graphs of a default engine."""
    found: set[int] = set()
    for b in profile.batch_sizes:
        for tokens in (b * profile.lengths.prefill_input, b * profile.lengths.decode_input):
            if tokens >= chunk:
                found.add(chunk)
            if tokens % chunk:
                found.add(tokens % chunk)
    return found


def model_vocab_size(model_dir: Path) -> int:
    """``vocab_size`` of the model's config.json (random-weight models ship no tokenizer)."""
    cfg = Path(model_dir) / "config.json"
    try:
        return int(json.loads(cfg.read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PatchgateError(f"{cfg}: cannot read vocab_size ({e})",
                             hint="the model folder needs a config.json with vocab_size") from e


class WorkerFailed(RuntimeError):
    """An SGLang worker process failed while the engine was starting."""


def raise_on_sigquit(signum, frame):
    """SGLang's workers signal a failure with SIGQUIT to the launching process, whose
    default handler then kills its own process tree: the gate with it, before it can
    say which patch failed. As ``custom_sigquit_handler`` this raises instead, so the
    engine start fails with an exception the gate reports (and cleans up after)."""
    raise WorkerFailed("an SGLang worker process failed (it sent SIGQUIT)")


def kill_children() -> None:
    """End the worker processes a failed engine start left behind (they hold GPU memory)."""
    try:
        from sglang.srt.utils.common import kill_process_tree
    except ImportError:
        return
    kill_process_tree(os.getpid(), include_parent=False)


class SGLangEngine(Timed):
    name = "sglang"
    collector_off = True  # this process only drives the scheduler (Timed's docstring)

    def __init__(self, profile, patches, label: str, share: float = 1.0):
        self.label = label
        self._patch_names = [p.name for p in patches]
        self.engine = None
        self._tmp = tempfile.TemporaryDirectory(prefix="patchgate-sglang-")
        folder = Path(self._tmp.name)
        applicable = [p for p in patches if p.applies_to(self.name)]
        known = known_server_args()
        if known is None:
            raise PatchgateError(f"profile {profile.name}: SGLang is not installed",
                                 hint="install it with `pip install -e .[sglang]` on the GPU "
                                 "machine")
        args = server_args(profile, applicable, known, share)
        if "custom_sigquit_handler" in known:
            args["custom_sigquit_handler"] = raise_on_sigquit
        pkg = None
        if any(p.has_apply for p in applicable):
            arch = sglang_hook.architecture(profile.model_path())
            pkg = sglang_hook.write_package(folder, label, arch, applicable,
                                            dummy=args.get("load_format") == "dummy")
        env_before = {k: os.environ.get(k) for k in ("SGLANG_EXTERNAL_MODEL_PACKAGE",
                                                      "PYTHONPATH")}
        try:
            if pkg:  # inherited by the worker processes SGLang starts (the hook imports
                # patchgate.sandbox there: this package's folder goes on their path too)
                os.environ["SGLANG_EXTERNAL_MODEL_PACKAGE"] = pkg
                os.environ["PYTHONPATH"] = os.pathsep.join(
                    x for x in (str(folder), str(Path(__file__).resolve().parents[2]),
                                env_before["PYTHONPATH"]) if x)
                sys.path.insert(0, str(folder))
            import sglang

            with contextlib.chdir(folder):  # the workers it spawns: patch code's cwd
                self.engine = sglang.Engine(**args)
        except Exception as e:
            err = sglang_hook.read_worker_error(folder, pkg) if pkg else None
            if self.engine is None:
                kill_children()
            self.close()
            if err:
                raise PatchgateError(
                    f"patch {err['patch']}: apply() raised {err['type']} inside the SGLang "
                    f"worker: {err['message']}",
                    hint="fix the patch or limit it with ENGINES") from e
            raise PatchgateError(f"SGLang engine for {label} failed to start: "
                                 f"{type(e).__name__}: {e}",
                                 hint="see SGLang's log above; try the profile without patches"
                                 ) from e
        finally:
            for k, v in env_before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.vocab_size = model_vocab_size(profile.model_path())
        self.tokenizer = None  # token ids in and out; the lm-eval guard needs one
        if profile.guard == "lm_eval":
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(profile.model_path(),
                                                           trust_remote_code=True)
            self.vocab_size = min(self.vocab_size, len(self.tokenizer))

    def describe(self) -> str:
        """The configuration and its patches, for messages: ``candidate (0001-x.py)``."""
        return described(self.label, self._patch_names)

    def ready(self) -> SGLangEngine:
        """Loaded: ``sglang.Engine`` returns once its workers are up."""
        return self

    def _generate(self, ids, params, **kw):
        try:
            out = self.engine.generate(input_ids=ids, sampling_params=params, **kw)
        except Exception as e:
            raise PatchgateError(f"SGLang engine {self.label} failed: {type(e).__name__}: {e}",
                                 hint="see SGLang's log above") from e
        return out if isinstance(out, list) else [out]

    def generate(self, batch, max_new_tokens):
        params = {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}
        out = [o["output_ids"] for o in self._generate(batch, params)]
        check_lengths(out, len(batch), max_new_tokens, self.label)
        return out

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        params = {"max_new_tokens": max_new_tokens, "temperature": 0.0,
                  "stop_token_ids": sorted(stop_ids)}
        return [o["output_ids"] for o in self._generate(prompts, params)]

    def loglikelihood(self, requests):
        ids = [ctx + cont for ctx, cont in requests]
        outs = self._generate(ids, {"max_new_tokens": 1, "temperature": 0.0},
                              return_logprob=True, logprob_start_len=0, top_logprobs_num=1)
        results = []
        for (ctx, cont), o in zip(requests, outs, strict=True):
            lps = o["meta_info"]["input_token_logprobs"]
            tops = o["meta_info"]["input_top_logprobs"]
            n = len(ctx)
            ll = sum(lp for lp, _, _ in lps[n:])
            greedy = all(top and max(top, key=lambda x: x[0])[1] == tok
                         for tok, top in zip(cont, tops[n:], strict=False))
            results.append((float(ll), bool(greedy)))
        return results

    def profile_generate(self, batch, max_new_tokens, out_dir) -> dict:
        """One :meth:`generate` call under SGLang's own profiler (``--explain``): its
        trace files (GPU kernels, ``*.trace.json.gz``) go to ``out_dir`` and become the
        ``gpu`` table. Written against SGLang 0.5's ``Engine.start_profile(output_dir=,
        activities=)``; not run on a GPU yet. Not a timing the gate decides on."""
        import time

        from .profiling import sglang_traces, trace_tables

        out = Path(out_dir).resolve()
        out.mkdir(parents=True, exist_ok=True)
        since = time.time()
        try:
            self.engine.start_profile(output_dir=str(out), activities=["CPU", "GPU"])
        except TypeError:  # an SGLang whose start_profile takes no settings
            self.engine.start_profile()
        t0 = time.perf_counter()
        try:
            self.generate(batch, max_new_tokens)
        finally:
            wall = time.perf_counter() - t0
            self.engine.stop_profile()
        traces = sglang_traces(out, since) or sglang_traces(
            Path(os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")), since, timeout_s=10)
        if not traces:
            raise PatchgateError(f"SGLang engine {self.label}: its profiler wrote no trace "
                                 f"into {out}", hint="see SGLang's log above")
        kept = []
        for trace in traces:  # kept beside the verdict, whatever folder SGLang chose
            if out not in trace.resolve().parents:
                trace = Path(shutil.copy2(trace, out / trace.name))
            kept.append(trace.relative_to(out).as_posix())
        tables = trace_tables(traces)
        return {"tables": tables, "wall_s": dict.fromkeys(tables, wall), "files": kept}

    def synchronize(self) -> None:
        """Nothing to wait for: ``generate`` returns once the worker has finished."""

    def close(self) -> None:
        if self.engine is not None:
            try:
                self.engine.shutdown()
            finally:
                self.engine = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
