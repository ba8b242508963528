"""The serving scenario set on CPU: everything but SGLang itself.

Golden command lines for ``sglang.launch_server`` and ``sglang.bench_serving``; the
server lifecycle (readiness, a timeout, a server that exits, Ctrl-C-like errors, no
process left behind) against a small fake server (tests/fixtures/serving/); a
bench_serving result file in its own format; S from durations; and the whole serving
phase (servers, interleaved rounds, the paired decision, the verdict rows and the
report) with the fake server and a fake bench client.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from patchgate.engines.configurations import Configurations
from patchgate.errors import PatchgateError
from patchgate.guard.decision import AccuracyDecision
from patchgate.latency import budgets, explain, sets
from patchgate.latency import looks as latency
from patchgate.latency.serving import bench, configurations, phase, server
from patchgate.latency.serving.scenarios import ServingScenario, batch_sizes, make_scenarios
from patchgate.latency.sets import Options
from patchgate.patches import discover
from patchgate.profile import Serving, get_profile
from patchgate.report import markdown
from patchgate.report import render as report
from patchgate.report.console import Reporter
from patchgate.stats import speed_score
from patchgate.verdict import judge as verdict

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"
FAKE = FIX / "serving"
DUMMY = get_profile("h200-minicpm8b-dummy")


def write_patch(folder: Path, name: str, body: str):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(body)
    return discover(folder)


def rel(cmd: list[str]) -> list[str]:
    return [x.replace(str(ROOT), "<root>") for x in cmd]


# ---------------------------------------------------------------- command lines
def test_launch_command_is_the_engines_settings_as_flags(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-fp8.py",
                          '"""FP8 KV, small graphs."""\nENGINES = ("sglang",)\n'
                          'SERVER_ARGS = {"kv_cache_dtype": "fp8_e4m3", '
                          '"cuda_graph_bs": [1, 2, 4, 8]}\n')
    cmd = server.launch_command(DUMMY, patches, 31234, share=1 / 3, python="python")
    assert rel(cmd) == [
        "python", "-m", "sglang.launch_server",
        "--model-path", "<root>/models/minicpm4-8b-dummy", "--dtype", "bfloat16",
        "--trust-remote-code", "--random-seed", "0", "--log-level", "warning",
        "--mem-fraction-static", "0.267", "--load-format", "dummy",
        "--kv-cache-dtype", "fp8_e4m3", "--cuda-graph-bs", "1", "2", "4", "8",
        "--disable-radix-cache",
        # a random-weight folder ships no tokenizer: the server detokenizes with the
        # default model's (bench_serving times the streamed text)
        "--tokenizer-path", "<root>/models/default",
        "--host", "127.0.0.1", "--port", "31234"]
    assert "--skip-tokenizer-init" not in cmd


def test_launch_command_keeps_the_radix_cache_off(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-radix.py",
                          '"""Radix."""\nSERVER_ARGS = {"disable_radix_cache": False}\n')
    with pytest.raises(PatchgateError, match="0001-radix.py: SERVER_ARGS sets "
                                             "disable_radix_cache=False"):
        server.launch_command(DUMMY, patches, 1)


def test_bench_command_golden():
    c1, c8, cinf = make_scenarios(DUMMY)
    cmd = bench.bench_command("http://127.0.0.1:31234", c8, ("/m", "/t"), 0, Path("o.jsonl"),
                              python="python")
    assert cmd == [
        "python", "-m", "sglang.bench_serving", "--backend", "sglang",
        "--base-url", "http://127.0.0.1:31234", "--model", "/m", "--tokenizer", "/t",
        "--dataset-name", "random-ids", "--tokenize-prompt", "--num-prompts", "16",
        "--random-input-len", "1024", "--random-output-len", "256",
        "--random-range-ratio", "1.0", "--request-rate", "inf", "--max-concurrency", "8",
        "--seed", "0", "--warmup-requests", "1", "--flush-cache", "--disable-tqdm",
        "--output-file", "o.jsonl"]
    unlimited = bench.bench_command("u", cinf, ("/m", "/t"), 0, Path("o"), python="python")
    assert "--max-concurrency" not in unlimited
    assert [s.name for s in (c1, c8, cinf)] == ["serving_c1", "serving_c8", "serving_cinf"]


def test_scenarios_stand_for_s1_s8_sinf():
    scen = make_scenarios(DUMMY)
    assert batch_sizes(scen) == (1, 8, 16)
    assert scen[2].record() == {"name": "serving_cinf", "phase": "serving", "batch_size": 16,
                                "input_len": 1024, "output_len": 256, "concurrency": None,
                                "num_prompts": 16}
    few = DUMMY.with_overrides(serving=Serving(num_prompts=8))
    with pytest.raises(PatchgateError, match="two scenarios would measure the same thing"):
        make_scenarios(few)


def test_serving_needs_sglang_and_refuses_accept():
    cpu = get_profile("default").with_overrides(scenarios="serving")
    with pytest.raises(PatchgateError, match="engine is transformers"):
        phase.ServingSet().check(cpu, Options())
    serving = DUMMY.with_overrides(scenarios="serving")
    with pytest.raises(PatchgateError, match="--accept, --record: not with the serving"):
        phase.ServingSet().check(serving, Options(accept=True, record=True))
    with pytest.raises(PatchgateError, match="unknown scenarios 'both'"):
        sets.get("both")
    phase.ServingSet().check(serving, Options())


# ---------------------------------------------------------------- results and S
def test_bench_serving_result_file_is_read_and_checked():
    c1, c8, _ = make_scenarios(DUMMY)
    r = bench.parse_result(FAKE / "bench_serving_result.jsonl", c8, "candidate")
    # the file holds two runs (bench_serving appends): the last one counts
    assert r.duration_s == 3.02 and r.completed == 16
    assert (r.median_ttft_ms, r.p99_ttft_ms) == (88.4, pytest.approx(221.0))
    assert (r.median_itl_ms, r.p99_itl_ms) == (5.74, pytest.approx(7.462))
    assert r.median_e2e_ms == 1509.87
    longer = ServingScenario(8, 16, 1024, 300)
    with pytest.raises(PatchgateError, match="expected 16384 and 4800"):
        bench.parse_result(FAKE / "bench_serving_result.jsonl", longer, "candidate")


def test_a_result_without_a_duration_names_the_file(tmp_path):
    bad = tmp_path / "r.jsonl"
    bad.write_text('{"completed": 16}\n')
    c1 = make_scenarios(DUMMY)[0]
    with pytest.raises(PatchgateError, match="missing or bad field 'duration'"):
        bench.parse_result(bad, c1, "current")
    with pytest.raises(PatchgateError, match="wrote no result"):
        bench.parse_result(tmp_path / "none.jsonl", c1, "current")


def test_s_is_the_contests_duration_ratio():
    # S = 100 x reference duration / duration, one scenario per concurrency
    assert speed_score([24.31], [20.0]) == pytest.approx(121.55)
    scen = make_scenarios(DUMMY)
    rows = [s.record() | {"reference_median_s": ref, "median_s": cand}
            for s, ref, cand in zip(scen, (24.0, 3.0, 2.0), (20.0, 3.0, 2.5), strict=True)]
    s = verdict.speed_scores(rows, batch_sizes(scen))
    assert s == {"1": pytest.approx(120.0), "8": pytest.approx(100.0),
                 "inf": pytest.approx(80.0)}


# ---------------------------------------------------------------- server lifecycle
def fake(*flags: str) -> list[str]:
    return [sys.executable, str(FAKE / "fake_server.py"), *flags]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def start_fake(tmp_path, *flags, timeout=20.0, grace=5.0) -> server.Server:
    port = server.free_port()
    srv = server.Server("candidate", [], fake("--port", str(port), *flags), port=port,
                        limits=server.Limits(timeout, grace, tmp_path))
    return srv.start()


def test_server_becomes_ready_answers_and_leaves_no_process(tmp_path):
    pids = tmp_path / "pids"
    srv = start_fake(tmp_path, "--fake-delay-s", "0.5", "--fake-child", str(pids))
    t0 = time.monotonic()
    srv.wait_ready(poll_s=0.1)
    assert time.monotonic() - t0 >= 0.4  # /health said 503 until the delay was over
    srv.flush_cache()
    for _ in range(50):
        if pids.exists() and pids.read_text().strip():
            break
        time.sleep(0.05)
    leader, child = map(int, pids.read_text().split())
    assert alive(leader) and alive(child)
    srv.close()
    srv.close()  # twice is fine
    assert not alive(leader) and not alive(child)  # the whole group, the child too


def test_a_server_that_never_gets_ready_times_out_names_its_patches_and_is_ended(tmp_path):
    patches = write_patch(tmp_path / "p", "0001-x.py", '"""X."""\nSERVER_ARGS = {"x": 1}\n')
    port = server.free_port()
    srv = server.Server("candidate", patches, fake("--port", str(port), "--fake-mode", "never"),
                        port=port, limits=server.Limits(1.5, folder=tmp_path)).start()
    pid = srv.pid
    with pytest.raises(PatchgateError, match=r"candidate \(0001-x.py\) was not ready after 2 s"):
        srv.wait_ready(poll_s=0.1)
    assert not alive(pid) and srv.proc is None


def test_a_server_that_exits_at_once_quotes_the_end_of_its_log(tmp_path):
    srv = start_fake(tmp_path, "--fake-mode", "exit")
    with pytest.raises(PatchgateError, match="exited with code 3") as e:
        srv.wait_ready(poll_s=0.1)
    assert "a setting this fake server refuses" in e.value.hint


def test_a_server_that_ignores_sigterm_is_killed(tmp_path):
    srv = start_fake(tmp_path, "--fake-mode", "stubborn", grace=0.5)
    srv.wait_ready(poll_s=0.1)
    pid = srv.pid
    t0 = time.monotonic()
    srv.close()
    assert not alive(pid) and time.monotonic() - t0 < 10


def test_interrupt_while_waiting_ends_the_server(tmp_path):
    """Ctrl-C during the readiness wait: the ``with`` block ends the server."""
    srv = start_fake(tmp_path, "--fake-mode", "never")
    pid = srv.pid
    old = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt), srv:
            srv.wait_ready(poll_s=0.1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not alive(pid)


# ---------------------------------------------------------------- the phase, end to end
def fake_launcher(tmp_path) -> configurations.Launcher:
    """Servers whose tokens take 4 ms, 8 ms when a patch's name says slow; the fake
    bench client."""
    def serve(profile, patches, port, share):
        slow = any("slow" in p.name for p in patches)
        return fake("--port", str(port), "--fake-step-s", "0.008" if slow else "0.004",
                    *(["--fake-kernel", "extra_kernel"] if slow else []))

    def client(srv, scenario, profile, out, seed):
        return [sys.executable, str(FAKE / "fake_bench.py"), "--base-url", srv.url,
                "--num-prompts", str(scenario.num_prompts),
                "--random-input-len", str(scenario.input_len),
                "--random-output-len", str(scenario.output_len),
                *([] if scenario.concurrency is None else
                  ["--max-concurrency", str(scenario.concurrency)]),
                "--seed", str(seed), "--flush-cache", "--output-file", str(out)]

    return configurations.Launcher(server=serve, bench=client, grace_s=5.0)


SERVING_PROFILE = get_profile("h200-default").with_overrides(
    scenarios="serving", rounds=2, warmup=0, max_looks=1, confirm=False, settle_s=0.0,
    serving=Serving(num_prompts=10, input_len=4, output_len=5, startup_timeout_s=30,
                    bench_timeout_s=60))



@pytest.fixture(autouse=True)
def sglang_registry(monkeypatch):
    """SGLang's model registry as the hook reads it (SGLang is not installed on CPU)."""
    from patchgate.engines import sglang_hook

    real = sglang_hook.registry_models
    table = {"MiniCPMForCausalLM": "sglang.srt.models.minicpm:MiniCPMForCausalLM"}
    monkeypatch.setattr(sglang_hook, "registry_models",
                        lambda registry=None: real(table if registry is None else registry))

