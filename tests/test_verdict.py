"""Verdict rules on known numbers (no engine)."""

from __future__ import annotations

import pytest

from patchgate.config import get_profile
from patchgate.scenarios import make_scenarios
from patchgate.verdict import (
    accuracy_block,
    compare_scenarios,
    decide,
    inconclusive_slowdowns,
    task_notes,
)

PROFILE = get_profile("default")
SCEN = make_scenarios(PROFILE)
BASE = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.00]


def samples(factor: dict[str, float] | None = None) -> dict[str, list[float]]:
    factor = factor or {}
    return {s.name: [x * factor.get(s.name, 1.0) for x in BASE] for s in SCEN}


def acc(values: list[float]) -> dict:
    return {"tasks": {"t": {"metric": "acc", "value": sum(values) / len(values),
                            "samples": [{"id": str(i), "score": v}
                                        for i, v in enumerate(values)]}},
            "mean": sum(values) / len(values)}


def run(cand_factor, ref_items, cand_items, ref_factor=None):
    rows = compare_scenarios(SCEN, samples(cand_factor), samples(), samples(ref_factor),
                             PROFILE)
    a = accuracy_block(ref_items, cand_items, acc(ref_items), acc(cand_items), PROFILE)
    return decide(PROFILE, rows, a, compared_with="current baseline")


def test_equal_everything_is_accepted_with_score_100():
    v = run({}, [1.0] * 100, [1.0] * 100)
    assert v["verdict"] == "accepted" and v["reasons"] == []
    assert v["score"] == pytest.approx(100.0)
    assert v["S"] == {"1": pytest.approx(100), "8": pytest.approx(100),
                      "inf": pytest.approx(100)}


def test_faster_everywhere_scores_above_100():
    v = run({s.name: 0.5 for s in SCEN}, [1.0] * 100, [1.0] * 100)
    assert v["verdict"] == "accepted"
    assert v["score"] == pytest.approx(200.0)
    assert all(r["mark"] == "-" for r in v["scenarios"])


def test_significant_slowdown_beyond_threshold_rejects():
    v = run({"decode_b8": 1.2}, [1.0] * 100, [1.0] * 100)
    assert v["verdict"] == "rejected"
    assert len(v["reasons"]) == 1 and v["reasons"][0].startswith("decode_b8 is 20.0 % slower")
    # S8 = 100 * geomean(1, 1/1.2)
    assert v["S"]["8"] == pytest.approx(100 * (1 / 1.2) ** 0.5)


def test_slowdown_within_threshold_is_not_a_regression():
    v = run({"decode_b8": 1.03}, [1.0] * 100, [1.0] * 100)
    assert v["verdict"] == "accepted"


def test_accuracy_below_99_percent_rejects_and_c_scales():
    ref = [1.0] * 100
    cand = [1.0] * 98 + [0.0] * 2  # 98 % of the reference
    v = run({}, ref, cand)
    assert v["verdict"] == "rejected"
    assert v["accuracy"]["ratio"] == pytest.approx(0.98)
    assert v["C"] == pytest.approx(0.5)
    assert v["score"] == pytest.approx(50.0)
    assert v["accuracy"]["flipped_to_wrong"] == 2 and v["accuracy"]["flipped_to_right"] == 0
    assert "98.0 % of the reference" in v["reasons"][0]


def test_accuracy_at_99_percent_passes():
    v = run({}, [1.0] * 100, [1.0] * 99 + [0.0])
    assert v["verdict"] == "accepted" and v["C"] == pytest.approx(1.0)


def test_a_task_below_the_limit_is_noted_even_when_the_mean_passes():
    block = {"per_task": {"a": {"ratio": 0.892, "candidate": 0.58, "reference": 0.65},
                          "b": {"ratio": 1.05, "candidate": 0.7, "reference": 0.666}}}
    (note,) = task_notes(block, 0.99)
    assert note.startswith("task a is at 89.20 % of the reference (0.580 vs 0.650)")
    assert task_notes({"per_task": {}}, 0.99) == []


def test_a_noisy_slowdown_is_inconclusive_and_each_look_costs_alpha():
    noisy = [1.0, 1.6, 0.8, 1.5, 0.9, 1.4, 1.0, 1.3, 0.85, 1.45]  # median 1.15, wide spread
    cand = samples()
    cand["decode_b1"] = noisy
    rows = compare_scenarios(SCEN, cand, samples(), samples(), PROFILE)
    assert inconclusive_slowdowns(rows) == ["decode_b1"]
    again = compare_scenarios(SCEN, cand, samples(), samples(), PROFILE, {"decode_b1": 3})
    by = {r["name"]: r for r in again}
    assert by["decode_b1"]["looks"] == 3 and by["prefill_b1"]["looks"] == 1
    assert by["decode_b1"]["alpha"] == pytest.approx(by["prefill_b1"]["alpha"] / 3)
    # a clear slowdown is decided at once, and faster rows never ask for more rounds
    clear = compare_scenarios(SCEN, samples({"decode_b1": 1.3, "prefill_b8": 0.7}), samples(),
                              samples(), PROFILE)
    assert inconclusive_slowdowns(clear) == []
