"""lm-eval's view of a patchgate engine: :func:`lm_class` builds ``EngineLM``.

The accuracy guard runs lm-eval tasks through the very engine the latency scenarios
time (the loaded, patched model), greedy, token ids in and out. What it answers must
equal what lm-eval's own ``hf`` model answers for the same model and data:

- Generation requests are grouped by their generation settings (as lm-eval's models
  do): a batch never mixes two tasks' stop sequences, so ``until: ["."]`` of one task
  cannot cut another task's answer "3.5".
- A request stops at a token whose text holds one of *its own* stop sequences (or at
  EOS), and its text is cut before the first stop sequence, as lm-eval cuts it; a stop
  sequence spread over several tokens is cut from the text after ``max_gen_toks``.
- ``max_gen_toks`` defaults to lm-eval's 256; log-likelihood requests split context
  and continuation as lm-eval does (trailing spaces of the context move over).
- With a profile's ``chat_template`` the prompts go through the tokenizer's template.

Every batch goes to the engine whole (:func:`answer_batches`): an engine that spreads
work (a pool of Ray actors, :mod:`patchgate.spread.accuracy`) gets all of a call's
batches at once and may answer them side by side, each batch whole on one engine of
the configuration, so every item's score is what the serial run gives.

The sequential guard (:mod:`.sequential`) evaluates a growing share of the items: it
runs the whole task each time, so every prompt (few-shot examples included) is the one
a full run builds, and sets :attr:`EngineLM.only` to the items chosen so far. Requests
of other items get an empty answer without reaching the engine (their scores are not
read); answers already computed are kept and given again.
"""

from __future__ import annotations

import json

from ..errors import PatchgateError

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default (HFLM.max_gen_toks)


def group_key(gen_kwargs: dict) -> str:
    """Requests with the same key share batches: every generation setting, in order."""
    return json.dumps(gen_kwargs, sort_keys=True, default=str)


def stop_sequences(gen_kwargs: dict) -> list[str]:
    until = gen_kwargs.get("until") or []
    return [until] if isinstance(until, str) else list(until)


def max_gen_toks(gen_kwargs: dict) -> int:
    for key in ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens"):
        if gen_kwargs.get(key) is not None:
            return int(gen_kwargs[key])
    return DEFAULT_MAX_GEN_TOKS


def cut(text: str, stops: list[str]) -> str:
    """``text`` before the first occurrence of each stop sequence (lm-eval's rule)."""
    for s in stops:
        if s:
            text = text.split(s)[0]
    return text


# A batch pads every request to its longest; a request less than this share of the
# batch's longest starts a new batch. A full pass sorts hundreds of requests by length, so
# its batches are even anyway; the few dozen random items of a sequential look are not.
LENGTH_SPREAD = 0.5


def chunks(order: list[int], sizes: list[int], batch: int) -> list[list[int]]:
    """``order`` (sorted longest first, ``sizes`` its lengths) cut into batches of at most
    ``batch`` requests, each none shorter than :data:`LENGTH_SPREAD` of its first."""
    out: list[list[int]] = []
    head = 0
    for i, (item, size) in enumerate(zip(order, sizes, strict=True)):
        if not out or len(out[-1]) >= batch or size < LENGTH_SPREAD * sizes[head]:
            out.append([])
            head = i
        out[-1].append(item)
    return out


def answer_batches(engine, verb: str, batches: list[tuple], tick=lambda n: None) -> list:
    """``[engine.<verb>(*args) for args in batches]``, in order; ``tick(len(args[0]))``
    after each. An engine with ``answer_all`` (a pool) gets them all at once."""
    spread = getattr(engine, "answer_all", None)
    if spread is not None:
        return spread(verb, batches, tick)
    out = []
    for args in batches:
        out.append(getattr(engine, verb)(*args))
        tick(len(args[0]))
    return out


