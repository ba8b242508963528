"""``--attribute`` (patchgate.attribution) on fake engines of exact speed: each new
patch gets the effect of its own prefix, and the extra engines are closed."""

from __future__ import annotations

from fakes import use_fake_engines, write_patch

from patchgate import attribution
from patchgate.engines.configurations import Configurations
from patchgate.patches import discover
from patchgate.profile import get_profile

PROFILE = get_profile("default").with_overrides(rounds=6, warmup=0, settle_s=0.0)


def test_each_new_patch_gets_its_own_prefix_effect(tmp_path, monkeypatch, reporter):
    built = use_fake_engines(monkeypatch)
    folder = write_patch(tmp_path / "p", "0001-faster-20.py")
    write_patch(folder, "0002-same.py")
    write_patch(folder, "0003-slow-25.py")
    new = discover(folder)
    accuracy = {"current": 0.90, "P1": 0.90, "P2": 0.88}  # P0 is the current baseline
    sets = {"candidate": new, "current": [], "reference": []}
    with Configurations(PROFILE, sets) as configs:
        configs.start()
        rows = attribution.prefixes(
            configs, new, lambda e: {"mean": accuracy[e.label]},
            {"reference": {"mean": 0.90}, "candidate": {"mean": 0.87}}, reporter)
        extra = [e for e in built if e.label in ("P1", "P2")]
        assert extra and all(e.closed for e in extra)  # the prefixes' own engines
    assert [r["patch"] for r in rows] == [p.name for p in new]
    faster, same, slower = rows
    assert faster["score"]["ratio"] < 0.85 and faster["score_change"] > 0.15
    assert abs(same["score"]["ratio"] - 1) < 0.01
    assert slower["score"]["ratio"] > 1.2 and slower["score_change"] < -0.15
    assert abs(slower["accuracy_ratio"] - 0.87 / 0.90) < 1e-12
    assert abs(slower["accuracy_change"] - (0.87 - 0.88) / 0.90) < 1e-12
    assert any("P1 (+ 0001-faster-20.py)" in x for x in reporter.lines)


def test_the_cost_is_said_in_calls_of_the_profiles_scenarios():
    new = ["a", "b"]
    text = attribution.cost(PROFILE, new)
    # 3 configurations x 6 rounds x 6 scenarios
    assert "one look of 108 more timed calls (3 configurations)" in text
