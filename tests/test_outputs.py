"""The answers check (patchgate.latency.outputs): a configuration whose timed calls do
not compute the model's first tokens is an error, however it got them."""

from __future__ import annotations

import random

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency import outputs

SCEN = {"prefill-bs1": 1, "prefill-bs8": 8, "decode-bs64": 64}


def model(rounds: int, seed: int = 0, popular: float = 0.0):
    """A reference's first tokens: uniform over 448 ids, or ``popular`` of them token 7
    (a model that favours a token whatever the prompt)."""
    rng = random.Random(seed)

    def token():
        return 7 if rng.random() < popular else rng.randrange(448)
    return {s: [tuple(token() for _ in range(n)) for _ in range(rounds)] for s, n in SCEN.items()}


def noisy(ref, keep: float, seed: int = 1):
    """Each first token kept with probability ``keep`` (a numerics change), else another."""
    rng = random.Random(seed)
    return {s: [tuple(t if rng.random() < keep else (t + 1) % 448 for t in call)
                for call in calls] for s, calls in ref.items()}


def check(ref, cand, **kw):
    outputs.check({"reference": ref, "candidate": cand}, "reference",
                  {"candidate": "candidate (0001-x.py)"}, **kw)


def test_a_numerics_change_passes_and_unrelated_answers_do_not():
    ref = model(6)
    check(ref, ref)
    check(ref, noisy(ref, 0.86))
    check(ref, noisy(ref, 0.5))
    with pytest.raises(PatchgateError, match=r"candidate \(0001-x.py\).*did not compute"):
        check(ref, model(6, seed=7))


def test_a_constant_answer_is_caught_though_the_model_favours_it():
    """A model that answers token 7 on 30 % of prompts: answering 7 always agrees 30 %
    of the time, far above one in the vocabulary, and kappa is still about 0."""
    ref = model(8, popular=0.3)
    sevens = {s: [(7,) * len(c) for c in calls] for s, calls in ref.items()}
    agreement = sum(outputs.by_round({"r": ref, "c": sevens}, "c", "r"), outputs.NONE)
    assert agreement.same / agreement.total > 0.2
    assert abs(agreement.kappa) < 1e-9
    with pytest.raises(PatchgateError, match="kappa"):
        check(ref, sevens)


def test_a_cache_filled_in_one_round_is_caught_by_the_median_round():
    ref = model(4)
    cached = {s: [calls[0]] * len(calls) for s, calls in ref.items()}  # round 0 repeated
    rounds = outputs.by_round({"reference": ref, "c": cached}, "c", "reference")
    assert len(rounds) == 4 and rounds[0].same == rounds[0].total == 73
    assert sum(rounds, outputs.NONE).kappa > outputs.KAPPA_FLOOR  # pooled, it would pass
    with pytest.raises(PatchgateError, match="median round"):
        check(ref, cached)


def test_a_cache_for_one_scenario_is_caught_by_that_scenario():
    ref = model(6)
    cand = dict(ref, **{"prefill-bs8": model(6, seed=9)["prefill-bs8"]})
    assert outputs.typical(outputs.by_round({"r": ref, "c": cand}, "c", "r")) > 0.2
    with pytest.raises(PatchgateError, match="scenario prefill-bs8"):
        check(ref, cand)


def test_no_reference_or_a_degenerate_model_means_no_check():
    ref = model(4)
    zeros = {s: [(0,) * len(c) for c in calls] for s, calls in ref.items()}
    outputs.check({"baseline": ref, "candidate": zeros}, None)
    check(zeros, zeros)  # every answer the same token: chance explains all, kappa is None
