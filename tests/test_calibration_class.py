"""A calibration is one hardware class's: another class's runs go to a file of their own,
files measured apart merge into their class's, and a verdict quotes its own class's rates
(else says they are another runner's and compares no noise with them)."""

from __future__ import annotations

import json

import pytest
from fakes import LinesReporter, use_fake_engines

from patchgate.cli import main
from patchgate.errors import EXIT_ERROR, PatchgateError
from patchgate.profile import get_profile
from patchgate.report.render import latency_lines
from patchgate.store import calibration as cal_file
from patchgate.store import environment
from patchgate.store.baselines import BaselineStore
from patchgate.tools import calibrate as calibration
from patchgate.tools import calibration_file
from patchgate.tools.calibration_merge import merge

H100 = {"cpu_model": "Intel Xeon", "cpu_count": 16, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_count": 1, "gpu_driver": "580.159.04", "device": "cuda", "engine": "sglang"}
H200 = H100 | {"gpu_name": "NVIDIA H200"}
SETTINGS = {"rounds": 8, "max_looks": 3, "threshold": 0.02, "alpha": 0.05, "confirm": True}


def _run(planted: float, outcome: str, ratio: float) -> dict:
    return {"planted": planted, "condition": "quiet", "outcome": outcome,
            "rejected": outcome == "rejected", "score_ratio": ratio, "looks": 1,
            "wall_s": 300.0, "noise": 0.01, "ci_widths": {}}


def _doc(env: dict, runs: list[dict], profile: str = "h200-minicpm8b") -> dict:
    head = {"profile": profile, "environment": env, "settings": SETTINGS, "load": {},
            "wall_s": 300.0 * len(runs)}
    return calibration_file.document(head, runs, "/nonexistent")


def _store(tmp_path, env: dict = H100) -> BaselineStore:
    store = BaselineStore(tmp_path, "h200-minicpm8b")
    store.calibration_path().parent.mkdir(parents=True, exist_ok=True)
    store.calibration_path().write_text(json.dumps(_doc(env, [_run(0.0, "accepted", 1.0)])))
    return store


def test_another_class_goes_beside_the_main_file_and_never_replaces_it(tmp_path):
    store = BaselineStore(tmp_path, "h200-minicpm8b")
    main_file = store.calibration_path()
    assert cal_file.path_for(store, H200) == main_file  # none yet: the main file
    _store(tmp_path)
    assert cal_file.path_for(store, H100 | {"torch_threads": 3}) == main_file  # same class
    other = cal_file.path_for(store, H200)
    assert other.parent == main_file.parent and other.name == (
        f"calibration-{environment.machine_key(H200)}.json")
    assert "NVIDIA-H200" in other.name
    main_file.write_text("{broken")
    with pytest.raises(PatchgateError, match=r"calibration\.json"):
        cal_file.path_for(store, H200)


def test_a_verdict_quotes_its_own_class_else_the_main_file_as_another_runners(tmp_path):
    store = _store(tmp_path)
    assert cal_file.pick([], H100) is None
    (only,) = cal_file.quotes(store)
    assert only["machine"] == environment.machine_key(H100) and "H100" in only["runner"]
    elsewhere = cal_file.pick([only], H200)
    assert elsewhere["this_runner"] is False and elsewhere["text"].startswith("0/1 false alarms")
    h200 = cal_file.path_for(store, H200)
    h200.write_text(json.dumps(_doc(H200, [_run(0.0, "rejected", 1.03)])))
    found = cal_file.quotes(store)
    assert [q["machine"] for q in found] == [environment.machine_key(H100),
                                             environment.machine_key(H200)]
    mine = cal_file.pick(found, H200)
    assert mine["this_runner"] is True and mine["text"].startswith("1/1 false alarms")
    assert cal_file.pick(found, H100)["text"].startswith("0/1 false alarms")


def test_the_report_says_when_the_rates_are_another_runners_and_compares_no_noise():
    block = {"noise": 0.02, "threshold": 0.02, "alpha": 0.05, "max_looks": 3,
             "alpha_look": 0.0167, "looks": 1}
    cal = {"text": "0/3 false alarms", "created": "2026-12-07T00:00:00+00:00",
           "noise": 0.01, "runner": "cuda: NVIDIA H100 80GB HBM3"}
    here = latency_lines({"latency": block, "calibration": cal})  # before this_runner
    assert "measured on this runner (2026-12-07): 0/3 false alarms" in here
    assert any("2.0x the 1.00 % calibrated on this runner" in x for x in here)
    there = latency_lines({"latency": block, "calibration": cal | {"this_runner": False}})
    assert ("measured on another runner, not this one (cuda: NVIDIA H100 80GB HBM3, "
            "2026-12-07; `patchgate calibrate` measures this one): 0/3 false alarms") in there
    assert not any("calibrated on this runner" in x for x in there)


def test_a_calibration_here_of_another_class_than_the_stored_one_gets_its_own_file(
        tmp_path, monkeypatch):
    use_fake_engines(monkeypatch)
    prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                 settle_s=0.0)
    store = BaselineStore(tmp_path, "default")
    store.calibration_path().parent.mkdir()
    stored = json.dumps(_doc(H100, [_run(0.0, "accepted", 1.0)], profile="default"))
    store.calibration_path().write_text(stored)
    doc = calibration.calibrate(prof, tmp_path, calibration.Plan(runs=1, slowdowns=()),
                                LinesReporter())
    assert store.calibration_path().read_text() == stored  # the H100's, untouched
    env = environment.fingerprint(prof.engine, prof.device)
    mine = cal_file.path_for(store, env)
    assert mine != store.calibration_path()
    assert json.loads(mine.read_text())["runs"] == json.loads(json.dumps(doc["runs"]))
    again = calibration.calibrate(prof, tmp_path, calibration.Plan(
        runs=1, slowdowns=(), append=True), LinesReporter())  # --append finds it
    assert len(again["runs"]) == 2 and len(cal_file.paths(store)) == 2


