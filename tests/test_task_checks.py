"""Task names and task files fail first: `patchgate guard` checks them before any engine
loads, in seconds, exit 2, with an error that names the task file.

Each YAML of tests/fixtures/tasks_broken/ is one way a task file can be broken; a test
copies it into a task folder of its own, beside ``good.yaml`` (a task that builds), its
data and its loader."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.guard.lmeval_guard import LmEvalGuard
from patchgate.guard.tasks import check_tasks, read_folder
from patchgate.profile import get_profile

BROKEN = Path(__file__).parent / "fixtures" / "tasks_broken"


def folder(tmp_path: Path, *files: str, extra: dict[str, str] | None = None) -> Path:
    """A task folder with the loader, the data, good.yaml and ``files`` of tasks_broken/
    (and ``extra``: more files by name and text)."""
    out = tmp_path / "tasks"
    out.mkdir()
    for name in ("utils.py", "items.jsonl", "good.yaml", *files):
        shutil.copy(BROKEN / name, out / name)
    for name, text in (extra or {}).items():
        (out / name).write_text(text)
    return out


# (file, the task the profile names, what the message says beside the file)
CASES = [
    ("syntax.yaml", "tb_syntax", "is not valid YAML: line 12, column 1: while parsing a flow "
     "sequence did not find expected ',' or ']'"),
    ("not_a_table.yaml", "tb_list", "cannot be read as a task: ValueError: Expected YAML dict"),
    ("no_dataset.yaml", "tb_no_dataset", "does not build (task tb_no_dataset): it names no "
     "data: set dataset_path"),
    ("missing_data.yaml", "tb_missing_data", "does not build (task tb_missing_data): "
     "FileNotFoundError: Unable to find '/nonexistent/tb_missing_data.jsonl'"),
    ("output_type.yaml", "tb_output_type", "does not build (task tb_output_type): ValueError: "
     "Got invalid output_type 'generate'"),
    ("function.yaml", "tb_function", "does not build (task tb_function): AttributeError: "
     "Module"),
    ("template.yaml", "tb_template", "does not build (task tb_template): UndefinedError: "
     "'question' is undefined"),
    ("split.yaml", "tb_split", "does not build (task tb_split): the data has no split 'tset' "
     "(test_split)"),
    ("group_member.yaml", "tb_group", "does not build (task tb_group): the group names "
     "tb_gone, which no task file defines"),
]


@pytest.mark.parametrize("file, task, what", CASES)
def test_a_broken_task_file_is_named_with_what_is_wrong(tmp_path, file, task, what):
    tasks = folder(tmp_path, file)
    with pytest.raises(PatchgateError) as e:
        check_tasks([task], str(tasks), {})
    assert e.value.message.startswith(f"accuracy guard: task file {tasks / file} "), \
        e.value.message
    assert what in e.value.message, e.value.message
    data = file == "missing_data.yaml"
    assert ("put the data where the task file" if data else "fix the task file") in \
        e.value.hint


def test_a_broken_file_fails_even_when_the_named_task_is_fine(tmp_path):
    """lm-eval would skip it silently; a broken file in the profile's folder is a mistake."""
    tasks = folder(tmp_path, "syntax.yaml")
    with pytest.raises(PatchgateError, match="syntax.yaml is not valid YAML"):
        check_tasks(["tb_good"], str(tasks), {})


def test_two_files_defining_one_task_are_both_named(tmp_path):
    tasks = folder(tmp_path, "duplicate.yaml")
    with pytest.raises(PatchgateError) as e:
        check_tasks(["tb_good"], str(tasks), {})
    assert e.value.message == (f"accuracy guard: task files {tasks / 'duplicate.yaml'} and "
                               f"{tasks / 'good.yaml'} both define 'tb_good'; lm-eval would "
                               "use one and skip the other")


def test_a_group_names_the_member_file_that_does_not_build(tmp_path):
    group = "group: tb_pair\ntask:\n  - tb_good\n  - tb_split\nmetadata:\n  version: 1.0\n"
    tasks = folder(tmp_path, "split.yaml", extra={"pair.yaml": group})
    with pytest.raises(PatchgateError) as e:
        check_tasks(["tb_pair"], str(tasks), {})
    assert e.value.message.startswith(f"accuracy guard: task file {tasks / 'split.yaml'} does "
                                      "not build (task tb_split): the data has no split")


def test_good_folders_pass_and_templates_without_a_name_are_allowed(tmp_path, root):
    tasks = folder(tmp_path, extra={"_template.yaml": "output_type: multiple_choice\n"})
    assert read_folder(tasks) == {"tb_good": tasks / "good.yaml"}
    check_tasks(["tb_good"], str(tasks), {})
    assert set(read_folder(root / "guards" / "tasks")) == {
        "default_suite", "needle", "common_word", "common_word_long", "fact_mc", "addition",
        "var_track"}
    assert "fx_suite" in read_folder(root / "tests" / "fixtures" / "tasks")


def test_the_default_suite_is_checked_in_well_under_a_second(root):
    profile = get_profile("default")
    LmEvalGuard().check(profile)  # imports lm-eval once
    t0 = time.monotonic()
    LmEvalGuard().check(profile)
    assert time.monotonic() - t0 < 1.0


def guard(tmp_path: Path, *args: str) -> int:
    return main(["guard", "--baselines", str(tmp_path / "b"),
                 "--changelog", str(tmp_path / "CHANGELOG.md"), *args])


@pytest.mark.parametrize("file, task", [("syntax.yaml", "tb_syntax"),
                                        ("output_type.yaml", "tb_output_type"),
                                        ("group_member.yaml", "tb_group")])
def test_guard_exits_2_naming_the_file_before_any_engine_loads(tmp_path, capsys, file, task):
    tasks = folder(tmp_path, file)
    t0 = time.monotonic()
    code = guard(tmp_path, "--tasks", task, "--task-path", str(tasks))
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2
    assert f"ERROR accuracy guard: task file {tasks / file}" in err
    assert "loading engine" not in err and "validating patches" not in err, err
    assert took < 15, took
    assert not (tmp_path / "b").exists() and not (tmp_path / "CHANGELOG.md").exists()


def test_guard_exits_2_on_an_unknown_task_name_with_close_matches(tmp_path, capsys):
    """An unknown name looks through lm-eval's ~15,000 built-in task files: seconds."""
    t0 = time.monotonic()
    code = guard(tmp_path, "--tasks", "default_suite,needel")
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2
    assert "ERROR accuracy guard: no lm-eval task or group named needel" in err
    assert "did you mean needle?" in err
    assert "loading engine" not in err and "validating patches" not in err, err
    assert took < 30, took
