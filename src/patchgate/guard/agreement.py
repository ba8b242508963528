"""The token-agreement guard, for models whose accuracy means nothing (random weights).

A profile with ``guard="token_agreement"`` (``h200-minicpm8b-dummy``: MiniCPM4-8B
shape, ``load_format="dummy"``) cannot be scored on tasks. Instead the guard asks:
does the candidate still compute what the unpatched model computes?

1. Fixed prompts (random token ids from the profile's seed, the decode scenario's
   input length) are decoded greedily by each engine, free running, so a patch that
   breaks the decode path (KV cache, decode kernels) shows.
2. Every generated token is judged by the **reference** engine under teacher
   forcing: given the prompt and the tokens before it (the generating engine's own
   prefix), is this token the reference's top-1 choice? One item per token, score
   0 or 1. Judging in the generator's own context keeps one early near-tie from
   turning the rest of the sequence into disagreements.

The reference judges its own output the same way (its score is about 1; prefill
and decode kernels can differ at exact ties), and the ratio candidate / reference
goes through the same 99 % rule, C, McNemar and paired bootstrap as task accuracy.
The verdict says which guard ran (``accuracy.mode``).
"""

from __future__ import annotations

import random

from .results import AccuracyResult, ItemScore, TaskResult

TASK = "token_agreement"
METRIC = "agreement"
MODE = ("token agreement with the unpatched model (random weights: task accuracy is "
        "not meaningful); each generated token judged by the reference's top-1 choice")
PROMPTS = 16
NEW_TOKENS = 64


def prompts(vocab_size: int, length: int, n: int = PROMPTS, seed: int = 0) -> list[list[int]]:
    """``n`` prompts of ``length`` random token ids (ids 16.. to skip special tokens)."""
    rng = random.Random(f"agreement:{seed}")
    lo = min(16, vocab_size - 1)
    return [[rng.randrange(lo, vocab_size) for _ in range(length)] for _ in range(n)]


def judge(reference, prompt_rows: list[list[int]], outputs: list[list[int]],
          batch_size: int = 64, progress=None) -> AccuracyResult:
    """Score ``outputs`` (one continuation per prompt) by the reference's top-1 choice."""
    requests, ids = [], []
    for i, (p, out) in enumerate(zip(prompt_rows, outputs, strict=True)):
        for j, tok in enumerate(out):
            requests.append((p + out[:j], [tok]))
            ids.append(f"p{i:02d}-t{j:03d}")
    greedy = []
    for k in range(0, len(requests), batch_size):
        chunk = requests[k:k + batch_size]
        greedy += [g for _, g in reference.loglikelihood(chunk)]
        if progress is not None:
            progress.update(len(chunk))
    samples = [ItemScore(id=i, score=float(g)) for i, g in zip(ids, greedy, strict=True)]
    value = sum(s["score"] for s in samples) / len(samples)
    return AccuracyResult(tasks={TASK: TaskResult(metric=METRIC, value=value, samples=samples)},
                          mean=value)


def both_results(reference, candidate, profile, progress=None, n: int = PROMPTS,
                 new_tokens: int = NEW_TOKENS) -> tuple[AccuracyResult, AccuracyResult]:
    """(reference result, candidate result) of the token-agreement guard."""
    rows = prompts(reference.vocab_size, profile.lengths.decode_input, n, profile.seed)
    ref_out = reference.generate(rows, new_tokens)
    ref = judge(reference, rows, ref_out, profile.eval_batch_size, progress)
    if candidate is reference:
        return ref, ref
    cand_out = candidate.generate(rows, new_tokens)
    return ref, judge(reference, rows, cand_out, profile.eval_batch_size, progress)


class AgreementGuard:
    """The guard ``token_agreement`` (see the module docstring): both engines at once,
    the reference judging; nothing stored stands in."""

    name = "token_agreement"
    judges_alone = False

    def check(self, profile) -> None:
        """Nothing to check before the engines start: prompts are drawn from the seed."""

    def result_of(self, engine, profile, reporter) -> None:
        return None  # the reference judges: one engine alone means nothing

    def evaluate(self, ctx):
        from .base import Outcome, decided_on_every_item

        ctx.reporter.phase("accuracy", "accuracy: token agreement with the reference "
                           "(random weights)")
        configs = ctx.configs
        configs.ensure_started(("reference", "candidate"))
        with ctx.reporter.progress(None, "agreement") as bar:
            ref, cand = both_results(configs.engine("reference"),
                                     configs.engine("candidate"), ctx.profile, bar)
        return Outcome(reference=ref, candidate=cand,
                       decision=decided_on_every_item(ref, cand, ctx.limit),
                       source="measured now (token agreement)", mode=MODE)
