"""The gate's planning decisions (no engine): which patches are current, which new,
and when a stored reference accuracy may stand in for a measurement."""

from __future__ import annotations

from pathlib import Path

from patchgate.guard.reference import reusable
from patchgate.patches import discover
from patchgate.patches.plan import plan

GOOD = Path(__file__).parent / "fixtures" / "patches" / "good"


def test_plan_splits_current_new_and_skipped():
    patches = discover(GOOD)
    sglang_only = [p for p in patches if p.engines == ("sglang",)]
    both = [p for p in patches if p not in sglang_only]
    current = {"patches": [both[0].record()]}
    sets, notes = plan(patches, "transformers", current)
    assert sets["candidate"] == both and sets["current"] == both[:1]
    assert sets["reference"] == []
    assert any("does not apply to engine transformers" in n for n in notes)
    # the same name with another hash is a changed patch: not current
    changed = {"patches": [dict(both[0].record(), sha256="0" * 64)]}
    sets, notes = plan(patches, "transformers", changed)
    assert sets["current"] == []
    assert any("not in the patch folder (or its content changed" in n for n in notes)


class Run:
    """The reuse check's inputs: --force-environment, and the notes it writes."""

    def __init__(self, force: bool):
        self.force, self.notes = force, []


def run_for(force: bool) -> Run:
    return Run(force)


def _reusable(run: Run, stored, env, work) -> bool:
    return reusable(stored, env, work, run.force, run.notes)


WORK = {"model": "a" * 64, "tasks": "b" * 64}


def test_stored_reference_accuracy_only_from_the_same_environment():
    env = {"cpu_model": "A", "torch": "2.13.0"}
    stored = {"environment": dict(env), "accuracy": {"tasks": {}, "mean": 0.5},
              "extra": {"workload": dict(WORK)}}
    assert _reusable(run_for(False), stored, env, WORK)
    other = dict(env, cpu_model="B")
    assert not _reusable(run_for(False), stored, other, WORK)
    forced = run_for(True)
    assert _reusable(forced, stored, other, WORK)
    assert "cpu_model" in forced.notes[0]
    assert not _reusable(run_for(False), dict(stored, accuracy=None), env, WORK)


def test_stored_reference_accuracy_only_for_the_same_model_and_tasks():
    env = {"cpu_model": "A"}
    stored = {"environment": dict(env), "accuracy": {"tasks": {}, "mean": 0.5},
              "extra": {"workload": dict(WORK)}}
    for here in (dict(WORK, model="c" * 64), dict(WORK, tasks="d" * 64)):
        run = run_for(True)  # --force-environment does not cover another model
        assert not _reusable(run, stored, env, here)
        assert "other model files or task data" in run.notes[0]
    run = run_for(False)  # a baseline from before the fingerprint was stored
    assert not _reusable(run, dict(stored, extra={}), env, WORK)
    assert "model: stored none recorded" in run.notes[0]


def test_new_patches_for_another_engine_only_are_skipped_not_accepted(tmp_path, capsys):
    """Not tested is not accepted: an SGLang-only patch alone on the CPU profile."""
    import json

    from patchgate.cli import main

    folder = tmp_path / "patches"
    folder.mkdir()
    (folder / "0001-fp8-kv.py").write_text(
        '"""FP8 KV cache."""\nENGINES = ("sglang",)\n'
        'SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}\n')
    out = tmp_path / "v.json"
    code = main(["guard", "--patches", str(folder), "--baselines", str(tmp_path / "b"),
                 "--changelog", str(tmp_path / "CHANGELOG.md"), "--json", str(out),
                 "--accept", "--markdown", str(tmp_path / "r.md")])
    assert code == 0
    v = json.loads(out.read_text())
    assert v["verdict"] == "skipped" and "0001-fp8-kv.py" in v["reasons"][0]
    assert "SKIPPED  (nothing was tested)" in capsys.readouterr().out
    assert (tmp_path / "r.md").read_text().startswith(
        "<!-- patchgate-report -->\n## ⏭️ patchgate: skipped (default)")
    assert not (tmp_path / "b").exists() and not (tmp_path / "CHANGELOG.md").exists()


def test_accepting_a_skip_notes_the_other_engine_patches_as_seen(tmp_path):
    """--accept on a skipped run leaves the measurements alone but notes the patches for
    other engines in the current baseline, so that they are not 'new' on the next run
    (the CPU profile can never accept an SGLang-only patch by measuring it)."""
    import json
    import shutil

    from patchgate.cli import main
    from patchgate.patches.plan import untested as _untested

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "patches"
    folder.mkdir()
    (folder / "0001-fp8-kv.py").write_text(
        '"""FP8 KV cache."""\nENGINES = ("sglang",)\n'
        'SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3"}\n')
    (tmp_path / "b" / "default").mkdir(parents=True)
    stored = root / "baselines" / "default" / "current.json"
    shutil.copy(stored, tmp_path / "b" / "default" / "current.json")
    patches = discover(folder)
    assert _untested(patches, "transformers", json.loads(stored.read_text()))
    code = main(["guard", "--patches", str(folder), "--baselines", str(tmp_path / "b"),
                 "--changelog", str(tmp_path / "CHANGELOG.md"), "--accept"])
    assert code == 0
    after = json.loads((tmp_path / "b" / "default" / "current.json").read_text())
    before = json.loads(stored.read_text())
    assert after["scenarios"] == before["scenarios"] and after["patches"] == before["patches"]
    assert [p["name"] for p in after["extra"]["other_engines"]] == ["0001-fp8-kv.py"]
    assert _untested(patches, "transformers", after) is None
    (folder / "0001-fp8-kv.py").write_text(  # changed content: new again
        '"""FP8 KV cache."""\nENGINES = ("sglang",)\nSERVER_ARGS = {"kv_cache_dtype": "fp8"}\n')
    assert _untested(discover(folder), "transformers", after)
    assert not (tmp_path / "CHANGELOG.md").exists()