def test_the_serving_phase_end_to_end_with_fake_servers(tmp_path):
    slow = discover(FIX / "gate" / "slow_decode")
    sets = {"candidate": slow, "current": [], "reference": []}
    lines = []

    out = run_phase(SERVING_PROFILE, sets, fake_launcher(tmp_path), lines)
    res = out.latency
    names = [s.name for s in res.scenarios]
    assert names == ["serving_c1", "serving_c8", "serving_cinf"]
    # two servers (current and reference share one), two rounds each, interleaved
    assert {k: len(v["serving_c1"]) for k, v in res.samples.items()} == \
        {"candidate": 2, "current": 2, "reference": 2}
    assert res.samples["current"] == res.samples["reference"]
    # at concurrency 1 the candidate pays 10 requests x 5 tokens x 4 ms more
    assert min(res.samples["candidate"]["serving_c1"]) > \
        max(res.samples["current"]["serving_c1"]) + 0.1
    assert res.batch_sizes == (1, 8, 10)
    assert sum(res.weights.values()) == pytest.approx(1.0)
    assert any("starting server 2/2 for current+reference" in x for x in lines)

    # TTFT/ITL: medians over the runs, per configuration
    m = out.serving["scenarios"][0]
    assert m["name"] == "serving_c1"
    assert set(m["configurations"]) == {"candidate", "current", "reference"}
    itl = {k: v["median_itl_ms"] for k, v in m["configurations"].items()}
    assert itl["candidate"] > 6 and itl["current"] < 6

    # the verdict's rows and S, and the report's serving section
    acc = {"ratio": 1.0, "candidate": 0.9, "reference": 0.9, "flipped_to_wrong": 0,
           "flipped_to_right": 0, "p_value": 1.0, "n": 10, "per_task": {}, "C": 1.0,
           "threshold": 0.99, "ci_low": 1.0, "ci_high": 1.0}
    passed = AccuracyDecision(outcome="pass", limit=0.99, ratio=1.0, items=10, total=10)
    v = verdict.judge(SERVING_PROFILE, res, acc, passed, compared_with="current baseline")
    assert [r["name"] for r in v["scenarios"]] == names
    assert v["S"]["1"] < 75  # the candidate's c1 takes about twice as long
    v["serving"], v["profile"] = out.serving, "fake"
    text = report.render_terminal(v)
    assert "serving_cinf" in text and "TTFT median" in text and "10x4->5" in text
    assert "the three scenarios together" in text
    md = markdown.render_markdown(v)
    assert "| serving_c1 " in md



