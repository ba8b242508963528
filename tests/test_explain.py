"""``--explain``: profile tables, their diff in words, and the planted slow decode named.

The tables and the diff are pure (literal numbers here); :func:`profile_call` is run
on small functions (no model); the last test runs the gate with ``--explain`` on the
planted slow-decode fixture (the default model on CPU, marked slow).
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from patchgate.engines import profiling
from patchgate.engines.profiling import profile_call, trace_tables
from patchgate.gate import GuardOptions, run_guard
from patchgate.latency import explain
from patchgate.profile import Lengths, get_profile
from patchgate.report import markdown
from patchgate.report import render as report

FIX = Path(__file__).parent / "fixtures"


def row(name, count, total, kind="kernel", where="", caller=None):
    return {"name": name, "where": where, "kind": kind, "count": count, "total_s": total,
            "caller": caller}


def test_diff_orders_by_time_added_or_removed_and_says_it_in_words():
    before = [row("gemm", 64, 0.0400), row("rmsnorm_kernel", 32, 0.0021),
              row("rope_fp32_cast", 32, 0.0050)]
    after = [row("gemm", 64, 0.0402), row("rmsnorm_kernel", 64, 0.0042),
             row("fused_add_rmsnorm", 32, 0.0010)]
    changes = explain.diff(before, after, "gpu")
    assert [c["name"] for c in changes] == ["rope_fp32_cast", "rmsnorm_kernel",
                                            "fused_add_rmsnorm", "gemm"]
    gone, more = changes[0], changes[1]
    assert (gone["count_before"], gone["count_after"], gone["delta_s"]) == (32, 0, -0.005)
    assert more["delta_s"] == pytest.approx(0.0021)
    assert explain.sentence(more) == \
        "+2.1 ms: 32 more `rmsnorm_kernel` launches (32 -> 64) [gpu]"
    assert explain.sentence(gone) == \
        "-5.0 ms: 32 fewer `rope_fp32_cast` launches (32 -> 0) [gpu]"
    assert explain.sentence(changes[3]) == "+0.2 ms: `gemm`, 64 launches on both sides [gpu]"


def test_python_rows_name_builtins_and_their_caller():
    stats = {
        ("~", 0, "<built-in method time.sleep>"):
            (11, 11, 0.0330, 0.0330,
             {("/x/model_patches/0001-slow-decode.py", 13, "slow_forward"):
              (11, 11, 0.0330, 0.0330)}),
        ("/x/model_patches/0001-slow-decode.py", 13, "slow_forward"):
            (12, 12, 0.0004, 0.0910, {("/x/engines/transformers.py", 60, "_step"):
                                      (12, 12, 0.0004, 0.0910)}),
    }
    sleep, fwd = profiling.python_rows(stats)
    assert sleep == {"name": "time.sleep", "where": "", "kind": "function", "count": 11,
                     "total_s": 0.033, "cum_s": 0.033,
                     "caller": "slow_forward (0001-slow-decode.py:13)"}
    assert fwd["where"] == "0001-slow-decode.py:13" and fwd["caller"] == \
        "_step (transformers.py:60)"
    (change,) = explain.diff([], [sleep], "python")[:1]
    assert explain.sentence(change) == (
        "+33.0 ms: 11 more `time.sleep` calls (0 -> 11), called from "
        "`slow_forward (0001-slow-decode.py:13)` [python]")


def test_trace_rows_sum_kernels_and_fall_back_to_operators(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "rmsnorm_kernel", "dur": 3.0},
        {"ph": "X", "cat": "kernel", "name": "rmsnorm_kernel", "dur": 5.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 40.0},
        {"ph": "M", "name": "process_name"},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "dur": 2.0}]}
    rows = {r["name"]: r for r in profiling.trace_rows(trace)}
    assert rows["rmsnorm_kernel"]["count"] == 2
    assert rows["rmsnorm_kernel"]["total_s"] == pytest.approx(8e-6)
    assert set(rows) == {"rmsnorm_kernel", "Memcpy HtoD"}  # the GPU's time only
    cpu = profiling.trace_rows({"traceEvents": trace["traceEvents"][2:4]})
    assert cpu == [{"name": "aten::mm", "where": "", "kind": "op", "count": 1,
                    "total_s": 4e-5}]
    # SGLang's files are gzipped, one per rank: one table over all of them
    for rank in (0, 1):
        with gzip.open(tmp_path / f"x-TP-{rank}.trace.json.gz", "wt") as fh:
            json.dump(trace, fh)
    tables = trace_tables(sorted(tmp_path.glob("*.gz")))
    assert {r["name"]: r["count"] for r in tables["gpu"]}["rmsnorm_kernel"] == 4


def _work(sleep_s: float):
    import torch

    x = torch.ones(32, 32)
    for _ in range(3):
        x = torch.mm(x, x) / 32
        time.sleep(sleep_s)


def _slow_helper():
    _work(0.02)


def test_profile_call_sees_pure_python_time_that_torch_profiler_does_not(tmp_path):
    _work(0.0)  # torch's first call costs more; the gate's engines are warm too
    fast = profile_call(lambda: _work(0.0), tmp_path / "current")
    slow = profile_call(_slow_helper, tmp_path / "candidate")
    assert (tmp_path / "candidate" / "torch.trace.json").is_file()
    assert (tmp_path / "candidate" / "python.prof").is_file()
    assert {r["name"] for r in slow["tables"]["torch"]} >= {"aten::mm"}
    assert not any("sleep" in r["name"] for r in slow["tables"]["torch"])
    sleep = next(r for r in slow["tables"]["python"] if r["name"] == "time.sleep")
    assert sleep["count"] == 3 and sleep["total_s"] >= 0.06
    assert sleep["caller"].startswith("_work (test_explain.py:")
    block = explain.compare(fast, slow)
    line = next(t for t in block["top"] if "`time.sleep`" in t)
    assert line.startswith("+") and "`time.sleep`, 3 calls on both sides" in line
    assert "called from `_work (test_explain.py:" in line and line.endswith("[python]")
    assert block["wall_s"]["candidate"]["python"] > block["wall_s"]["current"]["python"]


def test_the_report_gives_the_top_changes_of_each_explained_scenario():
    golden = Path(__file__).parent / "golden" / "verdict.json"
    v = json.loads(golden.read_text())
    v["explain"] = {"folder": "verdict.explain", "scenarios": [{
        "name": "decode_b1", "why": "slower: +61.2 % vs the current baseline",
        "wall_s": {"current": {"torch": 0.0301, "python": 0.0523},
                   "candidate": {"torch": 0.0649, "python": 0.0950}},
        "top": ["+33.4 ms: 11 more `time.sleep` calls (0 -> 11), called from "
                "`slow_forward (0001-slow-decode.py:13)` [python]"],
        "files": {"current": [], "candidate": []}, "changes": {}}]}
    text = report.render_terminal(v).splitlines()
    i = text.index("why it is slower (one profile of each side; traces in verdict.explain/):")
    assert text[i + 1] == ("  decode_b1 (slower: +61.2 % vs the current baseline); profiled: "
                           "torch 30.1 -> 64.9 ms; python 52.3 -> 95.0 ms")
    assert text[i + 2].startswith("    +33.4 ms: 11 more `time.sleep` calls")
    md = markdown.render_markdown(v)
    assert "**Why it is slower (one profile of each side; traces in verdict.explain/):**" in md
    assert "  - +33.4 ms: 11 more `time.sleep` calls" in md
    v["explain"] = {"folder": "verdict.explain", "scenarios": [],
                    "note": "nothing was slower than the current baseline: nothing to explain"}
    assert "  nothing was slower than the current baseline" in report.render_terminal(v)


@pytest.mark.slow
def test_explain_names_the_slowed_function_of_the_planted_slow_decode(tmp_path):
    """The gate with --explain on tests/fixtures/gate/slow_decode (3 ms of time.sleep in
    ``slow_forward`` on every decode step): decode is slower, and its explanation names
    ``slow_forward``; both sides' traces are kept beside the verdict."""
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=64, prefill_output=1, decode_input=8, decode_output=12),
        rounds=10, max_looks=1, confirm=False)
    v = run_guard(GuardOptions(profile=prof, patches_dir=FIX / "gate" / "slow_decode",
                               baselines_dir=tmp_path / "baselines",
                               changelog=tmp_path / "CHANGELOG.md", quiet=True,
                               json_path=tmp_path / "v.json", explain=True))
    ex = v["explain"]
    assert ex["folder"] == "v.explain"
    explained = {s["name"]: s for s in ex["scenarios"]}
    assert "decode_b1" in explained, (ex, [(r["name"], r["outcome"]) for r in v["scenarios"]])
    top = explained["decode_b1"]["top"]
    assert any("slow_forward" in line for line in top), top
    for label in ("current", "candidate"):
        for name in ("torch.trace.json", "python.prof"):
            assert (tmp_path / "v.explain" / "decode_b1" / label / name).is_file()
    # profiling never changes the verdict: the samples are the timed rounds only
    assert {r["rounds"] for r in v["scenarios"]} == {10}
    saved = json.loads((tmp_path / "v.json").read_text())
    assert saved["explain"]["scenarios"][0]["top"] == ex["scenarios"][0]["top"]
    text = report.render_terminal(v)
    assert "why it is slower (one profile of each side; traces in v.explain/)" in text
    assert "slow_forward" in text
