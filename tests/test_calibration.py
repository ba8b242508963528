"""Calibration: planted patches, the measured error rates, and what reports quote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import LinesReporter

from patchgate.cli import main
from patchgate.errors import EXIT_ERROR, PatchgateError
from patchgate.patches import discover
from patchgate.profile import Lengths, get_profile
from patchgate.report.calibration import render
from patchgate.store import calibration as cal_file
from patchgate.store.baselines import BaselineStore
from patchgate.tools import calibrate as calibration
from patchgate.tools import pairing_gain, planted


@pytest.mark.parametrize("engine", ["transformers", "sglang"])
def test_planted_patches_pass_the_patch_contract(tmp_path, engine):
    (slow,) = discover(planted.slowdown(tmp_path / "s", 0.05, engine))
    assert slow.name == "0001-planted-slow-5pct.py" and slow.engines == (engine,)
    assert "5 %" in slow.title
    (neutral,) = discover(planted.neutral(tmp_path / "n"))
    assert neutral.applies_to(engine)
    with pytest.raises(ValueError):
        planted.slowdown(tmp_path / "x", 0.0, engine)


def test_the_planted_slowdown_slows_a_forward_pass_by_its_fraction():
    """On a clock of its own (each reading 10 us later; a forward pass 20 ms of it), so
    that nothing else on the machine moves the numbers: the pass, then half its own time
    again in the busy-wait."""
    ns: dict = {}
    exec(planted._SLOW_TRANSFORMERS.format(percent="50", fraction=0.5), ns)

    class Clock:
        t = 0.0

        def perf_counter(self):
            self.t += 1e-5
            return self.t

    clock = ns["time"] = Clock()  # the patch's `time`

    class Model:
        def forward(self, *args, **kwargs):
            clock.t += 0.02
            return "out"

    model = Model()
    ns["apply"](model)
    t0 = clock.t
    assert model.forward() == "out"
    took = clock.t - t0
    assert 0.030 <= took < 0.0301  # 20 ms of the pass + 10 ms of waiting (+ the readings)


def _sglang_layers(hidden: int, inter: int, qkv: int, layers: int = 2):
    """A model shaped like SGLang's Llama-family ones: model.model.layers[i].mlp with a
    merged gate/up weight, and the attention's weights beside it."""
    torch = pytest.importorskip("torch")

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up_proj = torch.nn.Linear(hidden, 2 * inter, bias=False)
            self.down_proj = torch.nn.Linear(inter, hidden, bias=False)

        def forward(self, x):  # matmuls, so that F.linear calls are the patch's
            gate, up = (x @ self.gate_up_proj.weight.T).chunk(2, dim=-1)
            return (torch.nn.functional.silu(gate) * up) @ self.down_proj.weight.T

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv_proj = torch.nn.Linear(hidden, qkv, bias=False)
            self.o_proj = torch.nn.Linear(hidden, hidden, bias=False)
            self.norm = torch.nn.Parameter(torch.ones(hidden))  # 1-dim: not counted
            self.mlp = MLP()

    model = torch.nn.Module()
    model.model = torch.nn.Module()
    model.model.layers = torch.nn.ModuleList(Layer() for _ in range(layers))
    return model


@pytest.mark.parametrize(("fraction", "rows"), [(0.05, 128), (0.02, 64), (0.5, 1536)])
def test_the_planted_gpu_slowdown_adds_an_aligned_product_and_keeps_the_answers(
        fraction, rows, monkeypatch):
    """The default model's shape (hidden 256, 3,072 weight rows of 256 a layer): the
    extra product's rows are f of them rounded to 128 (8 below 128), never more than
    the gate/up weight has; the MLP's output is unchanged, and the product is computed
    on every call."""
    torch = pytest.importorskip("torch")
    model = _sglang_layers(hidden=256, inter=768, qkv=512)
    ns: dict = {}
    exec(planted._SLOW_SGLANG.format(percent=f"{100 * fraction:g}", fraction=fraction), ns)
    x = torch.randn(3, 256)
    before = [layer.mlp(x) for layer in model.model.layers]
    ns["apply"](model)
    seen = []
    linear = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear",
                        lambda a, w, *rest: seen.append(tuple(w.shape)) or linear(a, w, *rest))
    for layer, want in zip(model.model.layers, before, strict=True):
        assert torch.equal(layer.mlp.forward(x), want)
    assert seen == [(rows, 256)] * 2


