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


class Counting:
    """An engine whose call takes ``per_row_s`` per row and notes the ids it got."""

    vocab_size = 1000

    def __init__(self, label, seen, per_call_s=0.001):
        self.label, self.seen, self.per_call_s = label, seen, per_call_s

    def timed_generate(self, batch, n):
        from patchgate.engines.base import Timing

        self.seen.append((self.label, tuple(map(tuple, batch)), n))
        return Timing(self.per_call_s, tuple(row[0] for row in batch))

    def cpu_seconds(self):
        return None


def test_a_repeated_scenario_samples_the_mean_of_k_calls_on_ids_of_their_own():
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=4, prefill_output=1, decode_input=2, decode_output=3),
        batch_sizes=(1, 2), warmup=1, rounds=2, settle_s=0.0, repeats={"prefill_b1": 3})
    scenarios = make_scenarios(prof)
    seen: list = []
    engines = {lb: Counting(lb, seen, 0.002 if lb == "a" else 0.001) for lb in "ab"}
    samples = measure(engines, scenarios, Rounds.of(prof))
    b1 = [x for x in seen if len(x[1]) == 1 and len(x[1][0]) == 4]  # prefill_b1 calls
    # warm-up: one call a configuration; each timed round: 3 a configuration
    assert len(b1) == 2 * 1 + 2 * 3 * 2
    timed = b1[2:]
    for r in range(2):  # per round: a's three calls, then b's (or b's first), same ids
        calls = timed[6 * r:6 * r + 6]
        by = {lb: [ids for who, ids, _ in calls if who == lb] for lb in "ab"}
        assert by["a"] == by["b"] and len(set(by["a"])) == 3  # three batches of their own
    others = [x for x in seen if not (len(x[1]) == 1 and len(x[1][0]) == 4)]
    assert len(others) == 2 * 3 + 2 * 3 * 2  # the other scenarios: one call a sample
    assert samples["a"]["prefill_b1"] == pytest.approx([0.002, 0.002])  # the mean
    assert samples["b"]["decode_b2"] == pytest.approx([0.001, 0.001])


def test_a_primed_scenario_times_its_samples_after_an_untimed_call_of_its_own():
    """Engines whose call is 5 ms slower when the call before it was the other one's
    (cold): unprimed, every sample pays it; primed, one untimed call of the same shape
    on the same engine comes first, on ids of its own (the same for both), and no
    timed call pays it."""
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=4, prefill_output=1, decode_input=2, decode_output=3),
        batch_sizes=(1,), warmup=0, rounds=2, settle_s=0.0, repeats={"prefill_b1": 2})
    scenarios = make_scenarios(prof)
    last: list = [None]

    class Cold(Counting):
        def timed_generate(self, batch, n):
            from patchgate.engines.base import Timing

            cold = last[0] not in (None, self.label)
            last[0] = self.label
            self.seen.append((self.label, tuple(map(tuple, batch)), n))
            return Timing(0.001 + 0.005 * cold, tuple(row[0] for row in batch))

    seen: list = []
    plain = measure({lb: Cold(lb, seen) for lb in "ab"}, scenarios, Rounds.of(prof))
    assert plain["a"]["decode_b1"][1] == pytest.approx(0.006)  # after b's call: cold
    assert plain["b"]["prefill_b1"][0] == pytest.approx(0.0035)  # after a's: 1 of 2 cold
    seen.clear()
    last[0] = None
    primed = prof.with_overrides(primed=("prefill_b1", "decode_b1"))
    samples = measure({lb: Cold(lb, seen) for lb in "ab"}, scenarios, Rounds.of(primed))
    assert all(x == pytest.approx(0.001) for lb in "ab" for v in samples[lb].values()
               for x in v)
    b1 = [(who, ids) for who, ids, _ in seen if len(ids[0]) == 4]  # prefill_b1 calls
    assert len(b1) == 2 * 2 * (2 + 1)  # rounds x configurations x (2 timed + the primer)
    first = [ids for _, ids in b1[:3]], [ids for _, ids in b1[3:6]]
    assert first[0] == first[1] and len(set(first[0])) == 3  # the primer's ids its own
