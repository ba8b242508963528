"""The gate's accuracy equals lm-eval's own ``hf`` model on the same model and data.

The fixture suite (tests/fixtures/tasks: a gsm8k-shaped task that stops only at a
newline and has two regex filters, an arc-shaped task with acc and acc_norm, and two
tasks whose stop sequences sit in each other's answers) runs once through
``lm_eval.simple_evaluate(model="hf")`` on the embedded default model, and through
``patchgate guard`` (a profile file, --tasks, --task-path, no patches): every task,
filter and metric must agree. A second gate run with an accuracy-breaking patch must
list its flipped items in the report and in the flips file next to the verdict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from patchgate.cli import main
from patchgate.store import flips

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"
TASKS = FIX / "tasks"
PROFILE = """description = "default model, fixture tasks"
model = "models/default"
engine = "transformers"
rounds = 7

[lengths]
prefill_input = 64
prefill_output = 1
decode_input = 8
decode_output = 12
"""


def scores(results: dict) -> dict[tuple[str, str, str], float]:
    """{(task, metric, filter): value} of lm-eval's results table."""
    out = {}
    for task, row in results.items():
        for key, value in row.items():
            if "," in key and "_stderr" not in key and isinstance(value, int | float):
                metric, flt = key.split(",", 1)
                out[(task, metric, flt)] = float(value)
    return out


def gate_scores(verdict: dict, which: str) -> dict[tuple[str, str, str], float]:
    out = {}
    for task, t in verdict["accuracy"]["per_task"].items():
        out[(task, t["metric"], t["filter"])] = t[which]
        for o in t["others"]:
            out[(task, o["metric"], o["filter"])] = o[which]
    return out


@pytest.fixture(scope="module")
def hf() -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    res = simple_evaluate(
        model="hf", model_args=f"pretrained={ROOT / 'models' / 'default'},"
        "trust_remote_code=True,dtype=float32", tasks=["fx_suite"], batch_size=16, device="cpu",
        task_manager=TaskManager(include_path=str(TASKS), include_defaults=False))
    return scores({t: r for t, r in res["results"].items() if t != "fx_suite"})


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("gate-hf")
    (tmp / "profile.toml").write_text(PROFILE)
    (tmp / "empty").mkdir()
    return tmp


def guard(work: Path, patches: Path, name: str, *extra: str) -> tuple[int, dict]:
    code = main(["guard", "--profile", str(work / "profile.toml"), "--tasks", "fx_suite",
                 "--task-path", str(TASKS), "--patches", str(patches),
                 "--baselines", str(work / "baselines"), "--changelog",
                 str(work / "CHANGELOG.md"), "--json", str(work / f"{name}.json"),
                 "--markdown", str(work / f"{name}.md"), "--quiet", *extra])
    return code, json.loads((work / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def unpatched(work) -> tuple[int, dict]:
    return guard(work, work / "empty", "unpatched", "--accept")


def test_the_gates_reference_scores_equal_lm_evals_hf_model(hf, unpatched):
    code, verdict = unpatched
    assert code == 0, verdict["reasons"]
    got = gate_scores(verdict, "reference")
    assert set(got) == set(hf)  # every task, filter and metric
    for key, value in hf.items():
        assert math.isclose(got[key], value, abs_tol=1e-9), (key, got[key], value)
    # the cases the issue is about: two filters of one task, a stop sequence of
    # another task inside an answer
    assert ("fx_gsm", "exact_match", "strict-match") in got
    assert ("fx_gsm", "exact_match", "flexible-extract") in got
    assert got[("fx_chain", "exact_match", "none")] == hf[("fx_chain", "exact_match", "none")]
    a = verdict["accuracy"]
    assert a["ratio"] == 1.0 and a["flips_total"] == 0 and a["n"] == 4 * 16
    assert "flips_file" not in a  # nothing flipped: no flips file


def test_stored_baselines_keep_filters_and_outputs_and_are_reused(work, unpatched):
    ref = json.loads((work / "baselines" / "profile" / "reference.json").read_text())
    gsm = ref["accuracy"]["tasks"]["fx_gsm"]
    assert gsm["filter"] == "strict-match" and len(gsm["samples"]) == 16
    assert "output" in gsm["samples"][0] and "prompt" not in gsm["samples"][0]


def test_a_broken_patch_lists_its_flipped_items(work, unpatched):
    code, verdict = guard(work, FIX / "gate" / "break_accuracy", "broken")
    assert code == 1
    a = verdict["accuracy"]
    assert a["reference_source"].startswith("loaded from")  # same tasks, filters, items
    assert a["flips_total"] == a["flipped_to_wrong"] + a["flipped_to_right"] > 0
    assert a["flips_file"] == "broken.flips.jsonl"
    items = flips.load(work / "broken.flips.jsonl")  # a versioned header, then the items
    assert len(items) == a["flips_total"]
    first = items[0]
    assert {"task", "filter", "id", "reference_output", "candidate_output", "target",
            "prompt"} <= set(first)
    assert first["prompt"] and first["reference_output"] != first["candidate_output"]
    md = (work / "broken.md").read_text()
    assert f"flipped items: {a['flips_total']}" in md and "broken.flips.jsonl" in md
