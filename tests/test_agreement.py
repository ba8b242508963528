"""The token-agreement guard (random-weight profiles), on the default model on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgate import agreement
from patchgate.config import Lengths, get_profile
from patchgate.engines.transformers import TransformersEngine
from patchgate.patches import discover

FIX = Path(__file__).parent / "fixtures" / "gate"
PROFILE = get_profile("default").with_overrides(
    lengths=Lengths(prefill_input=64, prefill_output=1, decode_input=24, decode_output=8),
    guard="token_agreement", threads=2)


@pytest.fixture(scope="module")
def reference():
    eng = TransformersEngine(PROFILE, [], "reference")
    yield eng
    eng.close()


def test_prompts_are_deterministic_and_in_vocabulary():
    a = agreement.prompts(448, 24, n=4, seed=3)
    assert a == agreement.prompts(448, 24, n=4, seed=3)
    assert a != agreement.prompts(448, 24, n=4, seed=4)
    assert all(len(r) == 24 and all(16 <= t < 448 for t in r) for r in a)


def test_reference_agrees_with_itself(reference):
    ref, same = agreement.run(reference, reference, PROFILE, n=4, new_tokens=16)
    assert same is ref
    result = ref["tasks"][agreement.TASK]
    assert len(result["samples"]) == 4 * 16
    assert result["value"] >= 0.98  # greedy tokens are the reference's own top-1


def test_judge_scores_foreign_tokens_low(reference):
    rows = agreement.prompts(reference.vocab_size, 24, n=4)
    own = reference.generate(rows, 8)
    shifted = [[(t + 1) % reference.vocab_size for t in out] for out in own]
    assert agreement.judge(reference, rows, own)["mean"] == 1.0
    assert agreement.judge(reference, rows, shifted)["mean"] < 0.5


def test_broken_weights_lose_agreement(reference):
    broken = TransformersEngine(PROFILE, discover(FIX / "break_accuracy"), "candidate")
    try:
        ref, cand = agreement.run(reference, broken, PROFILE, n=4, new_tokens=16)
    finally:
        broken.close()
    assert cand["mean"] < 0.9 * ref["mean"]
    assert {s["id"] for s in cand["tasks"][agreement.TASK]["samples"]} == \
        {s["id"] for s in ref["tasks"][agreement.TASK]["samples"]}