@pytest.mark.parametrize("persistent", [True, False], ids=["bench-client", "own-process"])
def test_a_server_that_cuts_requests_short_is_an_error(tmp_path, monkeypatch, persistent):
    monkeypatch.setenv("FAKE_BENCH_SHORT", "1")
    prof = SERVING_PROFILE.with_overrides(rounds=1)
    launcher = dataclasses.replace(fake_launcher(tmp_path), persistent=persistent)
    with pytest.raises(PatchgateError, match=r"tokens in and 40 out, expected 40 and 50"):
        run_phase(prof, {"candidate": [], "current": [], "reference": []}, launcher)


def run_phase(profile, patch_sets, launcher, lines=None):
    """The serving set's latency phase on ``patch_sets``, the step lines into ``lines``."""
    stream = io.StringIO()
    with Configurations(profile, patch_sets) as configs:
        out = phase.ServingSet(launcher).measure(
            sets.Phase(profile=profile, configs=configs,
                       reporter=Reporter(quiet=True, stream=stream)))
        assert not configs.started  # the servers were the set's own; no engine started
    if lines is not None:
        lines += stream.getvalue().splitlines()
    return out


class _NullBar:
    total = 0

    def __enter__(self):
        return self

    def __exit__(self, *a):
        pass

    def update(self, n):
        pass

    def set_postfix_str(self, s):
        pass

    def refresh(self):
        pass


