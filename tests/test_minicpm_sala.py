"""The MiniCPM-SALA profile and its accuracy tasks (guards/minicpm_sala), graded on
hand-written rows in the contest's format (task, question, gold). No model: a scripted
lm-eval LM gives the replies, real lm-eval runs the task YAMLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guards.minicpm_sala import utils as sala
from patchgate.errors import PatchgateError
from patchgate.guard import lmeval as acc
from patchgate.profile import get_profile
from patchgate.profile import load as profiles

ROOT = Path(__file__).resolve().parent.parent
ROWS = Path(__file__).parent / "fixtures" / "sala" / "perf_rows.jsonl"


@pytest.mark.parametrize("task, reply, gold, expected", [
    ("mcq", "The largest is Jupiter.\nANSWER: B", "B", 1.0),
    ("mcq", "so the answer is \\boxed{C}", "C", 1.0),
    ("mcq", "ANSWER: (c)", "C", 1.0),
    ("mcq", "ANSWER: A ... on reflection ANSWER: D", "A", 0.0),  # the last one counts
    ("mcq", "<think>ANSWER: B? no</think>\nANSWER: C", "B", 0.0),  # reasoning is cut
    ("mcq", "It is B.", "B", 0.0),  # no ANSWER: and no \boxed{}: nothing chosen
    ("niah", "The magic number is 4471.", ["4471"], 1.0),
    ("niah", "I could not find it.", ["4471"], 0.0),
    ("qa", "It was written by lovelace.", ["Ada Lovelace", "Lovelace"], 1.0),  # any, any case
    ("lcx", "Geneva", ["Geneva"], 1.0),
    ("lcx", "<think>Geneva or Bern?</think> Bern", ["Geneva"], 0.0),
    ("cwe", "apple, stone, sky", ["apple", "river", "stone", "cloud"], 0.5),
    ("fwe", "XQZ lorem ipsum", ["xqz", "lorem", "ipsum"], 1.0),
    ("fwe", "nothing", ["xqz", "lorem", "ipsum"], 0.0),
])
def test_grading_as_the_contest_grades(task, reply, gold, expected):
    assert sala.score(task, reply, gold) == expected


def test_unknown_task_and_choice_extraction():
    with pytest.raises(ValueError, match="unknown MiniCPM-SALA task 'mmlu'"):
        sala.score("mmlu", "x", "A")
    assert sala.choice("ANSWER: b") == "B" and sala.choice("\\boxed{ D }") == "D"
    assert sala.choice("no letter here") is None


REPLIES = {  # question -> the scripted model's reply
    "Which planet is largest? A. Mars B. Jupiter C. Venus D. Earth":
        "<think>Jupiter is the biggest.</think>ANSWER: B",
    "2 + 2 = ? A. 3 B. 5 C. 4 D. 22": "\\boxed{D}",
    "The sky is? A. blue B. green C. red D. black": "ANSWER: A",
    "... the magic number for river is 4471 ... What is the magic number for river?": "4471",
    "... the passkey is 99812 ... What is the passkey?": "12345",
    "List the 4 most common words in the list ...": "apple river stone",
    "Find the 3 most frequent coded words ...": "xqz lorem ipsum",
    "Document 1 ... Who wrote the letter?": "Lovelace wrote it",
    "... long context ... Which city hosted the meeting?": "Geneva",
    "... long context ... Which river crosses the town?": "the Danube",
}
EXPECTED = {"sala_mcq": 2 / 3, "sala_niah": 0.5, "sala_cwe": 0.75, "sala_fwe": 1.0,
            "sala_qa": 1.0, "sala_lcx": 0.5}


def evaluate(data_path: str) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    class Scripted(LM):
        def loglikelihood(self, requests, disable_tqdm=False):
            raise AssertionError("the SALA tasks only generate")

        loglikelihood_rolling = loglikelihood

        def generate_until(self, requests, disable_tqdm=False):
            assert all(r.args[1]["max_gen_toks"] == 32768 for r in requests)
            return [REPLIES[r.args[0]] for r in requests]

    manager = TaskManager(include_path=str(ROOT / "guards" / "minicpm_sala"),
                          include_defaults=False, metadata={"data_path": data_path})
    return simple_evaluate(model=Scripted(), tasks=["minicpm_sala"], task_manager=manager,
                           log_samples=True)


def test_the_task_yamls_grade_the_accuracy_set_through_lm_eval():
    result = acc.collect(evaluate(str(ROWS)))
    assert {t: r["value"] for t, r in result["tasks"].items()} == pytest.approx(EXPECTED)
    mcq = result["tasks"]["sala_mcq"]
    assert mcq["metric"] == "score" and [s["id"] for s in mcq["samples"]] == \
        ["mcq-0000", "mcq-0001", "mcq-0002"]
    assert [s["score"] for s in mcq["samples"]] == [1.0, 0.0, 1.0]
    cwe = result["tasks"]["sala_cwe"]["samples"][0]
    assert cwe["output"] == "apple river stone" and "cloud" in cwe["target"]


def test_the_data_path_is_required_and_must_exist(tmp_path):
    with pytest.raises(ValueError, match=r"set \[task_args\] data_path"):
        sala.load("mcq")
    with pytest.raises(FileNotFoundError, match="perf_public_set.jsonl from OpenBMB"):
        sala.load("mcq", data_path=str(tmp_path / "nope.jsonl"))
    other = tmp_path / "rows.jsonl"
    other.write_text(json.dumps({"task": "qa", "question": "q", "gold": ["a"]}) + "\n")
    with pytest.raises(ValueError, match="has no rows of task 'mcq'"):
        sala.load("mcq", data_path=str(other))


def test_the_profile_loads_and_needs_a_newer_sglang():
    p = get_profile("minicpm-sala")
    assert p.engine == "sglang" and p.engine_version == "0.5.19" and p.chat_template
    assert p.engine_args["chunked_prefill_size"] == 8192
    assert p.engine_args["disable_radix_cache"] is True
    assert p.tasks == ("minicpm_sala",) and p.task_path == "guards/minicpm_sala"
    assert p.task_args["data_path"].endswith("perf_public_set.jsonl")
    assert not Path(p.task_args["data_path"]).is_absolute()
    with pytest.raises(PatchgateError, match="needs sglang >= 0.5.19; this machine has 0.5.16"):
        profiles.check_engine_version(p, "minicpm-sala", installed="0.5.16")
    profiles.check_engine_version(p, "minicpm-sala", installed="0.5.19")
    profiles.check_model(p, "minicpm-sala")  # a hub id: the engine may download it
