"""The timing schedule: rounds counterbalanced across configurations, real engines."""

from __future__ import annotations

import pytest

from patchgate.engines.transformers import TransformersEngine
from patchgate.latency.measure import Rounds, balanced_rounds, measure, orders
from patchgate.latency.scenarios import make_scenarios
from patchgate.profile import Lengths, get_profile


@pytest.mark.parametrize("rounds, n, want", [(7, 2, 8), (8, 2, 8), (10, 3, 12), (1, 3, 3),
                                             (5, 1, 5), (0, 2, 2)])
def test_balanced_rounds(rounds, n, want):
    assert balanced_rounds(rounds, n) == want


@pytest.mark.parametrize("n", [1, 2, 3])
def test_each_label_takes_each_place_equally_often(n):
    labels = [f"c{i}" for i in range(n)]
    plan = orders(labels, balanced_rounds(7, n))
    for place in range(n):
        firsts = [order[place] for order in plan]
        assert sorted(firsts) == sorted(labels * (len(plan) // n))
    assert all(sorted(order) == labels for order in plan)


class Recording:
    """A real engine that also notes which configuration ran when."""

    def __init__(self, engine, label, log, tokens=None):
        self.engine, self.label, self.log = engine, label, log
        self.tokens = tokens if tokens is not None else []
        self.vocab_size = engine.vocab_size

    def timed_generate(self, batch, n):
        self.log.append(self.label)
        self.tokens.append(n)
        return self.engine.timed_generate(batch, n)

    def cpu_seconds(self):
        return self.engine.cpu_seconds()


def test_measure_counterbalances_real_engines():
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=8, prefill_output=1, decode_input=4, decode_output=2),
        batch_sizes=(1, 2, 4), threads=1)
    engine = TransformersEngine(prof, [], "reference")
    log: list[str] = []
    engines = {lb: Recording(engine, lb, log) for lb in ("a", "b")}
    scenarios = make_scenarios(prof)
    samples = measure(engines, scenarios, Rounds(3, warmup=1, settle_s=0.001))
    assert {len(v) for cfg in samples.values() for v in cfg.values()} == {4}  # 3 -> 4
    assert all(t > 0 for cfg in samples.values() for v in cfg.values() for t in v)
    timed = log[2 * len(scenarios):]  # after the warm-up round
    pairs = [timed[i:i + 2] for i in range(0, len(timed), 2)]
    assert sum(p[0] == "a" for p in pairs) == sum(p[0] == "b" for p in pairs)


def test_warmup_calls_stop_after_warmup_tokens_and_timed_calls_do_not():
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=8, prefill_output=1, decode_input=4, decode_output=5),
        batch_sizes=(1, 2), threads=1, warmup=1, warmup_tokens=2, rounds=2, settle_s=0.0)
    engine = TransformersEngine(prof, [], "reference")
    log: list[str] = []
    tokens: list[int] = []
    engines = {lb: Recording(engine, lb, log, tokens) for lb in ("a", "b")}
    scenarios = make_scenarios(prof)
    rounds = Rounds.of(prof)
    assert rounds.warmup_tokens == 2
    measure(engines, scenarios, rounds)
    per_round = 2 * len(scenarios)
    want = [min(s.output_len, 2) for s in scenarios for _ in "ab"]
    assert tokens[:per_round] == want  # prefill: 1 token, decode: 2 instead of 5
    assert tokens[per_round:] == [s.output_len for s in scenarios for _ in "ab"] * 2
    whole = Rounds.of(prof.with_overrides(warmup_tokens=None))
    assert [whole.output_len(s, timed=False) for s in scenarios] == \
        [s.output_len for s in scenarios]
