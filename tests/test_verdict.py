"""Verdict rules on known numbers (no engine): paired rows, the pooled score, Holm,
the fastest accepted state, confirmation, accuracy."""

from __future__ import annotations

import math
import random

import pytest

from patchgate.guard.decision import AccuracyDecision
from patchgate.latency import decide
from patchgate.latency.looks import judged
from patchgate.latency.scenarios import make_scenarios
from patchgate.profile import get_profile
from patchgate.stats import SLOWER, UNDECIDED, PairedComparison
from patchgate.verdict import document
from patchgate.verdict.accuracy import accuracy_block, task_notes
from patchgate.verdict.judge import judge


def build(*args, **kwargs):
    """The verdict document of a judgement, as the gate assembles it."""
    return document.assemble(judge(*args, **kwargs), document.Facts("default"))


def paired(ref_items: list[float], cand_items: list[float], profile=None):
    """The accuracy block and the decision of a guard that saw every item."""
    profile = profile or PROFILE
    decision = AccuracyDecision.full_set(ref_items, cand_items,
                                         profile.thresholds.accuracy_reject)
    return accuracy_block(ref_items, cand_items, acc(ref_items), acc(cand_items), profile,
                          decision), decision

PROFILE = get_profile("default")
SCEN = make_scenarios(PROFILE)
ROUNDS = 12