def test_merge_adds_files_to_their_class_in_order_and_refuses_another_machine(tmp_path):
    _store(tmp_path)  # the H100's main file
    parts = []
    for i, run in enumerate([_run(0.0, "accepted", 0.996), _run(0.05, "rejected", 1.058),
                             _run(0.0, "accepted", 1.0)]):
        parts.append(tmp_path / f"part{i}.json")
        parts[-1].write_text(json.dumps(_doc(H200, [run])))
    target, doc = merge(parts, tmp_path)
    assert target == cal_file.path_for(BaselineStore(tmp_path, "h200-minicpm8b"), H200)
    assert [r["score_ratio"] for r in doc["runs"]] == [0.996, 1.058, 1.0]
    kinds = doc["summary"]["kinds"]
    assert kinds["A/A"]["runs"] == 2 and kinds["5 %"]["rejected"] == 1
    assert doc["wall_s"] == 900.0 and json.loads(target.read_text()) == doc
    more = tmp_path / "more.json"
    more.write_text(json.dumps(_doc(H200, [_run(0.05, "rejected", 1.06)])))
    _, doc = merge([more], tmp_path)  # the class's own file first, then the new runs
    assert [r["score_ratio"] for r in doc["runs"]] == [0.996, 1.058, 1.0, 1.06]
    before = target.read_text()
    h100 = tmp_path / "h100.json"
    h100.write_text(json.dumps(_doc(H100, [_run(0.0, "accepted", 1.0)])))
    with pytest.raises(PatchgateError, match=r"h100\.json: measured in another environment "
                       r"\(gpu_name\)"):
        merge([more, h100], tmp_path)
    assert target.read_text() == before  # nothing written


def test_merge_through_the_command_line(tmp_path, capsys):
    part = tmp_path / "part.json"
    part.write_text(json.dumps(_doc(H200, [_run(0.0, "accepted", 1.0)])))
    out = tmp_path / "merged.json"
    assert main(["calibrate", "--profile", "h200-minicpm8b", "--merge", str(part),
                 "--out", str(out)]) == 0
    assert "1 run(s) in" in capsys.readouterr().out and out.exists()
    assert main(["calibrate", "--merge", str(tmp_path / "none.json")]) == EXIT_ERROR
    assert "none.json does not exist" in capsys.readouterr().err


def test_only_a_quote_of_this_runners_class_gives_a_noise_to_compare_with():
    assert cal_file.own_noise(None) is None
    assert cal_file.own_noise({"noise": 0.01}) == 0.01  # a verdict from before the classes
    assert cal_file.own_noise({"noise": 0.01, "this_runner": True}) == 0.01
    assert cal_file.own_noise({"noise": 0.01, "this_runner": False}) is None
