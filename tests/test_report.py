"""`patchgate report`: a committed verdict rendered as the PR comment and as terminal text.

The expected output lives in tests/golden/. After an intended change to the report,
regenerate and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_report.py
"""

import json
import os
from pathlib import Path

import pytest

from patchgate.cli import main
from patchgate.errors import EXIT_ACCEPTED, EXIT_ERROR
from patchgate.report.markdown import render_markdown
from patchgate.verdict import document

GOLDEN = Path(__file__).parent / "golden"
VERDICT = GOLDEN / "verdict.json"


def _check_golden(actual: str, name: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), (
        f"{path} differs; if the change is intended: UPDATE_GOLDEN=1 pytest {__file__}")


@pytest.mark.parametrize(("verdict", "fmt", "golden"), [
    ("verdict.json", "markdown", "report.md"), ("verdict.json", "text", "report.txt"),
    # a schema-1 verdict (before outcomes and the pooled score) still renders
    ("verdict_v1.json", "markdown", "report_v1.md"), ("verdict_v1.json", "text", "report_v1.txt"),
])
def test_report_matches_golden(tmp_path, verdict, fmt, golden):
    out = tmp_path / golden
    assert main(["report", str(GOLDEN / verdict), "--format", fmt, "--output", str(out)]) \
        == EXIT_ACCEPTED
    _check_golden(out.read_text(encoding="utf-8"), golden)


def test_markdown_carries_the_comment_marker_and_the_decision():
    text = (GOLDEN / "report.md").read_text(encoding="utf-8")
    assert text.startswith("<!-- patchgate-report -->\n")
    assert "## ❌ patchgate: rejected (default, AMD EPYC)" in text  # the profile, the machine
    assert "**score 72.4**" in text
    assert "| decode_b1   | 1x8->12   | 17.67 ms    | 14.84 ms   | 55.51 ms  | 3.679   | " \
        "2.993-4.063 | + slower     |" in text
    assert "- score vs the current baseline: -37.7 %" in text


def test_report_to_stdout(capsys):
    assert main(["report", str(VERDICT), "--format", "text"]) == EXIT_ACCEPTED
    out = capsys.readouterr().out
    assert out == (GOLDEN / "report.txt").read_text(encoding="utf-8") + "\n"
    summary = "REJECTED  score 72.4  (S1 63.3, S8 69.0, Sinf 88.1, C 1.00) on AMD EPYC"
    assert summary in out.splitlines()
    assert out.rstrip().splitlines()[-5] == summary


def test_error_verdict_renders_without_numbers():
    verdict = {"schema_version": 1, "profile": "h200-default", "verdict": "error",
               "reasons": ["model_patches/0003-x.py: apply() raised ValueError: boom"],
               "score": None, "S": None, "C": None, "accuracy": None, "scenarios": []}
    assert render_markdown(verdict) == (
        "<!-- patchgate-report -->\n"
        "## ⚠️ patchgate: error (h200-default)\n"
        "\n"
        "- model_patches/0003-x.py: apply() raised ValueError: boom\n")