def test_flush_before_every_run_is_counted_by_the_server(tmp_path):
    port = server.free_port()
    srv = server.Server("c", [], fake("--port", str(port)), port=port,
                        limits=server.Limits(folder=tmp_path))
    with srv.start():
        srv.wait_ready(poll_s=0.1)
        srv.flush_cache()
        srv.flush_cache()
        import urllib.request

        with urllib.request.urlopen(srv.url + "/fake_state") as resp:
            assert json.load(resp)["flushes"] == 2


def test_explain_profiles_both_servers_and_names_the_extra_kernel(tmp_path):
    """--explain on the serving set: each slower scenario run once more on the current
    and the candidate server under the server's profiler (/start_profile, /stop_profile);
    the candidate's server launches one extra kernel per token."""
    scen = make_scenarios(SERVING_PROFILE)
    same = {s.name: [1.0 + 0.01 * i for i in range(10)] for s in scen}
    slow = same | {"serving_c1": [2.0 + 0.01 * i for i in range(10)]}
    result = latency.judged({"candidate": slow, "current": same, "reference": same}, scen,
                            SERVING_PROFILE, batch_sizes=batch_sizes(scen))
    sets = {"candidate": discover(FIX / "gate" / "slow_decode"), "current": [],
            "reference": []}
    with configurations.ServingConfigurations(SERVING_PROFILE, sets,
                                     launcher=fake_launcher(tmp_path)) as configs:
        configs.start()
        block = explain.run(configs.profile_one, result, tmp_path / "v.explain")
        assert configs.results == {}  # the profiled runs are not samples
    assert block["folder"] == "v.explain"
    assert [s["name"] for s in block["scenarios"]] == ["serving_c1"]  # the slower one
    first = block["scenarios"][0]
    assert first["why"].startswith("slower: +")
    assert "more `extra_kernel` launches (0 -> " in first["top"][0]
    assert first["top"][0].startswith("+") and first["top"][0].endswith("[gpu]")
    for label in ("current", "candidate"):
        (trace,) = first["files"][label]
        assert (tmp_path / "v.explain" / trace).is_file()


