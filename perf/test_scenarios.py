"""The six latency scenarios as pytest-benchmark tests.

    pytest perf/                           # measure (candidate: every patch in model_patches/)
    pytest perf/ --benchmark-compare       # ... and compare with this machine's stored run
    pytest perf/ --benchmark-save=current  # store a new run for this machine

Each test times one static batch, prefill (long input, one output token) or decode
(short input, long output), at batch 1, 8, 64, the way the gate does: each round is one
``timed_generate`` call timed where the model runs (perf/conftest.py); a warm-up round
is thrown away.
"""

from __future__ import annotations

import pytest

from patchgate.latency.scenarios import make_scenarios, prompt_ids
from patchgate.profile import get_profile

from .conftest import profile_name, timed

SCENARIOS = make_scenarios(get_profile(profile_name()))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(benchmark, engine, profile, scenario):
    batch = prompt_ids(scenario, engine.vocab_size, profile.seed)
    benchmark.group = scenario.phase
    benchmark.extra_info.update(scenario.record())
    benchmark.pedantic(timed, args=(engine, batch, scenario.output_len), rounds=profile.rounds,
                       warmup_rounds=profile.warmup, iterations=1)
    out = engine.generate(batch, scenario.output_len)
    assert [len(r) for r in out] == [scenario.output_len] * scenario.batch_size
