"""The gate end to end, with real runs of the default model on CPU.

Planted patches (tests/fixtures/gate/): a decode slowdown, an accuracy breaker, a
neutral rewrite, and broken ones. Lengths are shortened so the suite stays quick;
the accuracy guard runs the full default suite.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GATE_PROFILE as PROFILE
from conftest import gate_options as opts
from conftest import snapshot

from patchgate.cli import main
from patchgate.engines.configurations import Configurations
from patchgate.errors import PatchgateError
from patchgate.gate import GuardOptions, run_guard
from patchgate.latency import looks as latency
from patchgate.latency.scenarios import make_scenarios
from patchgate.patches import discover
from patchgate.tools import planted
from patchgate.verdict import evidence

pytestmark = pytest.mark.slow

FIX = Path(__file__).parent / "fixtures"
GATE = FIX / "gate"
ROOT = Path(__file__).resolve().parent.parent


def test_first_run_wrote_reference_and_current(reference_dir):
    ref = json.loads((reference_dir / "baselines/default/reference.json").read_text())
    cur = json.loads((reference_dir / "baselines/default/current.json").read_text())
    assert ref["schema_version"] == 1 and ref["patches"] == [] and cur["patches"] == []
    # the first accepted state is also the fastest one so far
    best = json.loads((reference_dir / "baselines/default/best.json").read_text())
    assert best["role"] == "best" and best["patches"] == []
    assert set(ref["scenarios"]) == {f"{p}_b{b}" for p in ("prefill", "decode")
                                     for b in (1, 8, 64)}
    assert all(len(s["samples_s"]) == PROFILE.rounds for s in ref["scenarios"].values())
    assert ref["accuracy"]["mean"] > 0.5
    assert ref["environment"]["engine"] == "transformers"
    # what the accuracy was measured on: the reference accuracy is reused only for it
    work = ref["extra"]["workload"]
    assert work == cur["extra"]["workload"] and len(work["model"]) == len(work["tasks"]) == 64


def neutral(work, **kw) -> tuple[dict, int]:
    """The gate on a no-op patch: (verdict, runs). A harmless change is rejected for
    latency noise in about alpha = 5 % of runs by design, and called inconclusive when
    the machine is too noisy to show it is not slower (a shared runner, another job
    beside the tests: CI once measured the score to +-4 % in 24 rounds). So a
    latency-only answer other than accepted gets one more run, with the rounds the
    verdict says a re-run needs at the noise it measured (half as many again, at most
    :data:`RERUN_ROUNDS` a look), as a user would re-run it; two in a row fail the test."""
    v = run_guard(opts(work, GATE / "neutral", **kw))
    if v["verdict"] in ("rejected", "inconclusive") and v["accuracy"]["ratio"] >= 0.99 and \
            not any("accuracy" in r for r in v["reasons"]):  # latency alone
        return run_guard(opts(work, GATE / "neutral", profile=rerun_profile(v), **kw)), 2
    return v, 1


RERUN_ROUNDS = 40


def rerun_profile(v: dict):
    """:data:`PROFILE` with the rounds a re-run of ``v`` needs (a rejection: unchanged)."""
    if v["verdict"] != "inconclusive":
        return PROFILE
    lat = v["latency"]
    need = evidence.rounds_needed(lat["score"], lat["threshold"])
    per_look = math.ceil(1.5 * need / lat["max_looks"]) if need else RERUN_ROUNDS
    return PROFILE.with_overrides(rounds=min(RERUN_ROUNDS, max(PROFILE.rounds, per_look)))


def test_neutral_patch_is_accepted(work):
    v, _ = neutral(work, json_path=work / "v.json")
    assert v["verdict"] == "accepted", v["reasons"]
    assert v["accuracy"]["ratio"] == 1.0
    assert v["accuracy"]["reference_source"].startswith("loaded from")
    # the same answers as the stored reference (complete, so the interval is exact):
    # shown at or above the limit before the last item
    a = v["accuracy"]
    assert a["decision"] == "pass" and a["items_evaluated"] < a["items_total"] == 600
    assert a["sequential"]["reference_exact"] and a["interval"][0] >= 0.99
    assert v["C"] == 1.0
    doc = json.loads((work / "v.json").read_text())
    assert doc["verdict"] == "accepted" and doc["schema_version"] == 3
    assert {r["outcome"] for r in doc["scenarios"]} <= {"equivalent", "undecided", "faster",
                                                        "not slower"}
    assert doc["latency"]["score"]["outcome"] in ("equivalent", "faster", "not slower")
    assert doc["latency"]["inputs"].startswith("fresh token ids every round")
    assert set(doc["S"]) == {"1", "8", "inf"}
    assert {r["phase"] for r in doc["scenarios"]} == {"prefill", "decode"}
    assert doc["patches"]["candidate"][0]["name"] == "0001-silu-module.py"


def test_slow_decode_is_rejected(work):
    before = snapshot(work)
    v = run_guard(opts(work, GATE / "slow_decode", accept=True))
    if any(r["regressed"] for r in v["scenarios"] if r["phase"] == "prefill"):
        # an untouched scenario flagged: the designed false-alarm rate (see neutral())
        v = run_guard(opts(work, GATE / "slow_decode", accept=True))
    assert v["verdict"] == "rejected"
    # slower alone (significant), or carrying a slower score (its interval beyond the
    # threshold: a slower score ends the looks before a scenario alone can be tested)
    slow = {r["name"] for r in v["scenarios"] if r["regressed"] or (r["ci_low"] or 0) > 1.05}
    assert {"decode_b1", "decode_b8"} <= slow
    assert not any(r["regressed"] for r in v["scenarios"] if r["phase"] == "prefill")
    assert any("decode_b1" in reason and "slower" in reason for reason in v["reasons"])
    # the slowdown was measured again in fresh engine processes before it counted
    found = [v["latency"]["score"]] + [r for r in v["scenarios"] if r["regressed"]]
    assert all(x["outcome"] == "slower" and x["confirmation"]["outcome"] == "slower"
               and x["confirmation"]["ratio"] > 1.05 for x in found)
    assert any("again in fresh engine processes" in reason for reason in v["reasons"])
    assert v["accuracy"]["ratio"] == 1.0
    assert snapshot(work) == before  # --accept on a rejected change writes nothing


def test_accuracy_breaking_patch_is_rejected_and_recorded(work):
    v = run_guard(opts(work, GATE / "break_accuracy", record=True))
    assert v["verdict"] == "rejected"
    assert v["accuracy"]["ratio"] < 0.97
    # the sequential guard stopped early, and the verdict says where and why
    a = v["accuracy"]
    assert a["decision"] == "reject" and a["stopped"] == "accuracy shown below the limit"
    assert a["n"] == a["items_evaluated"] < a["items_total"] == 600
    assert a["interval"][1] < 0.99 and a["sequential"]["lm_eval_runs"] >= 2
    assert f"on {a['items_evaluated']} of 600 items" in v["reasons"][0]
    assert v["C"] == 0.0 and v["score"] == 0.0
    assert v["accuracy"]["flipped_to_wrong"] > v["accuracy"]["flipped_to_right"]
    assert "accuracy" in v["reasons"][0]
    log = (work / "CHANGELOG.md").read_text()
    assert "Quantize every linear layer to 2 bits" in log and "(rejected)" in log
    assert not (work / "baselines/default/current.json").read_text().count("int2")


def test_full_accuracy_evaluates_every_item_to_the_same_verdict(work, capsys):
    """--full-accuracy: every item, today's rule; the same answer as the early stop."""
    assert main(["guard", "--patches", str(GATE / "break_accuracy"), "--baselines",
                 str(work / "baselines"), "--changelog", str(work / "CHANGELOG.md"),
                 "--quiet", "--rounds", "4", "--full-accuracy", "--json",
                 str(work / "v.json")]) == 1
    a = json.loads((work / "v.json").read_text())["accuracy"]
    # every item, and the guard's decision on the full set (no sequential guard ran)
    assert a["n"] == a["items_evaluated"] == a["items_total"] == 600
    assert a["decision"] == "reject" and "sequential" not in a and a["ratio"] < 0.97
    assert "sequential guard" not in capsys.readouterr().out