def test_planted_gpu_rows_are_aligned_on_the_8b_shape():
    """MiniCPM4-8B's layer (4,096 wide; 57,856 weight rows of 4,096): 5 % is 2,893 rows
    unrounded, an unaligned GEMM (docs/gpu-runs/2026-12-07c/planted-gemm.json)."""
    ns: dict = {}
    exec(planted._SLOW_SGLANG.format(percent="5", fraction=0.05), ns)
    assert ns["rows_for"](0.05 * 57856, 32768) == 2944
    assert ns["rows_for"](0.02 * 57856, 32768) == 1152
    assert ns["rows_for"](3.0, 4096) == 8 and ns["rows_for"](900.0, 256) == 256


def _doc(kinds: dict) -> dict:
    return {"schema_version": 1, "kind": cal_file.KIND, "profile": "default",
            "created": "2026-12-05T00:00:00+00:00", "environment": {"cpu": "x"},
            "settings": {"rounds": 10, "max_looks": 3, "threshold": 0.05, "alpha": 0.05,
                         "confirm": True},
            "wall_s": 100.0, "summary": {"kinds": kinds, "wall_s_median": 50.0,
                                         "unpaired_over_paired_ci_width": {"decode_b1": 1.4}},
            "runs": []}


KINDS = {"A/A": {"planted": 0.0, "rejected": 1, "runs": 20, "rate": 0.05, "low": 0.001,
                 "high": 0.249, "median_score_ratio": 1.0},
         "10 %": {"planted": 0.1, "rejected": 19, "runs": 20, "rate": 0.95, "low": 0.75,
                  "high": 0.999, "median_score_ratio": 1.1}}


def test_reports_quote_the_measured_rates(tmp_path):
    store = BaselineStore(tmp_path, "default")
    assert cal_file.quotes(store) == []
    (tmp_path / "default").mkdir()
    store.calibration_path().write_text(json.dumps(_doc(KINDS)))
    (q,) = cal_file.quotes(store)
    assert q["text"] == "1/20 false alarms; 19/20 caught at 10 %"
    text = render(_doc(KINDS))  # a first-version file: rejections only
    assert "| A/A       | 1/20 (0-25 %)    | -              | -" in text
    assert "decode_b1 1.40x" in text
    assert "t-test" not in text.splitlines()[0]
    doc = _doc(KINDS)
    doc["settings"] = doc["settings"] | {"test": "t"}
    assert render(doc).splitlines()[0].endswith("confirmation on, the paired t-test")


def test_a_planted_kind_that_measured_another_size_is_quoted_with_it(tmp_path):
    """A planted "5 %" that measured +21.7 % (the GPU's unaligned product, 2026-12-07):
    its catch rate is quoted with the size it measured; one within a factor of 2 of its
    planted size, and A/A runs, are not."""
    from patchgate.store.calibration import measured_apart

    kinds = {"A/A": KINDS["A/A"], "5 %": {**KINDS["10 %"], "planted": 0.05,
                                          "median_score_ratio": 1.217},
             "10 %": KINDS["10 %"]}
    store = BaselineStore(tmp_path, "default")
    store.calibration_path().parent.mkdir()
    store.calibration_path().write_text(json.dumps(_doc(kinds)))
    assert cal_file.quotes(store)[0]["text"] == ("1/20 false alarms; 19/20 caught at 5 % "
                                                 "(measured +21.7 %); 19/20 caught at 10 %")
    (note,) = [x for x in render(_doc(kinds)).splitlines() if x.startswith("note:")]
    assert note.startswith("note: the planted 5 % measured +21.7 % (quiet")
    assert measured_apart({"planted": 0.02, "median_score_ratio": 1.011}) is None
    assert measured_apart({"planted": 0.02, "median_score_ratio": 1.009}) == \
        pytest.approx(0.009)
    assert measured_apart({"planted": 0.0, "median_score_ratio": 1.5}) is None


def _counts(rejected, inconclusive, accepted, n=20):
    def one(k):
        return {"count": k, "rate": k / n, "low": 0.0, "high": 0.2}

    return {"runs": n, "rejected": one(rejected), "inconclusive": one(inconclusive),
            "accepted": one(accepted)}


