import json
import math
import shutil
from pathlib import Path

import pytest

from patchgate import files as storage
from patchgate.errors import PatchgateError
from patchgate.store import baselines
from patchgate.store.baselines import BaselineStore

FIXTURES = Path(__file__).parent / "fixtures" / "baselines"


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def place(tmp_path: Path, fixture: str, role: str = "reference") -> Path:
    target = tmp_path / "default" / f"{role}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / fixture, target)
    return target


def test_load_missing_is_none(tmp_path):
    assert BaselineStore(tmp_path, "default").load("current") is None


def test_valid_fixture_loads(tmp_path):
    place(tmp_path, "valid.json")
    envelope = BaselineStore(tmp_path, "default").load("reference")
    assert envelope["scenarios"]["decode_b1"]["median_s"] == 0.2


def test_round_trip(tmp_path):
    valid = load_fixture("valid.json")
    envelope = baselines.make_envelope(
        "default", "current", valid["environment"], {
            "patches": valid["patches"],
            "scenarios": {"decode_b1": {"phase": "decode", "batch_size": 1, "input_len": 16,
                                        "output_len": 64, "samples_s": [0.3, 0.1, 0.2, 0.4]}},
            "accuracy": valid["accuracy"]}, commit="abc", extra={"note": "x"})
    assert envelope["scenarios"]["decode_b1"]["median_s"] == pytest.approx(0.25)
    store = BaselineStore(tmp_path, "default")
    path = store.save("current", envelope)
    assert path == tmp_path / "default" / "current.json"
    assert store.load("current") == envelope
    assert path.read_text().endswith("}\n")
    assert [p.name for p in path.parent.iterdir()] == ["current.json"]  # no temp left


@pytest.mark.parametrize("fixture, words", [
    ("corrupt.json", "not valid JSON"),
    ("old_version.json", "found 0"),
    ("new_version.json", "found 2"),
    ("wrong_kind.json", "not a patchgate result"),
    ("bad_samples.json", "scenarios.decode_b1.samples_s[1]"),
    ("empty_samples.json", "scenarios.prefill_b1.samples_s"),
])
def test_bad_fixture_is_refused_naming_the_file(tmp_path, fixture, words):
    path = place(tmp_path, fixture)
    with pytest.raises(PatchgateError) as e:
        BaselineStore(tmp_path, "default").load("reference")
    assert str(path) in e.value.message
    assert words in e.value.message
    assert e.value.hint


def test_hints_say_what_to_do(tmp_path):
    store = BaselineStore(tmp_path, "default")
    place(tmp_path, "old_version.json")
    with pytest.raises(PatchgateError, match="found 0") as e:
        store.load("reference")
    assert "patchgate guard --profile default --accept" in e.value.hint
    place(tmp_path, "new_version.json")
    with pytest.raises(PatchgateError) as e:
        store.load("reference")
    assert "upgrade patchgate" in e.value.hint


def test_role_mismatch_is_refused(tmp_path):
    path = place(tmp_path, "valid.json", role="current")  # its role says "reference"
    with pytest.raises(PatchgateError, match="role") as e:
        BaselineStore(tmp_path, "default").load("current")
    assert str(path) in e.value.message


def test_save_refuses_invalid_envelope(tmp_path):
    envelope = load_fixture("bad_samples.json")
    with pytest.raises(PatchgateError, match="samples_s"):
        BaselineStore(tmp_path, "default").save("reference", envelope)
    assert not (tmp_path / "default" / "reference.json").exists()


def test_save_many_writes_all_or_nothing(tmp_path):
    store = BaselineStore(tmp_path, "default")
    reference = load_fixture("valid.json")
    current = dict(reference, role="current")
    store.save_many({"reference": reference, "current": current})
    roles = ("reference", "current")
    before = {role: store.path(role).read_bytes() for role in roles}

    new_reference = dict(reference, commit="f" * 40)
    bad_current = load_fixture("bad_samples.json") | {"role": "current"}
    with pytest.raises(PatchgateError, match="current.json"):
        store.save_many({"reference": new_reference, "current": bad_current})
    assert {role: store.path(role).read_bytes() for role in roles} == before
    assert not store.path("best").exists()
    assert sorted(p.name for p in store.path("current").parent.iterdir()) == [
        "current.json", "reference.json"]

    store.save_many({"reference": new_reference, "current": current})
    assert store.load("reference")["commit"] == "f" * 40


def test_atomic_write_keeps_old_file_when_serialization_fails(tmp_path):
    path = tmp_path / "sub" / "result.json"
    storage.atomic_write_json(path, {"a": 1})
    before = path.read_bytes()
    with pytest.raises(PatchgateError) as e:
        storage.atomic_write_json(path, {"a": math.nan})
    assert str(path) in e.value.message
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


def test_atomic_write_many_rolls_back_when_a_move_fails(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b" / "c.txt"
    first.write_text("old a\n")
    second.mkdir(parents=True)  # a folder where a file should go: its move fails
    with pytest.raises(OSError):
        storage.atomic_write_many({first: "new a\n", second: "new c\n"})
    assert first.read_text() == "old a\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.txt", "b", "c.txt"]


def test_read_json_errors_name_the_file(tmp_path):
    with pytest.raises(PatchgateError, match="does not exist") as e:
        storage.read_json(tmp_path / "x.json", hint="run setup")
    assert e.value.hint == "run setup"
    (tmp_path / "x.json").write_text('{"a": 1,\n  oops}')
    with pytest.raises(PatchgateError, match="line 2, column 3"):
        storage.read_json(tmp_path / "x.json")
    (tmp_path / "x.json").write_text("[1]")
    with pytest.raises(PatchgateError, match="expected an object"):
        storage.read_json(tmp_path / "x.json")


def test_check_comparable_refuses_or_forces():
    stored = load_fixture("valid.json")
    same = dict(stored["environment"])
    assert baselines.check_comparable(stored, same) == []
    other = same | {"torch": "2.12.0", "cpu_count": 8}
    path = Path("baselines/default/current.json")
    with pytest.raises(PatchgateError) as e:
        baselines.check_comparable(stored, other, path=path)
    assert str(path) in e.value.message
    assert "torch: stored '2.13.0+cpu', here '2.12.0'" in e.value.message
    assert f"cpu_count: stored {same['cpu_count']!r}, here 8" in e.value.message
    assert "--force-environment" in e.value.hint
    warnings = baselines.check_comparable(stored, other, force=True)
    assert [w.split(":")[0] for w in warnings] == ["cpu_count", "torch"]


def test_bad_profile_and_role(tmp_path):
    with pytest.raises(PatchgateError):
        BaselineStore(tmp_path, "../x")
    with pytest.raises(PatchgateError, match="role"):
        BaselineStore(tmp_path, "default").path("fastest")


def test_git_commit(tmp_path):
    assert baselines.git_commit(tmp_path) is None
