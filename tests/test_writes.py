"""What a finished run writes (patchgate.store.writes): baselines only when accepted
with --accept, the change-log entry and history line with --accept or --record, the
verdict and flips files with --json; and the notes saying so, decided beforehand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import write_patch

from patchgate.guard.decision import AccuracyDecision
from patchgate.latency.looks import judged
from patchgate.latency.scenarios import make_scenarios
from patchgate.patches import discover
from patchgate.profile import get_profile
from patchgate.store import flips, writes
from patchgate.store.baselines import BaselineStore
from patchgate.verdict import document
from patchgate.verdict.accuracy import accuracy_block
from patchgate.verdict.judge import judge

PROFILE = get_profile("default")
ACC = {"tasks": {"t": {"metric": "acc", "value": 1.0,
                       "samples": [{"id": str(i), "score": 1.0} for i in range(10)]}},
       "mean": 1.0}


class Opts:
    def __init__(self, tmp: Path, accept=False, record=False, json_path=None):
        self.profile, self.accept, self.record, self.json_path = PROFILE, accept, record, json_path
        self.changelog = tmp / "CHANGELOG.md"
        self.baselines_dir = tmp / "baselines"


def run(tmp_path, factor=1.0, flipped=()):
    """A judged run of one new patch whose candidate is ``factor`` times as slow."""
    patches = discover(write_patch(tmp_path / "p", "0001-new.py"))
    scen = make_scenarios(PROFILE)
    base = {s.name: [0.01 * (1 + 0.001 * i) for i in range(10)] for s in scen}
    cand = {n: [x * factor for x in xs] for n, xs in base.items()}
    lat = judged({"candidate": cand, "current": base, "reference": base}, scen, PROFILE)
    decision = AccuracyDecision.full_set([1.0] * 10, [1.0] * 10, 0.99)
    block = accuracy_block([1.0] * 10, [1.0] * 10, ACC, ACC, PROFILE, decision)
    verdict_core = judge(PROFILE, lat, block, decision, compared_with="current baseline")
    sets = {"candidate": patches, "current": [], "reference": []}
    record = writes.Record(sets, patches, lat, {"candidate": ACC, "reference": ACC,
                                                "flips": list(flipped)},
                           {"current": None, "best": None, "reference": None}, {"cpu": "x"})
    return verdict_core, record


def assemble(core, opts, notes=()):
    facts = document.Facts("default", new_patches=["0001-new.py"], workload={"model": "m"},
                           patches={"candidate": [{"name": "0001-new.py"}], "current": [],
                                    "reference": []},
                           notes=list(notes) + writes.notes(opts, core["verdict"],
                                                            ["0001-new.py"]))
    return document.assemble(core, facts)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_accepted_with_accept_writes_baselines_log_history_verdict_and_flips(tmp_path):
    core, record = run(tmp_path / "w", flipped=[{"task": "t", "id": "1"}])
    opts = Opts(tmp_path, accept=True, json_path=tmp_path / "out" / "v.json")
    verdict = assemble(core, opts)
    assert verdict["verdict"] == "accepted" and verdict["notes"] == []
    writes.write(opts, BaselineStore(opts.baselines_dir, "default"), verdict, record)
    assert files_under(tmp_path / "baselines") == [
        "default/best.json", "default/current.json", "default/history.jsonl",
        "default/reference.json"]
    current = json.loads((tmp_path / "baselines/default/current.json").read_text())
    assert current["patches"][0]["name"] == "0001-new.py"
    assert current["extra"]["score"] == verdict["score"]
    assert "0001-new.py" in opts.changelog.read_text()
    assert json.loads(opts.json_path.read_text()) == verdict
    assert flips.load(flips.path_for(opts.json_path)) == [{"task": "t", "id": "1"}]


def test_rejected_with_accept_writes_only_the_verdict_and_says_so(tmp_path):
    core, record = run(tmp_path / "w", factor=1.5)
    opts = Opts(tmp_path, accept=True, json_path=tmp_path / "v.json")
    verdict = assemble(core, opts)
    assert verdict["verdict"] == "rejected"
    assert verdict["notes"] == ["not accepted: baselines/ and CHANGELOG.md left as they were"]
    writes.write(opts, BaselineStore(opts.baselines_dir, "default"), verdict, record)
    assert not (tmp_path / "baselines").exists() and not opts.changelog.exists()
    assert (tmp_path / "v.json").exists()


def test_record_logs_a_rejected_change_without_touching_the_baselines(tmp_path):
    core, record = run(tmp_path / "w", factor=1.5)
    opts = Opts(tmp_path, record=True)
    verdict = assemble(core, opts)
    writes.write(opts, BaselineStore(opts.baselines_dir, "default"), verdict, record)
    assert files_under(tmp_path / "baselines") == ["default/history.jsonl"]
    assert "(rejected)" in opts.changelog.read_text()


def test_nothing_new_gets_no_log_entry_and_the_verdict_says_so(tmp_path):
    core, _ = run(tmp_path / "w")
    assert writes.notes(Opts(tmp_path, record=True), "accepted", []) == [
        "no new or changed patches: no change-log entry"]
    assert writes.notes(Opts(tmp_path), core["verdict"], []) == []


@pytest.mark.parametrize(("best_ratio", "new_best"), [(0.98, True), (1.02, False)])
def test_an_accepted_candidate_becomes_the_fastest_state_unless_it_is_slower(
        best_ratio, new_best):
    verdict = {"latency": {"best": {"ratio": best_ratio}, "score": {"ratio": 1.0}}}
    assert writes.is_new_best(verdict) is new_best
    assert writes.is_new_best(dict(verdict, allowed_slower={"reason": "r"}))


def test_a_skipped_run_with_accept_notes_the_other_engines_patches_as_seen(tmp_path):
    patches = discover(Path(__file__).resolve().parent.parent / "model_patches")
    store = BaselineStore(tmp_path / "baselines", "default")
    _, record = run(tmp_path / "w")
    opts = Opts(tmp_path, accept=True)
    core, _ = run(tmp_path / "w2")
    current = writes.envelopes(opts, assemble(core, opts), record)["current"]
    notes = writes.skipped_notes(opts, current, patches)
    assert notes and "0003-fp8-kv-cache.py" in notes[0]
    verdict = document.skipped("default", "nothing was tested", notes)
    writes.write_skipped(opts, store, verdict, current, patches)
    seen = store.load("current")["extra"]["other_engines"]
    assert {p["name"] for p in seen} >= {"0003-fp8-kv-cache.py", "0006-fp8-w8a8.py"}


def test_the_watch_covers_the_model_and_tasks_and_sees_a_large_file_change(tmp_path,
                                                                            monkeypatch):
    """A patch that rewrites the reference's weights is seen, and a large checkpoint is
    fingerprinted by its ends, not read whole."""
    from patchgate import files
    from patchgate.gate import GuardOptions

    prof = get_profile("default")
    opts = GuardOptions(profile=prof, patches_dir=tmp_path / "p",
                        baselines_dir=tmp_path / "b", changelog=tmp_path / "CHANGELOG.md")
    roots = writes.Watch.start(opts).roots
    assert prof.model_path() in roots and prof.task_folder() in roots

    monkeypatch.setattr(files, "LARGE", 4 * 2**20)
    weights = tmp_path / "m" / "model.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(bytes(6 * 2**20))
    before = files.fingerprint([weights.parent])
    with weights.open("r+b") as f:  # the same size, one byte changed near the end
        f.seek(6 * 2**20 - 10)
        f.write(b"\x01")
    assert files.changed(before, [weights.parent]) == [weights]


def test_code_that_the_run_imports_is_watched_by_status(tmp_path, monkeypatch):
    """Every folder on sys.path but the working folder and transformers' copies of model
    code; a file changed, added or removed there is named, however its times were set
    back; what Python writes as it imports (__pycache__) is not."""
    import os
    import sys

    from patchgate import files

    site, hf = tmp_path / "site", tmp_path / "hf"
    (site / "pkg").mkdir(parents=True)
    (hf / "transformers_modules").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(site), str(hf), ""])
    monkeypatch.chdir(tmp_path)
    assert files.code_roots() == [site.resolve()]

    metric = site / "pkg" / "metrics.py"
    metric.write_text("def exact_match(a, b):\n    return a == b\n")
    (site / "gone.py").write_text("")
    before = files.code_state([site])
    assert files.code_changes(before, [site]) == []
    (site / "pkg" / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__" / "metrics.cpython-311.pyc").write_bytes(b"x")
    assert files.code_changes(before, [site]) == []

    st = metric.stat()
    metric.write_text("def exact_match(a, b):\n    return 1.0\n")  # the same size
    os.utime(metric, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime
    (site / "evil.pth").write_text("import os\n")
    (site / "gone.py").unlink()
    assert files.code_changes(before, [site]) == sorted(
        [str(metric), str(site / "evil.pth"), str(site / "gone.py")])


def test_a_watch_refuses_when_the_code_changed(tmp_path):
    from patchgate import files
    from patchgate.errors import PatchgateError

    site = tmp_path / "site"
    site.mkdir()
    (site / "a.py").write_text("x = 1\n")
    watch = writes.Watch([], {}, [site], files.code_state([site]))
    watch.check()
    (site / "a.py").write_text("x = 2\n")
    with pytest.raises(PatchgateError) as e:
        watch.check()
    assert "code that the run's processes import changed during the run" in str(e.value)
    assert str(site / "a.py") in str(e.value) and "no verdict" in str(e.value)