def test_reports_quote_rates_quiet_and_under_load_and_the_calibrated_noise(tmp_path):
    quiet = {"A/A": {"planted": 0.0, **_counts(1, 2, 17), "median_score_ratio": 1.0},
             "10 %": {"planted": 0.1, **_counts(20, 0, 0), "median_score_ratio": 1.1}}
    load = {"A/A": {"planted": 0.0, **_counts(0, 9, 11), "median_score_ratio": 1.0},
            "10 %": {"planted": 0.1, **_counts(12, 8, 0), "median_score_ratio": 1.1}}
    doc = _doc(KINDS) | {"schema_version": 2, "load": {"busy_processes": 2, "cpu_count": 2}}
    doc["summary"] = dict(doc["summary"], conditions={"quiet": quiet, "load": load},
                          noise={"quiet": 0.004, "load": 0.011})
    store = BaselineStore(tmp_path, "default")
    store.calibration_path().parent.mkdir()
    store.calibration_path().write_text(json.dumps(doc))
    (q,) = cal_file.quotes(store)
    assert q["text"] == ("1/20 false alarms, 2/20 inconclusive; 20/20 caught at 10 % "
                         "(0/20 accepted); under load: 0/20 false alarms, 9/20 inconclusive; "
                         "12/20 caught at 10 % (0/20 accepted)")
    assert q["noise"] == 0.004
    text = render(doc)
    assert "under load (2 busy processes on 2 cores); A/A noise 1.10 % a round" in text


def test_a_broken_calibration_file_is_an_error_naming_it(tmp_path):
    path = BaselineStore(tmp_path, "default").calibration_path()
    path.parent.mkdir()
    path.write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(PatchgateError, match="calibration.json: not a calibration file"):
        cal_file.quotes(BaselineStore(tmp_path, "default"))


def test_calibrate_rejects_bad_arguments(capsys):
    assert main(["calibrate", "--runs", "0"]) == EXIT_ERROR
    assert "ERROR --runs must be at least 1" in capsys.readouterr().err
    assert main(["calibrate", "--slowdowns", "fast"]) == EXIT_ERROR
    assert "--slowdowns 'fast'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_calibration_on_the_default_model(tmp_path, reporter):
    """One A/A run and one run of a planted 50 % slowdown, shortened: the file is
    written and says which was rejected."""
    prof = get_profile("default").with_overrides(
        lengths=Lengths(prefill_input=64, prefill_output=1, decode_input=8, decode_output=8),
        rounds=8, max_looks=1)
    doc = calibration.calibrate(prof, tmp_path, calibration.Plan(1, (0.5,)), reporter)
    stored = json.loads(BaselineStore(tmp_path, "default").calibration_path().read_text())
    assert stored == json.loads(json.dumps(doc))
    kinds = doc["summary"]["kinds"]
    assert kinds["50 %"]["rejected"] == 1 and kinds["50 %"]["median_score_ratio"] > 1.3
    assert kinds["A/A"]["runs"] == 1
    assert len(doc["runs"]) == 2 and {r["planted"] for r in doc["runs"]} == {0.0, 0.5}
    assert all(set(r["ci_widths"]) == {"prefill_b1", "prefill_b8", "prefill_b64",
                                       "decode_b1", "decode_b8", "decode_b64"}
               for r in doc["runs"])
    lines = reporter.lines
    assert len(lines) == 2 and lines[1].startswith("calibrate 2/2 50 % quiet: rejected")
    assert Path(tmp_path / "default").is_dir()


def test_append_adds_to_a_calibration_of_the_same_settings_only(tmp_path):
    from patchgate.store import environment

    prof = get_profile("default")
    env = environment.fingerprint(prof.engine, prof.device)
    doc = _doc(KINDS) | {"environment": env, "settings": calibration._settings(prof),
                         "runs": [{"planted": 0.0, "rejected": False}]}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    assert calibration._previous(path, prof, env) == (doc["runs"], [])
    with pytest.raises(PatchgateError, match="other settings"):
        calibration._previous(path, prof.with_overrides(rounds=99), env)
    with pytest.raises(PatchgateError, match="another environment"):
        calibration._previous(path, prof, env | {"cpu_model": "another CPU"})
    assert calibration._previous(tmp_path / "none.json", prof, env) == ([], [])


def test_stored_pairing_gain_on_committed_h200_samples(capsys):
    """The H200 samples of h200-default (one run, current vs reference side by side):
    the paired interval is narrower than the unpaired one in every scenario."""
    root = Path(__file__).resolve().parent.parent / "baselines"
    gains = pairing_gain.stored_pairing_gain(BaselineStore(root, "h200-default"))
    assert set(gains) == {"prefill_b1", "prefill_b8", "prefill_b64", "decode_b1",
                          "decode_b8", "decode_b64"}
    assert all(g["gain"] > 1.1 for g in gains.values())
    assert main(["calibrate", "--profile", "h200-default", "--stored"]) == 0
    assert "unpaired / paired" in capsys.readouterr().out


