"""``patchgate calibrate --replay``: a calibration's first looks decided again under
another profile's rule, on the rounds the runs measured."""

from __future__ import annotations

import copy
import json
import math

import pytest
from fakes import LinesReporter

from patchgate.cli import main
from patchgate.errors import EXIT_ERROR, PatchgateError
from patchgate.profile import get_profile
from patchgate.tools import calibrate as calibration
from patchgate.tools.calibration_replay import render, replay


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One A/A run and one planted 50 % run on fake engines, 8 rounds a look."""
    pytest.importorskip("tabulate")
    mp = pytest.MonkeyPatch()
    from fakes import use_fake_engines

    use_fake_engines(mp)
    try:
        out = tmp_path_factory.mktemp("replay") / "cal.json"
        prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                     settle_s=0.0)
        doc = calibration.calibrate(prof, out.parent, calibration.Plan(
            runs=1, slowdowns=(0.5,), out=out), LinesReporter())
    finally:
        mp.undo()
    return out, doc


def test_each_run_keeps_its_first_looks_rounds_in_round_order(measured):
    _, doc = measured
    names = {"prefill_b1", "prefill_b8", "prefill_b64", "decode_b1", "decode_b8", "decode_b64"}
    for run in doc["runs"]:
        assert run["collector_off"] is False  # fake engines: the collector stays on
        kept = run["first_look_s"]
        assert set(kept) == {"candidate", "current"}
        assert all(set(kept[lab]) == names for lab in kept)
        assert all(len(v) == 8 for lab in kept for v in kept[lab].values())
    slow = next(r for r in doc["runs"] if r["planted"] == 0.5)["first_look_s"]
    ratios = [c / b for c, b in zip(slow["candidate"]["decode_b8"],
                                     slow["current"]["decode_b8"], strict=True)]
    assert all(1.3 < x < 1.7 for x in ratios), ratios


def test_the_same_rule_replayed_decides_the_first_look_as_the_run_did(measured):
    out, doc = measured
    prof = get_profile("default").with_overrides(rounds=8, max_looks=1)
    rep = replay(doc, prof, str(out))
    by_kind = {r["planted"]: r for r in rep["runs"]}
    assert by_kind[0.5]["first_look"] == "slower"
    assert "score" in by_kind[0.5]["slower"]
    assert by_kind[0.5]["score_ratio"] == pytest.approx(
        next(r for r in doc["runs"] if r["planted"] == 0.5)["score_ratio"])
    assert by_kind[0.0]["first_look"] != "slower"
    assert rep["kinds"]["50 %"]["first_look"]["slower"] == 1
    assert rep["kinds"]["50 %"]["verdict"]["rejected"] == 1


def test_a_shorter_t_test_look_is_decided_on_the_first_rounds(measured):
    """Four rounds cannot make the signed-rank test significant at this level (2^-4);
    the t-test on the same four rounds finds the 50 % slower."""
    out, doc = measured
    t = get_profile("default").with_overrides(rounds=4, test="t", max_looks=1)
    rank = get_profile("default").with_overrides(rounds=4, max_looks=1)
    slow_t = {r["planted"]: r for r in replay(doc, t, str(out))["runs"]}[0.5]
    slow_rank = {r["planted"]: r for r in replay(doc, rank, str(out))["runs"]}[0.5]
    assert slow_t["first_look"] == "slower"
    assert slow_rank["first_look"] == "undecided"
    text = render(replay(doc, t, str(out)))
    assert "under default's rule (t test, 4 rounds" in text
    assert "| 50 % " in text and "Not an error rate of this rule" in text


def test_a_look_longer_than_the_rounds_kept_is_an_error_naming_the_run(measured):
    out, doc = measured
    long = get_profile("default").with_overrides(rounds=12)
    with pytest.raises(PatchgateError, match=r"run 1 of the file \(A/A\): it kept 8 rounds of its "
                       r"first look; default's first look takes 12") as e:
        replay(doc, long, str(out))
    assert "--rounds 8 or fewer" in e.value.hint


def test_runs_without_their_first_look_are_left_out_or_an_error(measured):
    out, doc = measured
    older = copy.deepcopy(doc)
    del older["runs"][0]["first_look_s"]
    rep = replay(older, get_profile("default").with_overrides(rounds=8), str(out))
    assert rep["skipped"] == 1 and len(rep["runs"]) == 1
    assert "1 run(s) without their first look's rounds left out" in render(rep)
    for run in older["runs"]:
        run.pop("first_look_s", None)
    with pytest.raises(PatchgateError, match="none of its 2 run"):
        replay(older, get_profile("default"), str(out))


def test_a_calibration_of_another_profile_is_not_replayed(measured):
    out, doc = measured
    with pytest.raises(PatchgateError, match="is a calibration of profile default; the "
                       "rule given is h200-minicpm8b's"):
        replay(doc, get_profile("h200-minicpm8b"), str(out))


def test_the_command_replays_a_file_and_names_a_missing_one(measured, capsys, tmp_path):
    out, _ = measured
    assert main(["calibrate", "--replay", str(out), "--rounds", "4", "--profile",
                 "default"]) == 0
    printed = capsys.readouterr().out
    assert "decided again under default's rule (signed-rank test, 4 rounds" in printed
    assert main(["calibrate", "--replay", str(tmp_path / "none.json")]) == EXIT_ERROR
    assert "none.json does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"kind": "something else"}))
    assert main(["calibrate", "--replay", str(broken)]) == EXIT_ERROR
    assert "not a calibration file" in capsys.readouterr().err


def test_a_scenario_left_undecided_means_another_look_as_in_the_gate(measured):
    """The score shown not slower is not yet an acceptance while a scenario is undecided
    and looks are left: the gate looks again (a scenario alone slower rejects). Built
    by hand: prefill_b64 swings +-8 % round by round, the rest agree."""
    out, doc = measured
    made = copy.deepcopy(doc)
    run = next(r for r in made["runs"] if r["planted"] == 0)
    kept = run["first_look_s"]
    for name, cur in kept["current"].items():
        swing = 0.08 if name == "prefill_b64" else 0.001
        kept["candidate"][name] = [x * (1 + swing * (-1) ** i) for i, x in enumerate(cur)]
    rows = {m: {r["planted"]: r for r in replay(made, get_profile("default").with_overrides(
        rounds=8, max_looks=m), str(out))["runs"]}[0.0] for m in (1, 3)}
    assert rows[3]["first_look"] == "undecided"
    assert rows[1]["first_look"] == "accepted"


def test_the_replay_shows_the_order_effect_of_the_first_looks(measured):
    """A configuration timed second in a round planted 10 % slower at prefill_b1 (and
    only there): the replay names it there, and the spread it leaves."""
    out, doc = measured
    doc = copy.deepcopy(doc)
    for run in doc["runs"]:
        kept = run["first_look_s"]
        for lab, second in (("candidate", 1), ("current", 0)):  # candidate first in round 1
            xs = kept[lab]["prefill_b1"]
            kept[lab]["prefill_b1"] = [x * 1.1 if i % 2 == second else x
                                       for i, x in enumerate(xs)]
    rep = replay(doc, get_profile("default").with_overrides(rounds=8), str(out))
    order = rep["order"]
    assert order["prefill_b1"]["effect"] == pytest.approx(100 * math.log(1.1), abs=1.5)
    assert order["prefill_b1"]["sd_without"] < order["prefill_b1"]["sd"]
    assert all(abs(o["effect"]) < 3 for name, o in order.items() if name != "prefill_b1")
    text = render(rep)
    assert "timed second vs first" in text and "| prefill_b1" in text
