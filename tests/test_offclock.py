"""Work off the clock (patchgate.latency.offclock): other CPU work met by each
configuration while it is timed; the candidate may not meet less than the others."""

from __future__ import annotations

import random

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency import offclock

SCENARIOS = ("prefill_b1", "prefill_b8", "prefill_b64", "decode_b1", "decode_b8",
             "decode_b64")


def meter(per_round: dict[str, list[float]], wall: float = 0.05,
          scenarios=SCENARIOS) -> offclock.Meter:
    """A meter whose calls met ``per_round[label][r]`` cores of other work, in every
    scenario."""
    m = offclock.Meter({label: (lambda: 0.0) for label in per_round}, machine=lambda: 0.0)
    for label, values in per_round.items():
        m.calls[label] = {s: {r: (c * wall, wall) for r, c in enumerate(values)}
                          for s in scenarios}
    return m


def test_start_and_stop_count_the_machine_less_the_engine():
    # the meter reads once when made (can both tell?), then before and after the call:
    # 0.9 s busy, 0.6 s of it the engine's own
    machine, own = iter([9.0, 10.0, 10.9]), iter([4.0, 5.0, 5.6])
    m = offclock.Meter({"candidate": lambda: next(own)}, machine=lambda: next(machine))
    assert m.on
    m.stop("candidate", "decode_b1", 0, m.start("candidate"))
    other, seconds = m.calls["candidate"]["decode_b1"][0]
    assert other == pytest.approx(0.3) and seconds > 0


def test_an_engine_that_cannot_tell_turns_the_check_off():
    m = offclock.Meter({"candidate": lambda: None, "reference": lambda: 1.0},
                       machine=lambda: 1.0)
    assert not m.on and m.start("candidate") is None
    offclock.check(m)  # nothing to check


def test_the_same_background_for_every_configuration_passes():
    rng = random.Random(1)
    load = [1.0 + rng.gauss(0, 0.1) for _ in range(10)]  # a busy machine, ticks' noise
    offclock.check(meter({"candidate": load,
                          "current+reference": [x + rng.gauss(0, 0.1) for x in load]}))


def test_work_that_only_the_others_meet_is_an_error_naming_the_candidate():
    m = meter({"candidate": [0.02] * 10, "current+reference": [0.8] * 10})
    with pytest.raises(PatchgateError) as e:
        offclock.check(m, {"candidate": "candidate (0001-x.py)",
                           "current+reference": "current+reference (no patches)"})
    assert "in prefill_b1, other work kept 0.78 more CPU cores busy" in str(e.value)
    assert "while current+reference (no patches) was timed than while candidate " \
           "(0001-x.py) was" in str(e.value)
    assert "cannot be trusted" in str(e.value)


def test_a_little_work_everywhere_is_seen_in_the_round_as_a_whole():
    """A tenth of a core in every scenario: within each scenario's noise, but a round's
    six calls together show it."""
    rng = random.Random(2)
    m = offclock.Meter({"candidate": lambda: 0.0, "reference": lambda: 0.0},
                       machine=lambda: 0.0)
    for label, work in (("candidate", 0.0), ("reference", 0.1)):
        m.calls[label] = {s: {r: (max(0.0, rng.gauss(work, 0.1)) * 0.1, 0.1)
                              for r in range(20)} for s in SCENARIOS}
    for s in SCENARIOS:
        mean, se, _ = offclock.compare(m.calls["candidate"][s], m.calls["reference"][s], 2)
        assert mean < offclock.Z * se  # no scenario alone shows it
    with pytest.raises(PatchgateError, match="in all 6 scenarios together"):
        offclock.check(m)


def test_a_candidate_that_is_busier_itself_only_looks_slower():
    offclock.check(meter({"candidate": [1.0] * 10, "current+reference": [0.0] * 10}))


def test_a_difference_within_its_error_or_its_margin_passes():
    # rounds that disagree wildly (a burst of another job): above the margin on
    # average, but not by Z standard errors
    offclock.check(meter({"candidate": [0.0] * 6, "reference": [0, 0, 0, 0, 0, 1.8]}))
    # steady and certain, but below a twentieth of a core
    offclock.check(meter({"candidate": [0.0] * 10, "reference": [0.03] * 10}, wall=1.0))


def test_short_calls_are_judged_by_what_ticks_can_tell():
    """/proc/stat counts 10 ms ticks: in 2 ms calls a steady 0.3 cores is noise."""
    _, se, n = offclock.compare({r: (0.0, 0.002) for r in range(10)},
                                {r: (0.0006, 0.002) for r in range(10)}, 2)
    assert n == 10 and se > 0.3 / offclock.Z


def test_few_rounds_need_a_larger_difference_and_a_shared_engine_is_not_compared():
    offclock.check(meter({"candidate": [0.0] * 2, "reference": [1.0] * 2}))  # 2 rounds
    assert offclock.bar(4) > 20 and offclock.bar(15) == offclock.Z == offclock.bar(100)
    rng = random.Random(3)
    four = {"candidate": [rng.gauss(0, 0.05) for _ in range(4)],
            "reference": [rng.gauss(0.2, 0.05) for _ in range(4)]}
    offclock.check(meter(four))  # 0.2 cores +- 0.04: not 22 errors
    with pytest.raises(PatchgateError):  # a core, as steady as ticks allow
        offclock.check(meter({"candidate": [0.0, 0.01, 0.0, 0.02],
                              "reference": [0.95, 1.0, 0.98, 1.0]}, wall=0.3))
    offclock.check(meter({"candidate+current+reference": [0.0] * 10}))


def test_a_phase_meters_every_look_together_by_its_own_round_numbers():
    from fakes import FakeEngine

    from patchgate.latency.measure import Rounds, measure
    from patchgate.latency.scenarios import make_scenarios
    from patchgate.profile import get_profile

    prof = get_profile("default")
    scen = make_scenarios(prof)[:1]
    clock = {"t": 0.0}

    def machine():
        clock["t"] += 0.01
        return clock["t"]

    m = offclock.Meter(machine=machine)
    engines = {"candidate": FakeEngine(prof, [], "candidate"),
               "reference": FakeEngine(prof, [], "reference")}
    for e in engines.values():
        e.cpu_seconds = lambda: 0.0
    measure(engines, scen, Rounds(2, first=0), meter=m)
    measure(engines, scen, Rounds(2, first=100), meter=m)
    assert sorted(m.calls["candidate"][scen[0].name]) == [0, 1, 100, 101]


def test_the_gate_raises_it_unless_the_candidate_is_rejected_anyway():
    from patchgate.errors import PatchgateError

    error = offclock.finding(meter({"candidate": [0.0] * 10, "reference": [1.0] * 10}))
    assert isinstance(error, PatchgateError)
    with pytest.raises(PatchgateError, match="other work kept"):
        offclock.after_judgement(error, rejected=False)
    notes = offclock.after_judgement(error, rejected=True)
    assert len(notes) == 1 and "other work kept" in notes[0] and "rejected" in notes[0]
    assert offclock.after_judgement(None, rejected=False) == []