def lm_class():
    from lm_eval.api.model import LM

    class EngineLM(LM):
        """lm-eval's ``LM`` over a patchgate engine (greedy, token ids in and out)."""

        def __init__(self, engine, tokenizer, batch_size: int = 16, progress=None):
            super().__init__()
            self.engine, self.tok, self.batch_size = engine, tokenizer, batch_size
            self.progress = progress
            self._pieces: list[str] | None = None
            self._stops: dict[tuple[str, ...], frozenset[int]] = {}
            # the items to answer, {(task, doc_id)}; None: every item
            self.only: set[tuple[str, int]] | None = None
            self._kept: dict[tuple, object] = {}

        def _split_work(self, requests, blank) -> tuple[list, list[int]]:
            """The answers known so far (kept ones, ``blank`` for items not chosen) and
            the indices of the requests the engine must answer."""
            out: list = [None] * len(requests)
            todo = []
            for i, req in enumerate(requests):
                key = self._key(req)
                if self.only is not None and (req.task_name, req.doc_id) not in self.only:
                    out[i] = blank
                elif key in self._kept:
                    out[i] = self._kept[key]
                else:
                    todo.append(i)
            return out, todo

        def _keep(self, requests, out: list, todo: list[int]) -> list:
            if self.only is not None:
                for i in todo:
                    self._kept[self._key(requests[i])] = out[i]
            return out

        @staticmethod
        def _key(req) -> tuple:
            return (req.task_name, req.doc_id, req.idx, repr(req.args))

        def _encode(self, text: str) -> list[int]:
            return self.tok(text, add_special_tokens=False)["input_ids"]

        def _tick(self, n: int) -> None:
            if self.progress is not None:
                self.progress.update(n)

        # -- chat templates (profile.chat_template) ---------------------------------
        @property
        def tokenizer_name(self) -> str:
            return str(getattr(self.tok, "name_or_path", "")).replace("/", "__")

        def chat_template(self, chat_template=False) -> str:
            return getattr(self.tok, "chat_template", None) or ""

        def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
            if not getattr(self.tok, "chat_template", None):
                raise PatchgateError("the profile sets chat_template = true but the model's "
                                     "tokenizer has no chat template",
                                     hint="remove chat_template from the profile")
            return self.tok.apply_chat_template(chat_history, tokenize=False,
                                                add_generation_prompt=add_generation_prompt)

        # -- log-likelihood ----------------------------------------------------------
        def _split(self, ctx: str, cont: str) -> tuple[list[int], list[int]]:
            spaces = len(ctx) - len(ctx.rstrip())
            if spaces:  # lm-eval moves the context's trailing spaces to the continuation
                ctx, cont = ctx[:-spaces], ctx[-spaces:] + cont
            whole = self._encode(ctx + cont)
            ctx_ids = self._encode(ctx)
            cont_ids = whole[len(ctx_ids):]
            if not ctx_ids:
                prefix = self.tok.bos_token_id if self.tok.bos_token_id is not None \
                    else self.tok.eos_token_id
                ctx_ids = [prefix if prefix is not None else 0]
            return ctx_ids, cont_ids

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            out, todo = self._split_work(requests, (0.0, False))
            pairs = {i: self._split(*requests[i].args) for i in todo}
            order = sorted(todo, key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
            sizes = [len(pairs[i][0]) + len(pairs[i][1]) for i in order]
            batches = chunks(order, sizes, self.batch_size)
            answers = answer_batches(self.engine, "loglikelihood",
                                     [([pairs[j] for j in chunk],) for chunk in batches],
                                     self._tick)
            for chunk, results in zip(batches, answers, strict=True):
                for j, res in zip(chunk, results, strict=True):
                    out[j] = res
            return self._keep(requests, out, todo)

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise PatchgateError("rolling log-likelihood tasks (perplexity) are not "
                                 "supported by the guard",
                                 hint="use generate_until or multiple_choice tasks")

        # -- generation --------------------------------------------------------------
        def _stop_ids(self, stops: list[str]) -> frozenset[int]:
            """Token ids whose text holds one of ``stops``, and EOS."""
            key = tuple(stops)
            if key not in self._stops:
                if self._pieces is None:
                    self._pieces = self.tok.batch_decode([[i] for i in range(len(self.tok))])
                ids = {i for i, piece in enumerate(self._pieces)
                       if any(s and s in piece for s in stops)}
                if self.tok.eos_token_id is not None:
                    ids.add(self.tok.eos_token_id)
                self._stops[key] = frozenset(ids)
            return self._stops[key]

        def generate_until(self, requests, disable_tqdm: bool = False):
            out, todo = self._split_work(requests, "")
            groups: dict[str, list[int]] = {}
            for i in todo:
                groups.setdefault(group_key(requests[i].args[1]), []).append(i)
            for members in groups.values():
                kwargs = requests[members[0]].args[1]
                stops, limit = stop_sequences(kwargs), max_gen_toks(kwargs)
                stop_ids = self._stop_ids(stops)
                prompts = {i: self._encode(requests[i].args[0]) for i in members}
                order = sorted(members, key=lambda i: -len(prompts[i]))
                batches = chunks(order, [len(prompts[i]) for i in order], self.batch_size)
                answers = answer_batches(
                    self.engine, "generate_until",
                    [([prompts[i] for i in chunk], limit, stop_ids) for chunk in batches],
                    self._tick)
                for chunk, rows in zip(batches, answers, strict=True):
                    for i, row in zip(chunk, rows, strict=True):
                        text = self.tok.decode(row[:limit], skip_special_tokens=True)
                        out[i] = cut(text, stops)
            return self._keep(requests, out, todo)

    return EngineLM
