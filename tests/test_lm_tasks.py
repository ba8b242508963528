"""Finding lm-eval tasks: the task folder first, lm-eval's built-in tasks by name, and
an error naming the dataset when a built-in task's data is not on this machine (the
gate runs offline). Indexing lm-eval's built-in tasks takes seconds: marked slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgate.errors import PatchgateError
from patchgate.guard import lmeval as acc
from patchgate.guard.tasks import datasets_of, manager_for

TASKS = Path(__file__).parent / "fixtures" / "tasks"


def test_the_task_folder_alone_when_it_has_every_name():
    manager = manager_for(["fx_suite", "fx_gsm"], str(TASKS), {})
    assert "fx_arc" in manager.all_tasks and "gsm8k" not in manager.all_tasks
    with pytest.raises(PatchgateError, match="task folder .*nowhere does not exist"):
        manager_for(["fx_gsm"], str(TASKS / "nowhere"), {})


@pytest.mark.slow
def test_builtin_tasks_by_name_and_a_missing_dataset_names_itself(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    manager = manager_for(["fx_gsm", "gsm8k"], str(TASKS), {})
    assert {"gsm8k", "arc_easy", "fx_gsm"} <= set(manager.all_tasks)
    assert datasets_of(manager, ["gsm8k"]) == [("gsm8k", "openai/gsm8k", "main")]
    assert ("arc_easy", "allenai/ai2_arc", "ARC-Easy") in datasets_of(manager, ["ai2_arc"])
    with pytest.raises(PatchgateError, match="no lm-eval task or group named gsm8kk") as e:
        manager_for(["gsm8kk"], str(TASKS), {})
    assert "gsm8k" in e.value.hint
    # offline, and not in this machine's cache: the error names the dataset and the fix
    cache = Path.home() / ".cache" / "huggingface" / "datasets" / "openai___gsm8k"
    if cache.exists():
        pytest.skip("gsm8k is in this machine's cache")
    with pytest.raises(PatchgateError) as e:
        acc.run_guard_tasks(None, None, acc.Tasks(("gsm8k",), str(TASKS)))
    assert "task gsm8k needs the dataset openai/gsm8k, config 'main'" in e.value.message
    assert "HF_HUB_OFFLINE=1" in e.value.message
    assert "load_dataset('openai/gsm8k', 'main')" in e.value.hint


def test_lm_eval_runs_swap_its_module_attributes_one_at_a_time():
    """``_lean`` swaps two lm-eval attributes for a run and restores them: a second
    thread waits for the first run to end, and both leave lm-eval as it was."""
    import threading

    import lm_eval.evaluator as evaluator

    from patchgate.guard import lmeval

    original = evaluator.add_env_info
    inside, release, order = threading.Event(), threading.Event(), []

    def first():
        with lmeval._lean():
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    def second():
        inside.wait(5)
        with lmeval._lean():
            order.append("second in")

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start(), b.start()
    inside.wait(5)
    b.join(0.2)
    assert b.is_alive() and order == ["first in"]  # waits while the first run holds it
    release.set()
    a.join(5), b.join(5)
    assert order == ["first in", "first out", "second in"]
    assert evaluator.add_env_info is original