def test_the_load_dies_with_a_calibration_that_is_killed():
    """A calibration ended by SIGKILL (a CI runner's hard cancel) leaves no busy process
    behind: each spinner ends with the process that started it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = ("import sys, time\nfrom patchgate.tools.load import cpu_load\n"
            "with cpu_load(2) as procs:\n"
            "    print(' '.join(str(p.pid) for p in procs), flush=True)\n"
            "    time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    spinners = [int(x) for x in parent.stdout.readline().split()]
    assert len(spinners) == 2

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:  # a zombie not yet reaped is gone too
            return f.read().split()[2] != "Z"

    assert all(alive(p) for p in spinners)
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.time() + 10
    while any(alive(p) for p in spinners) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in spinners)


def test_a_calibration_of_planted_runs_alone_leaves_the_aa_run_out(tmp_path, monkeypatch):
    """--no-aa: one planted run per call (a GPU call holds one run; the A/A runs come
    from calls of their own and --append); with no slowdown either, an error."""
    from fakes import use_fake_engines

    use_fake_engines(monkeypatch)
    prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                 settle_s=0.0)
    plan = calibration.Plan(runs=1, slowdowns=(0.5,), out=tmp_path / "cal.json", aa=False)
    doc = calibration.calibrate(prof, tmp_path, plan, LinesReporter())
    assert [r["planted"] for r in doc["runs"]] == [0.5]
    with pytest.raises(PatchgateError, match="nothing to run"):
        calibration.calibrate(prof, tmp_path, calibration.Plan(
            runs=1, slowdowns=(), out=tmp_path / "none.json", aa=False), LinesReporter())
    assert not (tmp_path / "none.json").exists()


def test_a_calibration_run_records_its_seconds_per_phase(tmp_path, monkeypatch):
    """Each run keeps where its time went (engines, looks, the confirmation's fresh
    engines and looks), the summary and the report give the median per kind, and the
    line said after each run names them: a GPU run's cost is a number the file owns."""
    from fakes import use_fake_engines

    from patchgate.report import calibration as calibration_report

    use_fake_engines(monkeypatch)
    prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                 settle_s=0.0)
    said: list[str] = []
    reporter = LinesReporter()
    reporter.say = said.append
    plan = calibration.Plan(runs=1, slowdowns=(0.5,), out=tmp_path / "cal.json", aa=False)
    doc = calibration.calibrate(prof, tmp_path, plan, reporter)
    run = doc["runs"][0]
    assert run["outcome"] == "rejected"
    t = run["timings_s"]
    assert {"engines", "latency", "confirm_engines", "confirm"} <= set(t)
    assert t["latency"] > 0 and sum(t.values()) <= run["wall_s"] + 0.2
    median = doc["summary"]["timings_s_median"]["50 %"]
    assert median["latency"] == t["latency"]
    text = calibration_report.render(doc)
    assert f"median 50 % run: engines {t['engines']:.0f} s, latency {t['latency']:.0f} s" in text
    assert any(f"score ratio 1.500, 1 look(s), in {run['wall_s']:.0f} s" in line
               for line in said), said


def test_a_cut_off_calibration_keeps_its_finished_runs_for_the_next_append(tmp_path,
                                                                           monkeypatch):
    """A calibration stopped in its second run (Ctrl-C, a device call's limit): the file
    is left as it was, the first run is in the journal beside it; the next call with
    --append adds it to its own runs, and the journal goes; the journal of other
    settings is refused by name."""
    from fakes import use_fake_engines

    from patchgate.store import calibration_journal

    use_fake_engines(monkeypatch)
    prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                 settle_s=0.0)
    out = tmp_path / "cal.json"
    journal = calibration_journal.path_of(out)
    real, calls = calibration.run_job, []

    def cut_off(*args, **kw):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(calibration, "run_job", cut_off)
    with pytest.raises(PatchgateError, match=r"interrupted: .*cal\.json left as it was; "
                       r"1 finished run\(s\) kept in .*cal\.json\.runs\.jsonl"):
        calibration.calibrate(prof, tmp_path, calibration.Plan(
            runs=1, slowdowns=(0.5,), out=out), LinesReporter())
    assert not out.exists()
    header, runs = calibration_journal.read(journal)
    assert header["profile"] == "default" and [r["planted"] for r in runs] == [0.0]
    with pytest.raises(PatchgateError, match=r"cal\.json\.runs\.jsonl: other settings"):
        calibration.calibrate(prof.with_overrides(rounds=9), tmp_path, calibration.Plan(
            runs=1, slowdowns=(0.5,), out=out, append=True), LinesReporter())
    monkeypatch.setattr(calibration, "run_job", real)
    doc = calibration.calibrate(prof, tmp_path, calibration.Plan(
        runs=1, slowdowns=(0.5,), out=out, append=True), LinesReporter())
    assert [r["planted"] for r in doc["runs"]] == [0.0, 0.0, 0.5]
    assert json.loads(out.read_text())["runs"] == json.loads(json.dumps(doc["runs"]))
    assert not journal.exists()


