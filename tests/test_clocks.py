"""The engine's clock against the gate's (patchgate.latency.clocks): a real speed-up of
any size passes, an engine that reports less time than passed is an error."""

from __future__ import annotations

import random

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency.clocks import check, gaps

CALLS = {"prefill_b1": 0.004, "decode_b1": 0.120, "decode_b64": 0.600}
TRANSPORT = 0.0006


def timings(speed: float = 1.0, clock: float = 1.0, jitter: float = 0.0, rounds: int = 10):
    """(engine seconds, gate seconds) of one configuration: calls ``speed`` times as
    long as CALLS, the engine's clock running at ``clock``, the gate's side delayed by
    ``jitter`` every third round (a busy machine)."""
    engine, wall = {}, {}
    for name, t in CALLS.items():
        real = [t * speed * (1 + 0.01 * (i % 3)) for i in range(rounds)]
        engine[name] = [x * clock for x in real]
        wall[name] = [x + TRANSPORT + (jitter if i % 3 == 0 else 0) for i, x in enumerate(real)]
    return engine, wall


def both(**configs):
    engine = {label: timings(**kw)[0] for label, kw in configs.items()}
    wall = {label: timings(**kw)[1] for label, kw in configs.items()}
    return engine, wall


def test_honest_configurations_pass_whatever_their_speed_and_the_load():
    check(*both(candidate={"speed": 0.1}, reference={}))  # ten times faster: fine
    check(*both(candidate={"speed": 3.0}, reference={}))
    check(*both(candidate={"jitter": 0.02}, reference={"jitter": 0.02}))
    assert gaps(*both(candidate={}))["candidate"]["decode_b1"] == pytest.approx(TRANSPORT)


@pytest.mark.parametrize("clock", [0.4, 0.9])
def test_an_engine_on_a_slow_clock_is_an_error_naming_its_patches(clock):
    engine, wall = both(candidate={"clock": clock}, reference={})
    with pytest.raises(PatchgateError, match=r"the engine of candidate \(0001-x.py\) reported"):
        check(engine, wall, {"candidate": "candidate (0001-x.py)"})


def test_late_wakeups_of_a_busy_machine_in_one_configuration_pass():
    """One scenario of a look, under load: the gate's side of one configuration woke
    late in many rounds (13 ms once), its median gap 2.3 ms above the other's."""
    rng = random.Random(4)
    engine = {c: {"prefill_b1": [0.008] * 10} for c in ("candidate", "current")}
    wall = {"candidate": {"prefill_b1": [0.0084 + rng.choice([0, 0.001, 0.004]) for _ in
                                         range(10)]},
            "current": {"prefill_b1": [0.0084 + x for x in
                                       (0.0, 0.0023, 0.013, 0.0045, 0.0, 0.006, 0.0023,
                                        0.0001, 0.009, 0.0031)]}}
    assert gaps(engine, wall)["current"]["prefill_b1"] - \
        gaps(engine, wall)["candidate"]["prefill_b1"] > 0.002
    check(engine, wall)


def test_one_configuration_alone_is_not_checked():
    check(*both(candidate={"clock": 0.4}))