def test_a_slowdown_that_fresh_processes_do_not_repeat_is_not_counted(reporter):
    """The confirmation on real engines: a first look that says prefill_b64 is 30 %
    slower (as a slow process would), then fresh processes of a neutral patch and the
    unpatched model, which cannot confirm it."""
    prof = PROFILE.with_overrides(rounds=8, max_looks=1)
    scenarios = make_scenarios(prof)
    same = {s.name: [1.0 + 0.001 * i for i in range(8)] for s in scenarios}
    slow = same | {"prefill_b64": [1.3 + 0.002 * i for i in range(8)]}
    result = latency.judged({"candidate": slow, "current": same, "reference": same},
                            scenarios, prof)
    assert [n for n, d in result.decisions["current"].items() if d.outcome == "slower"] == \
        ["prefill_b64"]
    sets = {"candidate": discover(GATE / "neutral"), "current": [], "reference": []}
    with Configurations(prof, sets) as configs:
        latency._confirm(configs, prof, result, ["current"], reporter)
        assert configs.starts == 1  # fresh processes, started once
    assert result.unconfirmed("current", "prefill_b64")
    assert result.final("current", "prefill_b64") != "slower"
    assert set(result.confirm_samples["candidate"]) == {"prefill_b64"}
    assert len(result.confirm_samples["candidate"]["prefill_b64"]) == 8
    assert result.confirmation["current"]["prefill_b64"].outcome != "slower"
    assert any("fresh engine processes" in line for line in reporter.lines)