def test_a_time_limit_starts_only_the_runs_that_fit_and_writes_those(tmp_path,
                                                                     monkeypatch):
    """On a clock of its own: an A/A run takes 100 s, a planted one 200 s; with 450 s
    the first A/A run starts (nothing known yet), the planted one fits by the A/A's
    100 s, the second A/A by its kind's 100 s, and nothing after (50 s left): the file
    holds those three, and the runs left out are named."""
    from fakes import use_fake_engines

    from patchgate.tools.calibration_summary import expected_s

    use_fake_engines(monkeypatch)
    prof = get_profile("default").with_overrides(rounds=8, warmup=0, max_looks=1,
                                                 settle_s=0.0)

    class Clock:
        t = 1000.0

        def perf_counter(self):
            return self.t

    clock = Clock()
    monkeypatch.setattr(calibration, "time", clock)
    real = calibration.run_job

    def timed(*args, **kw):
        rec = real(*args, **kw)
        took = 200.0 if args[1] else 100.0
        clock.t += took
        return rec | {"wall_s": took}

    monkeypatch.setattr(calibration, "run_job", timed)
    say = LinesReporter()
    out = tmp_path / "cal.json"
    doc = calibration.calibrate(prof, tmp_path, calibration.Plan(
        runs=3, slowdowns=(0.5,), out=out, time_limit=450), say)
    assert [r["planted"] for r in doc["runs"]] == [0.0, 0.5, 0.0]
    assert json.loads(out.read_text())["runs"] == json.loads(json.dumps(doc["runs"]))
    skipped = [x for x in say.lines if x.startswith("not starting")]
    assert skipped == ["not starting 50 % quiet run 2: 50 s left of --time-limit, a run of "
                       "its kind took 200 s",
                       "not starting A/A quiet run 3: 50 s left of --time-limit, a run of "
                       "its kind took 100 s",
                       "not starting 50 % quiet run 3: 50 s left of --time-limit, a run of "
                       "its kind took 200 s"]
    assert any(x.startswith("3 of 6 run(s) not started") for x in say.lines)
    assert expected_s(0.5, "load", doc["runs"]) == 200.0  # any kind's longest
    assert expected_s(0.5, "quiet", []) is None
    with pytest.raises(PatchgateError, match="not with --ray"):
        calibration.calibrate(prof, tmp_path, calibration.Plan(
            runs=1, slowdowns=(), out=tmp_path / "r.json", ray="auto", time_limit=9), say)
    assert not list(tmp_path.glob("r.json*"))  # nothing written, no journal begun


def test_calibrate_refuses_a_time_limit_that_is_not_positive(capsys):
    assert main(["calibrate", "--time-limit", "0"]) == EXIT_ERROR
    assert "ERROR --time-limit 0: must be a positive" in capsys.readouterr().err


def test_a_journal_cut_off_mid_line_loses_that_line_only(tmp_path):
    from patchgate.store import calibration_journal

    journal = tmp_path / "cal.json.runs.jsonl"
    calibration_journal.start(journal, {"profile": "p"}, [{"run": 0}])
    calibration_journal.add(journal, {"run": 1})
    with journal.open("a") as f:
        f.write('{"run": 2, "outc')  # the process killed mid-write
    assert calibration_journal.read(journal) == ({"profile": "p"}, [{"run": 0}, {"run": 1}])
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(PatchgateError, match=r"runs\.jsonl: line 2 is not JSON"):
        calibration_journal.read(journal)
