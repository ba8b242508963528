"""Scenarios and profiles (pure)."""

from __future__ import annotations

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency.scenarios import make_scenarios, prompt_ids
from patchgate.profile import get_profile


def test_six_scenarios_of_the_default_profile():
    scen = make_scenarios(get_profile("default"))
    assert [s.name for s in scen] == ["prefill_b1", "prefill_b8", "prefill_b64",
                                      "decode_b1", "decode_b8", "decode_b64"]
    pre, dec = scen[0], scen[3]
    assert pre.input_len > dec.input_len and pre.output_len < dec.output_len


def test_prompts_have_exact_lengths_and_are_deterministic():
    for s in make_scenarios(get_profile("default")):
        a = prompt_ids(s, vocab_size=448, seed=0)
        assert len(a) == s.batch_size and {len(r) for r in a} == {s.input_len}
        assert all(4 <= t < 448 for r in a for t in r)
        assert a == prompt_ids(s, vocab_size=448, seed=0)
        assert a != prompt_ids(s, vocab_size=448, seed=1)


def test_gpu_profiles_use_contest_like_lengths():
    for name in ("h200-default", "h200-minicpm8b-dummy", "target-template"):
        ln = get_profile(name).lengths
        assert 2048 <= ln.prefill_input <= 4096 and ln.prefill_output <= 4
        assert 64 <= ln.decode_input <= 128 and 256 <= ln.decode_output <= 512
        assert get_profile(name).engine == "sglang"


def test_unknown_profile_is_a_user_error():
    with pytest.raises(PatchgateError, match="unknown profile 'nope'") as e:
        get_profile("nope")
    assert "default" in e.value.hint