def test_cli_refuses_the_serving_set_where_it_cannot_run(tmp_path, capsys):
    from patchgate.cli import main

    common = ["--baselines", str(tmp_path / "b"), "--changelog", str(tmp_path / "C.md")]
    assert main(["guard", "--scenarios", "serving", *common]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR profile default: the serving scenario set runs SGLang "
                          "servers; this profile's engine is transformers")
    assert "hint: use an SGLang profile" in err
    assert main(["guard", "--profile", "h200-minicpm8b", "--scenarios", "serving",
                 "--accept", *common]) == 2
    assert "--accept: not with the serving scenario set yet" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_serving_items_are_weighted_as_the_contest_weighs_s1_s8_sinf():
    scen = make_scenarios(DUMMY)
    same = {s.name: [1.0 + 0.01 * i for i in range(12)] for s in scen}
    slow = same | {"serving_c8": [1.2 * x for x in same["serving_c8"]]}
    res = latency.judged({"candidate": slow, "current": same, "reference": same}, scen, DUMMY,
                         batch_sizes=batch_sizes(scen))
    assert res.weights == pytest.approx({"serving_c1": 0.4, "serving_c8": 0.3,
                                         "serving_cinf": 0.3})
    d = res.decisions["current"]
    assert list(d) == ["serving_c1", "serving_c8", "serving_cinf", "score"]
    assert d["serving_c8"].outcome == "slower" and d["serving_c1"].outcome != "slower"
    assert d["score"].comparison.ratio == pytest.approx(1.2 ** 0.3, rel=1e-3)
    # 12 paired rounds: a serving scenario's share of alpha is reachable (1/3 of Holm's rest)
    assert budgets.power_notes(12, res.alpha_look, 3) == []
    assert budgets.power_notes(6, res.alpha_look, 3)