@pytest.mark.parametrize("busy", [0, 2], ids=["quiet", "under-load"])
def test_a_planted_ten_percent_slowdown_of_every_pass_is_never_accepted(work, tmp_path, busy):
    """The slowdown that the old gate accepted 4 times out of 4, and once more on a busy
    machine: every forward pass busy-waits for 10 % of its own time. Whatever the load,
    it is never accepted: rejected when the run can show it, inconclusive when it
    cannot (the calibration measures how often each happens)."""
    from patchgate.tools.load import cpu_load

    folder = planted.slowdown(tmp_path / "slow10", 0.10, "transformers")
    with cpu_load(busy):
        v = run_guard(opts(work, folder))
    assert v["verdict"] != "accepted", v["latency"]
    assert v["latency"]["score"]["outcome"] not in ("equivalent", "faster", "not slower")
    if v["verdict"] == "rejected":
        # Rejected on the score, or on a scenario (under load the score can stay
        # undecided while decode_b64 is shown slower); either way the slowdown was
        # confirmed in fresh processes, and the reasons name it.
        confirmed = [v["latency"]["score"]] + [r for r in v["scenarios"] if r["regressed"]]
        confirmed = [c for c in confirmed if (c.get("confirmation") or {}).get("outcome")
                     == "slower"]
        assert confirmed, v["latency"]
        assert v["reasons"] and all(" slower" in r or " lower than" in r
                                    for r in v["reasons"]), v["reasons"]
    else:
        assert v["reasons"][0].startswith("latency not shown within the 5 % threshold")


def test_token_agreement_guard_through_the_gate(work):
    """The random-weight profiles' guard, run end to end on the default model."""
    prof = PROFILE.with_overrides(guard="token_agreement", rounds=5)
    bad = run_guard(GuardOptions(profile=prof, patches_dir=GATE / "break_accuracy",
                                 baselines_dir=work / "baselines",
                                 changelog=work / "CHANGELOG.md", quiet=True))
    assert bad["verdict"] == "rejected" and "token agreement" in bad["accuracy"]["mode"]
    assert bad["accuracy"]["n"] == 16 * 64 and bad["accuracy"]["ratio"] < 0.9
    ok = run_guard(GuardOptions(profile=prof, patches_dir=GATE / "neutral",
                                baselines_dir=work / "baselines",
                                changelog=work / "CHANGELOG.md", quiet=True))
    assert ok["accuracy"]["ratio"] >= 0.99, ok["reasons"]