def samples(factor: dict[str, float] | None = None, noise: float = 0.01, seed: int = 0,
            base: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Per scenario, ROUNDS times around 1.0 with multiplicative noise (seeded)."""
    rng = random.Random(seed)
    factor = factor or {}
    out = {}
    for s in SCEN:
        b = base[s.name] if base else [1.0] * ROUNDS
        out[s.name] = [x * factor.get(s.name, 1.0) * math.exp(rng.gauss(0, noise)) for x in b]
    return out


def acc(values: list[float]) -> dict:
    return {"tasks": {"t": {"metric": "acc", "value": sum(values) / len(values),
                            "samples": [{"id": str(i), "score": v}
                                        for i, v in enumerate(values)]}},
            "mean": sum(values) / len(values)}


def run(cand_factor, ref_items=None, cand_items=None, noise=0.01):
    ref_items = ref_items or [1.0] * 100
    cand_items = cand_items or [1.0] * 100
    cur = samples(noise=noise, seed=1)
    s = {"candidate": samples(cand_factor, noise=noise, seed=2), "current": cur,
         "reference": samples(noise=noise, seed=3)}
    lat = judged(s, SCEN, PROFILE)
    a, d = paired(ref_items, cand_items)
    return build(PROFILE, lat, a, d, compared_with="current baseline")


def test_equal_everything_is_accepted_and_equivalent():
    v = run({})
    assert v["verdict"] == "accepted" and v["reasons"] == []
    assert v["score"] == pytest.approx(100.0, abs=2)
    assert all(r["outcome"] == "equivalent" and r["mark"] == "=" for r in v["scenarios"])
    assert v["latency"]["score"]["outcome"] == "equivalent"
    assert v["schema_version"] == 3


def test_faster_everywhere_scores_above_100():
    v = run({s.name: 0.5 for s in SCEN})
    assert v["verdict"] == "accepted"
    assert v["score"] == pytest.approx(200.0, rel=0.03)
    assert all(r["outcome"] == "faster" and r["improved"] for r in v["scenarios"])


def test_one_scenario_slower_beyond_the_threshold_rejects():
    v = run({"decode_b8": 1.2})
    assert v["verdict"] == "rejected"
    slow = [r for r in v["scenarios"] if r["regressed"]]
    assert [r["name"] for r in slow] == ["decode_b8"] and slow[0]["outcome"] == SLOWER
    assert any(reason.startswith("decode_b8 is 19.") for reason in v["reasons"])
    # 20 % on one scenario of weight 0.15: the score moves by about 2.7 %, within 5 %
    assert v["latency"]["score"]["outcome"] != SLOWER


def test_a_uniform_slowdown_too_noisy_per_scenario_is_caught_by_the_pooled_score():
    """Every scenario 10 % slower at a noise where no single one is significant after
    Holm: the six together are one strong fact."""
    v = run({s.name: 1.10 for s in SCEN}, noise=0.10)
    assert v["verdict"] == "rejected"
    assert v["latency"]["score"]["outcome"] == SLOWER
    assert v["reasons"][0].startswith("the score is ")
    assert sum(r["regressed"] for r in v["scenarios"]) < 6


def test_slowdown_within_the_threshold_is_equivalent_not_a_regression():
    v = run({"decode_b8": 1.02}, noise=0.005)
    assert v["verdict"] == "accepted"
    row = next(r for r in v["scenarios"] if r["name"] == "decode_b8")
    assert row["outcome"] == "equivalent" and 1.0 < row["ratio"] < 1.05


def test_noise_too_large_to_tell_is_undecided():
    v = run({}, noise=0.3)
    assert v["verdict"] == "accepted"
    assert any(r["outcome"] == UNDECIDED and r["mark"] == "~" for r in v["scenarios"])


def test_small_slowdowns_that_add_up_are_caught_against_the_fastest_state():
    """Candidate 2 % slower than current (equivalent), but current is 6 % slower than
    the fastest accepted state: the candidate is 8 % slower than that."""
    cur_slow = {s.name: 1.06 for s in SCEN}
    s = {"candidate": samples({n: 1.08 for n in cur_slow}, 0.005, 2),
         "current": samples(cur_slow, 0.005, 1), "reference": samples(noise=0.005, seed=3),
         "best": samples(noise=0.005, seed=4)}
    lat = judged(s, SCEN, PROFILE, ("current", "best"))
    a, d = paired([1.0] * 10, [1.0] * 10)
    v = build(PROFILE, lat, a, d, compared_with="current baseline")
    assert v["latency"]["score"]["outcome"] == "equivalent"
    assert v["latency"]["best"]["outcome"] == SLOWER
    assert v["verdict"] == "rejected"
    assert "fastest accepted state" in v["reasons"][-1]


def test_each_look_tests_at_alpha_over_the_looks():
    lat = judged({"candidate": samples(), "current": samples(seed=1),
                  "reference": samples(seed=2)}, SCEN, PROFILE)
    assert lat.alpha_look == pytest.approx(0.05 / PROFILE.max_looks)
    assert lat.decisions["current"]["decode_b1"].alpha == lat.alpha_look


def test_a_slowdown_not_repeated_in_fresh_processes_does_not_count():
    lat = judged({"candidate": samples({"prefill_b64": 1.3}), "current": samples(seed=1),
                  "reference": samples(seed=2)}, SCEN, PROFILE)
    assert lat.decisions["current"]["prefill_b64"].outcome == SLOWER
    cmp = PairedComparison(1.01, 0.99, 1.03, 0.3, 0.7, 12, lat.alpha_look, 0.03)
    lat.confirmation = {"current": {"prefill_b64": decide.Decision(
        "prefill_b64", cmp, "equivalent", 1, lat.alpha_look)}}
    a, d = paired([1.0] * 10, [1.0] * 10)
    v = build(PROFILE, lat, a, d, compared_with="current baseline")
    row = next(r for r in v["scenarios"] if r["name"] == "prefill_b64")
    # the fresh processes decide: equivalent there, so not a slowdown
    assert not row["regressed"] and row["outcome"] == "equivalent"
    assert row["confirmation"]["outcome"] == "equivalent"
    # the score pools a 30 % slower prefill_b64 (weight 0.15): +3.9 %, within the 5 %
    # threshold and shown so (equivalent): accepted
    assert v["latency"]["score"]["outcome"] == "equivalent" and v["verdict"] == "accepted"


def test_score_weights_follow_the_contest_and_sum_to_one():
    w = decide.score_weights(SCEN, PROFILE.batch_sizes)
    assert w["prefill_b1"] == pytest.approx(0.2) and w["decode_b64"] == pytest.approx(0.15)
    assert sum(w.values()) == pytest.approx(1.0)
    # the baseline's S shifts the weights to the score's first-order change
    w2 = decide.score_weights(SCEN, PROFILE.batch_sizes, {"1": 50, "8": 100, "inf": 100})
    assert w2["prefill_b1"] == pytest.approx(0.2 * 50 / 80)


def test_accuracy_below_99_percent_rejects_and_c_scales():
    v = run({}, [1.0] * 100, [1.0] * 98 + [0.0] * 2)  # 98 % of the reference
    assert v["verdict"] == "rejected"
    assert v["accuracy"]["ratio"] == pytest.approx(0.98)
    assert v["C"] == pytest.approx(0.5)
    assert v["score"] == pytest.approx(50.0, abs=1)
    assert v["accuracy"]["flipped_to_wrong"] == 2 and v["accuracy"]["flipped_to_right"] == 0
    assert "98.0 % of the reference" in v["reasons"][0]


def test_accuracy_at_99_percent_passes():
    v = run({}, [1.0] * 100, [1.0] * 99 + [0.0])
    assert v["verdict"] == "accepted" and v["C"] == pytest.approx(1.0)


def test_a_task_below_the_limit_is_noted_even_when_the_mean_passes():
    block = {"per_task": {"a": {"ratio": 0.892, "candidate": 0.58, "reference": 0.65},
                          "b": {"ratio": 1.05, "candidate": 0.7, "reference": 0.666}}}
    decision = AccuracyDecision(outcome="pass", limit=0.99, ratio=0.995, items=100, total=100)
    (note,) = task_notes(block, decision)
    assert note.startswith("task a is at 89.20 % of the reference (0.580 vs 0.650)")
    assert task_notes({"per_task": {}}, decision) == []


def test_an_acknowledged_slowdown_passes_but_is_kept_and_accuracy_still_rules():
    lat = judged({"candidate": samples({"decode_b8": 1.3}), "current": samples(seed=1),
                  "reference": samples(seed=2)}, SCEN, PROFILE)
    a, d = paired([1.0] * 100, [1.0] * 100)
    v = build(PROFILE, lat, a, d, compared_with="current baseline",
              allow_slower="exact attention: needed for long inputs")
    assert v["verdict"] == "accepted" and v["reasons"] == []
    assert v["allowed_slower"]["reason"].startswith("exact attention")
    assert v["allowed_slower"]["slowdowns"][0].startswith("decode_b8 is ")
    bad, d = paired([1.0] * 100, [1.0] * 90 + [0.0] * 10)
    v = build(PROFILE, lat, bad, d, compared_with="current baseline", allow_slower="anything")
    assert v["verdict"] == "rejected" and "accuracy" in v["reasons"][0]


def test_not_shown_not_slower_is_inconclusive_not_accepted():
    """Noise too large to tell: the old gate accepted this ("not shown slower"); now the
    verdict is inconclusive, says why, and what a re-run would need."""
    noisy = samples(noise=0.30, seed=5)
    lat = judged({"candidate": noisy, "current": samples(seed=1), "reference": samples(seed=2)},
                 SCEN, PROFILE)
    a, d = paired([1.0] * 10, [1.0] * 10)
    v = build(PROFILE, lat, a, d, compared_with="current baseline", calibrated_noise=0.01)
    assert v["latency"]["score"]["outcome"] == "undecided"
    assert v["verdict"] == "inconclusive"
    assert v["reasons"][0].startswith("latency not shown within the 5 % threshold of the "
                                      "current baseline")
    assert "a re-run would need about" in v["reasons"][0] or "at the threshold" in \
        v["reasons"][0]
    assert any("noisier than when calibrated" in r for r in v["reasons"])


def test_a_faster_change_whose_interval_only_clears_the_slow_side_is_accepted():
    """4 % faster, interval reaching below 1/1.05: not equivalent, not significantly
    faster beyond the threshold, but shown not slower: accepted ("not slower")."""
    cur = samples(seed=1)
    cand = {n: [x * 0.96 * (1 + 0.03 * ((i * 7919) % 11 - 5) / 5) for i, x in enumerate(xs)]
            for n, xs in cur.items()}
    lat = judged({"candidate": cand, "current": cur, "reference": samples(seed=2)}, SCEN,
                 PROFILE)
    a, d = paired([1.0] * 10, [1.0] * 10)
    v = build(PROFILE, lat, a, d, compared_with="current baseline")
    score = v["latency"]["score"]
    assert score["ci_high"] < 1.05 and score["outcome"] in ("not slower", "equivalent")
    assert v["verdict"] == "accepted"


def test_rounds_needed_shrink_with_the_distance_to_the_threshold():
    from patchgate.verdict.evidence import rounds_needed

    item = {"ratio": 1.02, "ci_low": 0.98, "ci_high": 1.06, "rounds": 10}
    near = rounds_needed(item, 0.05)
    far = rounds_needed(dict(item, ratio=1.00, ci_low=0.96, ci_high=1.04), 0.05)
    assert far < near
    assert rounds_needed(dict(item, ratio=1.049), 0.05) is None  # at the threshold


def test_the_noise_is_measured_between_two_engines_never_one_engine_with_itself():
    from patchgate.verdict.evidence import noise

    cur, ref = samples(noise=0.02, seed=1), samples(noise=0.02, seed=3)
    lat = judged({"candidate": cur, "current": cur, "reference": ref}, SCEN, PROFILE)
    assert noise(lat) is None  # the candidate's own rounds against themselves
    lat.same_as_current = True  # the gate's case: the candidate is the current baseline
    against_ref = noise(lat)
    assert against_ref is not None and 0.005 < against_ref < 0.1
    assert against_ref == noise(lat, "reference")
    one = judged({"candidate": cur, "current": cur, "reference": cur}, SCEN, PROFILE)
    one.same_as_current = True  # no patches anywhere: one engine, no noise to report
    assert noise(one) is None
    other = judged({"candidate": samples(noise=0.02, seed=2), "current": cur,
                    "reference": ref}, SCEN, PROFILE)
    assert noise(other) == noise(other, "current") != noise(other, "reference")