def test_a_file_that_is_not_a_verdict_is_an_error(tmp_path, capsys):
    path = tmp_path / "current.json"
    path.write_text(json.dumps({"schema_version": 1, "kind": "patchgate.result"}))
    assert main(["report", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR {path}: not a verdict file (no 'verdict')\n")
    assert "hint: pass a file written by `patchgate guard --json`" in err


def test_invalid_json_is_an_error(tmp_path, capsys):
    path = tmp_path / "verdict.json"
    path.write_text("{\"verdict\": ")
    assert main(["report", str(path)]) == EXIT_ERROR
    assert f"ERROR {path} is not valid JSON" in capsys.readouterr().err


def test_an_inconclusive_verdict_is_its_own_state_in_every_report():
    import copy
    import json
    from pathlib import Path

    from patchgate.report.render import render_results_table, render_terminal

    v = json.loads((Path(__file__).parent / "golden" / "verdict.json").read_text())
    v = copy.deepcopy(v) | {"verdict": "inconclusive", "reasons": [
        "latency not shown within the 5 % threshold of the current baseline: ..."]}
    md = render_markdown(v)
    assert md.splitlines()[1].startswith("## ❔ patchgate: inconclusive")
    assert "- latency not shown within the 5 % threshold" in md
    assert "INCONCLUSIVE  score" in render_terminal(v)
    assert "| inconclusive |" in render_results_table([("v.json", v)])


def test_the_summary_line_says_how_long_the_run_took_per_phase():
    from patchgate.report.render import render_terminal
    from patchgate.report.timing import time_line

    verdict = json.loads(VERDICT.read_text(encoding="utf-8"))
    assert time_line(verdict) is None  # a verdict from before the total was recorded
    verdict["timings_s"] = {"validate": 0.01, "probe": 3.2, "engines": 94.4, "latency": 171.0,
                            "confirm_engines": 90.2, "confirm": 170.6,
                            "accuracy_candidate": 6.1, "accuracy_reference": 1.2,
                            "total": 560.0}
    assert time_line(verdict) == ("in 560 s (engines 94, latency 171, confirm engines 90, "
                                  "confirmation 171, accuracy 7, other 27)")
    assert "REJECTED  score 72.4  (S1 63.3, S8 69.0, Sinf 88.1, C 1.00)  in 560 s (" in \
        render_terminal(verdict)
    assert "Verdict in 560 s (engines 94," in render_markdown(verdict)
    assert time_line({"timings_s": {"latency": 0.2, "total": 0.6}}) == "in 1 s"  # no "()"


def test_the_first_lines_carry_the_decision_the_score_and_every_caveat():
    """The committed serving verdict ran with the reference accuracy forced in from an
    H200 on an H100: a reviewer reads that in the first five lines, not at the bottom."""
    root = Path(__file__).resolve().parent.parent
    verdict = document.load(root / "docs" / "gpu-runs" / "2026-12-06" /
                            "h200-minicpm8b-serving-chain.json")
    first = render_markdown(verdict).splitlines()[:5]
    assert first[1] == "## ✅ patchgate: accepted (h200-minicpm8b, NVIDIA H100 80GB HBM3)"
    assert first[2].startswith("**score 151.0**")
    assert first[3].startswith("> ⚠️ The reference accuracy was measured in another "
                               "environment and forced in (--force-environment; differs in ")
    assert "gpu_name" in first[3]
    # a profile file from elsewhere that reuses a built-in name, and overrides, say so too
    verdict["profile_source"] = {"file": "docs/gpu-runs/profiles/h200-minicpm8b-serving.toml",
                                 "sha256": "ab" * 32, "builtin": False,
                                 "overrides": ["--rounds 4", "--force-environment"]}
    text = render_markdown(verdict)
    assert "> ⚠️ Profile h200-minicpm8b came from docs/gpu-runs/profiles/" in text
    assert "> ⚠️ The profile was overridden on the command line: --rounds 4." in text
    # what the rest of the report says already is not said again in the notes
    assert "- new: 0001-fused-add-rmsnorm.py" not in text
    assert "`0001-fused-add-rmsnorm.py` (new)" in text
    # identical baseline and reference columns are one column
    assert "| reference = baseline" in text and "| baseline " not in text


def test_a_spread_run_says_where_its_latency_and_accuracy_ran():
    """``--ray``: the nodes, their class and the blocks; a lost node and where its block
    ran again; each accuracy pool's actors and nodes (verdict.latency.spread,
    verdict.accuracy.spread)."""
    from patchgate.report.render import render_terminal

    v = json.loads(VERDICT.read_text(encoding="utf-8"))
    assert "Ray" not in render_terminal(v) + render_markdown(v)  # a run on one machine
    a, b = "a" * 56, "b" * 56
    v["latency"]["spread"] = {
        "nodes": [a], "classes": ["EPYC-2cpu-1f"], "rounds_on_one_node": 1.0,
        "lost_nodes": [b],
        "blocks": [{"node": a, "first_round": 0, "warmup": 1, "rounds": 4},
                   {"node": a, "first_round": 5, "warmup": 1, "rounds": 4, "rerun_of": b}]}
    v["accuracy"]["spread"] = {"candidate": {"actors": 2, "nodes": [a, b],
                                             "classes": ["EPYC-2cpu-1f"],
                                             "batches_per_node": {}, "lost_nodes": [b]}}
    text = render_terminal(v)
    assert ("latency on 1 Ray node(s) of class EPYC-2cpu-1f: 2 block(s), every round on "
            f"one node; node {b[:12]} lost, its block (rounds from 5) ran again on "
            f"{a[:12]}") in text
    assert (f"accuracy of candidate in 2 Ray actor(s) on 2 node(s) of class EPYC-2cpu-1f; "
            f"lost: {b[:12]}") in text
    assert "latency on 1 Ray node(s)" in render_markdown(v)