def test_record_logs_an_accepted_change_without_touching_baselines(work):
    folder = work / "baselines" / "default"
    stored = {n: (folder / n).read_bytes() for n in ("reference.json", "current.json")}
    v, runs = neutral(work, record=True)
    assert v["verdict"] == "accepted", v["reasons"]
    assert {n: (folder / n).read_bytes() for n in stored} == stored
    assert "(accepted)" in (work / "CHANGELOG.md").read_text()
    assert len((folder / "history.jsonl").read_text().splitlines()) == runs


def test_accept_updates_baselines_and_changelog(work):
    v, _ = neutral(work, accept=True)
    assert v["verdict"] == "accepted", v["reasons"]
    cur = json.loads((work / "baselines/default/current.json").read_text())
    assert [p["name"] for p in cur["patches"]] == ["0001-silu-module.py"]
    assert "(accepted)" in (work / "CHANGELOG.md").read_text()
    # the same patch again is the current baseline now: nothing new
    again = run_guard(opts(work, GATE / "neutral"))
    assert again["new_patches"] == []
    assert again["patches"]["current"] == again["patches"]["candidate"]


# ---------------------------------------------------------------- bad input: exit 2


def cli(work: Path, patches: Path, *extra: str) -> int:
    return main(["guard", "--patches", str(patches), "--baselines", str(work / "baselines"),
                 "--changelog", str(work / "CHANGELOG.md"), "--quiet", "--rounds", "2",
                 *extra])


@pytest.mark.parametrize("case, message", [
    ("apply_raises", "patch 0001-raises.py: apply() raised AttributeError"),
    ("nan", "NaN or inf logits"),
    ("bad_server_arg", "0001-fp8-kv.py: SERVER_ARGS sets 'kv_cache_dtype'"),
    ("exit_in_apply", "engine candidate (0001-exit.py): its worker process died while "
                      "importing and applying patch 0001-exit.py (exit code 3)"),
    ("crash_b64", "patch 0001-crash-b64.py failed while timing a generate call (latency) "
                  "(engine candidate, line 10 in guarded): RuntimeError: planted failure"),
    ("apply_returns_int", "patch 0001-returns.py: apply() returned int, not a model"),
])
def test_bad_patches_exit_2_and_write_nothing(work, capsys, case, message):
    before = snapshot(work)
    assert cli(work, GATE / case, "--accept", "--record") == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert snapshot(work) == before


def test_a_patch_that_hangs_ends_the_run_with_an_error(work):
    """A call that never returns is stopped after call_timeout_s; the worker is ended
    and nothing is written."""
    import multiprocessing

    before = snapshot(work)
    prof = PROFILE.with_overrides(call_timeout_s=5, rounds=2)
    t0 = time.monotonic()
    with pytest.raises(PatchgateError) as info:
        run_guard(GuardOptions(profile=prof, patches_dir=GATE / "hang",
                               baselines_dir=work / "baselines", accept=True, record=True,
                               changelog=work / "CHANGELOG.md", quiet=True))
    assert "engine candidate (0001-hang.py): no answer after 5 s while timing" in \
        info.value.message
    assert time.monotonic() - t0 < 120
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("patchgate")]
    assert snapshot(work) == before


def test_broken_patch_file_fails_before_any_benchmark(work, capsys):
    before = snapshot(work)
    assert cli(work, FIX / "patches" / "syntax_error", "--accept") == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ERROR")]
    assert errors and errors[0].startswith("ERROR patch") and "0001-broken.py" in errors[0]
    assert "latency" not in err
    assert snapshot(work) == before


@pytest.mark.parametrize("fixture", ["corrupt.json", "old_version.json", "wrong_kind.json"])
def test_bad_baseline_exit_2_and_is_left_alone(work, capsys, fixture):
    target = work / "baselines/default/current.json"
    shutil.copy(FIX / "baselines" / fixture, target)
    before = snapshot(work)
    assert cli(work, GATE / "neutral", "--accept") == 2
    err = capsys.readouterr().err
    assert "current.json" in err and "hint:" in err
    assert snapshot(work) == before


