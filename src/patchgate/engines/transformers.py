"""The transformers engine: a static batch, greedy, with a KV cache, on CPU or GPU.

Prefill is one forward over the whole batch; decode is one forward per new token
(``logits_to_keep=1``). Output lengths are fixed: EOS is never looked at. Threads
are pinned to the profile's ``threads`` (all cores by default).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from ..errors import PatchgateError
from ..patches import merged_server_args
from ..patches.apply import apply_patches
from .base import Timed, check_lengths, described

# SERVER_ARGS a patch may set on this engine.
ENGINE_ARGS = {"dtype": str, "threads": int}


class TransformersEngine(Timed):
    name = "transformers"

    def __init__(self, profile, patches, label: str, on_patch=None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        if not sys.stderr.isatty():  # no "Loading weights" bar redrawn into a log
            hf_logging.disable_progress_bar()

        self.label = label
        self._patch_names = [p.name for p in patches]
        args = merged_server_args(patches, self.name)
        for key in args:
            if key not in ENGINE_ARGS:
                owner = next(p.name for p in patches if key in p.server_args)
                raise PatchgateError(
                    f"patch {owner}: SERVER_ARGS sets {key!r}, which the transformers engine "
                    f"does not take (it takes: {', '.join(sorted(ENGINE_ARGS))})",
                    hint="limit the patch with ENGINES = ('sglang',) if it is an SGLang setting",
                )
        self.device = torch.device(profile.device)
        threads = args.get("threads", profile.threads) or os.cpu_count() or 1
        torch.set_num_threads(int(threads))
        dtype = getattr(torch, args.get("dtype", profile.dtype))
        path = profile.model_path()
        if not (path / "config.json").exists():
            raise PatchgateError(f"profile {profile.name}: no model at {path}",
                                 hint="set the profile's model to a folder in HF format")
        model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True, dtype=dtype)
        model = model.to(self.device).eval()
        model = apply_patches(model, patches, self.name, on_patch)
        self.model = model
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
        self.vocab_size = int(model.config.vocab_size)
        self.eos_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else (self.eos_id or 0)
        self._torch = torch

    def describe(self) -> str:
        """The configuration and its patches, for messages: ``candidate (0001-x.py)``."""
        return described(self.label, self._patch_names)

    def ready(self) -> TransformersEngine:
        return self

    # ------------------------------------------------------------------ helpers
    def _check_finite(self, logits, what: str) -> None:
        if not bool(self._torch.isfinite(logits).all()):
            raise PatchgateError(
                f"engine {self.label}: the model produced NaN or inf logits during {what}",
                hint="a patch broke the numerics; run without it to confirm",
            )

    def _step(self, ids, cache, mask=None, pos=None):
        out = self.model(input_ids=ids, past_key_values=cache, attention_mask=mask,
                         position_ids=pos, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1], out.past_key_values

    # ------------------------------------------------------------------ verbs
    def generate(self, batch: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        torch = self._torch
        with torch.inference_mode():
            ids = torch.tensor(batch, dtype=torch.long, device=self.device)
            logits, cache = self._step(ids, None)
            self._check_finite(logits, "prefill")
            nxt = logits.argmax(-1)
            toks = [nxt]
            for _ in range(max_new_tokens - 1):
                logits, cache = self._step(nxt[:, None], cache)
                nxt = logits.argmax(-1)
                toks.append(nxt)
            self._check_finite(logits, "decode")
            out = torch.stack(toks, 1).tolist()
        check_lengths(out, len(batch), max_new_tokens, self.label)
        return out

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        torch = self._torch
        width = max(len(p) for p in prompts)
        with torch.inference_mode():
            ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(prompts), width), dtype=torch.long)
            for i, p in enumerate(prompts):  # left padding
                ids[i, width - len(p):] = torch.tensor(p)
                mask[i, width - len(p):] = 1
            ids, mask = ids.to(self.device), mask.to(self.device)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits, cache = self._step(ids, None, mask, pos)
            self._check_finite(logits, "generation")
            done = torch.zeros(len(prompts), dtype=torch.bool, device=self.device)
            stop = torch.tensor(sorted(stop_ids) or [-1], device=self.device)
            rows: list[list[int]] = [[] for _ in prompts]
            for _ in range(max_new_tokens):
                nxt = logits.argmax(-1)
                for i, t in enumerate(nxt.tolist()):
                    if not done[i]:
                        rows[i].append(t)
                done |= torch.isin(nxt, stop)
                if bool(done.all()):
                    break
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
                pos = pos[:, -1:] + 1
                logits, cache = self._step(nxt[:, None], cache, mask, pos)
        return rows

    def loglikelihood(self, requests):
        torch = self._torch
        results = []
        with torch.inference_mode():
            seqs = [ctx + cont for ctx, cont in requests]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for i, s in enumerate(seqs):  # right padding: causal attention ignores it
                ids[i, : len(s)] = torch.tensor(s)
                mask[i, : len(s)] = 1
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             use_cache=False)
            logp = out.logits.float().log_softmax(-1)
            self._check_finite(logp, "log-likelihood")
            for i, (ctx, cont) in enumerate(requests):
                start = len(ctx)
                span = logp[i, start - 1: start - 1 + len(cont)]
                target = torch.tensor(cont, device=span.device)
                ll = span.gather(-1, target[:, None]).sum().item()
                greedy = bool((span.argmax(-1) == target).all())
                results.append((ll if math.isfinite(ll) else float("-inf"), greedy))
        return results

    def profile_generate(self, batch: list[list[int]], max_new_tokens: int, out_dir: str
                         ) -> dict:
        """One :meth:`generate` call under torch.profiler and once under cProfile
        (``--explain``); the traces go to ``out_dir``, the tables come back
        (:func:`patchgate.engines.profiling.profile_call`). Not a timing the gate decides on."""
        from .profiling import profile_call

        return profile_call(lambda: self.generate(batch, max_new_tokens), Path(out_dir),
                            cuda=self.device.type == "cuda")

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self._torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self.model = None