def test_commands_to_run_alone_and_their_comparison(tmp_path, capsys):
    from patchgate.tools import serving_alone as commands

    cmds = commands.commands(DUMMY, tmp_path, port=30000)
    assert [c[2] for c in cmds] == ["sglang.launch_server"] + ["sglang.bench_serving"] * 3
    assert cmds[0][cmds[0].index("--mem-fraction-static") + 1] == "0.8"  # the whole GPU
    assert cmds[2][cmds[2].index("--output-file") + 1] == str(tmp_path / "serving_c8.jsonl")
    assert commands.main(["--profile", "h200-minicpm8b-dummy", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and printed[1].startswith("python3 -m sglang.bench_serving")

    verdict_doc = {"serving": {"scenarios": [
        {"name": "serving_c1", "configurations": {"reference": {"duration_s": 24.0}}}]}}
    (tmp_path / "serving_c1.jsonl").write_text(
        "".join(json.dumps({"duration": d}) + "\n" for d in (24.3, 24.6, 24.1)))
    (row,) = commands.compare(verdict_doc, tmp_path)
    assert row == {"name": "serving_c1", "gate_s": 24.0, "alone_s": 24.3, "runs": 3,
                   "ratio": pytest.approx(1.0125)}
    with pytest.raises(PatchgateError, match="no serving block"):
        commands.compare({}, tmp_path)


def test_a_server_dies_with_the_gate_that_started_it(tmp_path):
    """The gate's process killed outright (SIGKILL: no handler, no atexit, no ``with``):
    its server still gets SIGTERM, from the kernel (PR_SET_PDEATHSIG)."""
    import subprocess

    script = "\n".join([
        "import os, signal, sys",
        f"sys.path[:0] = [{str(ROOT / 'src')!r}]",
        "from pathlib import Path",
        "from patchgate.latency.serving import server",
        "port = server.free_port()",
        f"cmd = [sys.executable, {str(FAKE / 'fake_server.py')!r}, '--port', str(port)]",
        f"srv = server.Server('c', [], cmd, port=port, "
        f"limits=server.Limits(folder=Path({str(tmp_path)!r})))",
        "srv.start().wait_ready(poll_s=0.1)",
        "print(srv.pid, flush=True)",
        "os.kill(os.getpid(), signal.SIGKILL)"])
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    pid = int(run.stdout.split()[0])
    for _ in range(100):
        if not alive(pid):
            break
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.slow
def test_the_gate_runs_the_serving_set_then_the_accuracy_guard(tmp_path, monkeypatch):
    """``guard --scenarios serving --explain`` end to end, on CPU: the fake servers and
    bench client stand for SGLang's; the accuracy guard's engines are the default model
    through transformers (loaded after the servers are gone)."""
    from patchgate.engines import factory as engine_start
    from patchgate.engines.isolated import IsolatedEngine
    from patchgate.gate import GuardOptions, run_guard

    live = []

    def load(profile, patches, label, share=1.0):
        assert not server._LIVE, "the servers must be gone before an engine loads"
        live.append(label)
        return IsolatedEngine(profile.with_overrides(engine="transformers", device="cpu",
                                                     dtype="float32"), patches, label)

    monkeypatch.setattr(engine_start, "start", load)
    monkeypatch.setattr(phase, "default_launcher", lambda: fake_launcher(tmp_path))
    prof = SERVING_PROFILE.with_overrides(rounds=10, eval_batch_size=16)
    v = run_guard(GuardOptions(profile=prof, patches_dir=FIX / "gate" / "slow_decode",
                               baselines_dir=tmp_path / "b", changelog=tmp_path / "C.md",
                               quiet=True, json_path=tmp_path / "v.json", explain=True))
    assert [r["name"] for r in v["scenarios"]] == ["serving_c1", "serving_c8", "serving_cinf"]
    c1 = v["scenarios"][0]
    assert c1["outcome"] == "slower" and c1["ratio"] > 1.5 and v["verdict"] == "rejected"
    assert v["S"]["1"] < 70 and set(v["S"]) == {"1", "8", "inf"}
    assert v["measured"]["latency"].startswith("sglang.bench_serving against one server")
    assert set(v["serving"]["scenarios"][0]["configurations"]) == {"candidate", "current",
                                                                   "reference"}
    assert v["accuracy"]["ratio"] == 1.0 and live == ["candidate", "current"]
    # --explain ran on the servers (the fake server's extra kernel), traces beside v.json
    top = next(s for s in v["explain"]["scenarios"] if s["name"] == "serving_c1")["top"]
    assert "more `extra_kernel` launches" in top[0]
    assert (tmp_path / "v.explain" / "serving_c1" / "candidate").is_dir()
    assert not server._LIVE
    saved = json.loads((tmp_path / "v.json").read_text())
    assert saved["serving"] == v["serving"] and saved["verdict"] == "rejected"


@pytest.mark.slow
def test_a_serving_slowdown_is_confirmed_in_freshly_started_servers(tmp_path):
    """Confirmation on (the default), as a real run has it: the slower candidate is found
    slower, its server and the current baseline's are started afresh (and only those),
    and the fresh servers find it slower again."""
    slow = discover(FIX / "gate" / "slow_decode")
    patch_sets = {"candidate": slow, "current": [], "reference": []}
    prof = SERVING_PROFILE.with_overrides(rounds=8, max_looks=2, confirm=True)
    lines = []
    out = run_phase(prof, patch_sets, fake_launcher(tmp_path), lines)
    res = out.latency
    assert res.decisions["current"]["score"].outcome == "slower"
    assert res.confirmation["current"]["score"].outcome == "slower"
    assert res.final("current", "score") == "slower"
    assert res.confirm_looks >= 1 and set(res.confirm_samples) == {"candidate", "current"}
    fresh = [x for x in lines if "(fresh)" in x]
    # current and reference share one server: restarting "current" restarts it, once
    assert len(fresh) == 2 and any("for candidate" in x for x in fresh)
    assert not server._LIVE  # every server, first and fresh, is gone