def test_ctrl_c_mid_run_exits_2_and_writes_nothing(work):
    before = snapshot(work)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchgate", "guard", "--patches", str(GATE / "neutral"),
         "--baselines", str(work / "baselines"), "--changelog", str(work / "CHANGELOG.md"),
         "--rounds", "50", "--accept", "--json", str(work / "v.json")],
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        # a suite started in the background (`make test &`) runs with SIGINT ignored, and
        # the child would inherit that: give it the terminal's default, as Ctrl-C finds it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = ""
    deadline = time.time() + 120
    while "[patchgate] latency" not in seen and time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, seen + err
    assert "ERROR interrupted during latency" in err
    after = snapshot(work)
    assert json.loads((work / "v.json").read_text())["verdict"] == "error"
    after.pop("v.json")
    assert after == before


def test_a_class_level_patch_reaches_only_the_candidate(work):
    """Configurations run in separate processes: patching a class in the candidate
    must not slow the reference and the current baseline down with it."""
    v = run_guard(opts(work, GATE / "global_slow"))
    assert v["verdict"] == "rejected"
    dec = {r["name"]: r for r in v["scenarios"] if r["phase"] == "decode"}
    assert dec["decode_b1"]["ratio"] > 1.3 and dec["decode_b1"]["ci_low"] > 1.05
    assert any("decode_b1" in reason for reason in v["reasons"])


def test_attribution_gives_each_new_patch_its_own_effect(work, tmp_path, capsys):
    """Two new patches, a neutral one and a decode slowdown: --attribute measures
    0001 alone and 0001+0002 and says which one cost the time."""
    two = tmp_path / "two_new"
    two.mkdir()
    shutil.copy(GATE / "neutral" / "0001-silu-module.py", two / "0001-silu-module.py")
    shutil.copy(GATE / "slow_decode" / "0001-slow-decode.py", two / "0002-slow-decode.py")
    v = run_guard(opts(work, two, attribute=True, quiet=False))
    assert v["verdict"] == "rejected"
    first, second = v["attribution"]
    assert (first["patch"], second["patch"]) == ("0001-silu-module.py", "0002-slow-decode.py")
    # which patch cost the time (relations, not sizes: the machine may be loaded)
    assert second["scenarios"]["decode_b1"]["ratio"] > 1.5
    slow, fine = (p["scenarios"]["decode_b1"]["ratio"] for p in (second, first))
    assert slow > 1.2 * fine
    assert second["score_change"] < first["score_change"] - 0.1
    assert first["accuracy_change"] == 0 and second["accuracy_ratio"] == 1.0
    err = capsys.readouterr().err
    assert "--attribute: 2 new patches, so 1 more engine(s)" in err.replace("\n", " ")


def test_the_cli_into_a_pipe_writes_step_lines_and_no_carriage_return(work):
    """CI logs: with stdout and stderr going to pipes (not a terminal), no progress bar
    redraws (no '\\r', lm-eval's bars included) and every step still gets its line."""
    small = work / "small.toml"  # the default profile at the lengths of this file's runs
    small.write_text('name = "default"\ndescription = "default, short lengths"\n'
                     'model = "models/default"\nengine = "transformers"\nrounds = 3\n'
                     "[lengths]\nprefill_input = 64\nprefill_output = 1\n"
                     "decode_input = 8\ndecode_output = 12\n")
    run = subprocess.run(
        [sys.executable, "-m", "patchgate", "guard", "--profile", str(small), "--patches",
         str(GATE / "neutral"), "--baselines", str(work / "baselines"), "--changelog",
         str(work / "CHANGELOG.md")],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert run.returncode in (0, 1, 3), run.stderr[-3000:]
    assert run.stdout.count("\r") == 0 and run.stderr.count("\r") == 0
    for step in ("validating patches", "latency", "accuracy", "writing results", "done"):
        assert f"[patchgate] {step}" in run.stderr, step
