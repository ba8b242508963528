"""The bench client: benchmark commands run one after another in one process."""

import json
import sys

import pytest

from patchgate.errors import PatchgateError
from patchgate.latency.serving import bench
from patchgate.latency.serving.client import TIMED_OUT, BenchClient

SCRIPT = """
import os, sys, time
mode = sys.argv[1]
print("pid", os.getpid(), "argv", sys.argv[1:], flush=True)
if mode == "exit3":
    sys.exit(3)
if mode == "raise":
    raise ValueError("planted")
if mode == "sleep":
    time.sleep(30)
if mode == "imports":
    print("loaded before", "json" in sys.modules and "patchgate_probe_mod" in sys.modules)
    import patchgate_probe_mod  # noqa: F401
"""


@pytest.fixture
def script(tmp_path, monkeypatch):
    (tmp_path / "patchgate_probe_mod.py").write_text("X = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    path = tmp_path / "job.py"
    path.write_text(SCRIPT)
    return path


def test_runs_share_one_process_and_keep_their_imports(script, tmp_path):
    log = tmp_path / "run.log"
    with BenchClient(tmp_path / "client.log") as client:
        assert client.run([sys.executable, str(script), "imports"], log, 30) == 0
        assert client.run([sys.executable, str(script), "imports"], log, 30) == 0
        assert client.starts == 1
    lines = log.read_text().splitlines()
    pids = {x.split()[1] for x in lines if x.startswith("pid")}
    assert len(pids) == 1
    assert [x for x in lines if x.startswith("loaded")] == ["loaded before False",
                                                           "loaded before True"]


def test_exit_codes_and_failures_are_the_commands_own(script, tmp_path):
    log = tmp_path / "run.log"
    with BenchClient(tmp_path / "client.log") as client:
        assert client.run([sys.executable, str(script), "exit3"], log, 30) == 3
        assert client.run([sys.executable, str(script), "raise"], log, 30) == 1
        assert client.run([sys.executable, str(script), "ok"], log, 30) == 0
        assert client.starts == 1  # a failed command leaves the runner up
    text = log.read_text()
    assert "ValueError: planted" in text and "argv ['ok']" in text


def test_a_module_command_runs_as_python_dash_m(tmp_path, monkeypatch):
    (tmp_path / "mod_job.py").write_text(
        "import sys\nprint('main', __name__, sys.argv[1:])\nsys.exit(0)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    log = tmp_path / "run.log"
    with BenchClient(tmp_path / "client.log") as client:
        assert client.run([sys.executable, "-m", "mod_job", "--x", "1"], log, 30) == 0
    assert "main __main__ ['--x', '1']" in log.read_text()


def test_a_run_past_its_limit_ends_the_runner_and_the_next_starts_fresh(script, tmp_path):
    log = tmp_path / "run.log"
    with BenchClient(tmp_path / "client.log", grace_s=1) as client:
        assert client.run([sys.executable, str(script), "sleep"], log, 1.5) is TIMED_OUT
        assert client.run([sys.executable, str(script), "ok"], log, 30) == 0
        assert client.starts == 2


def test_only_this_interpreters_commands_in_this_environment(tmp_path):
    client = BenchClient(tmp_path / "client.log")
    assert client.can_run([sys.executable, "x.py"], None)
    assert not client.can_run(["/bin/echo", "x"], None)
    assert not client.can_run([sys.executable, "x.py"], {"A": "1"})


def test_run_bench_reads_the_result_through_the_client(tmp_path):
    class Scenario:
        name, num_prompts, input_len, output_len = "serving_c1", 2, 3, 4

    out = tmp_path / "out.jsonl"
    doc = {"duration": 1.5, "completed": 2, "total_input_tokens": 6, "total_output_tokens": 8,
           "median_ttft_ms": 1, "p99_ttft_ms": 2, "median_itl_ms": 3, "p99_itl_ms": 4}
    writer = tmp_path / "writer.py"
    writer.write_text(f"import sys\nopen(sys.argv[1], 'a').write({json.dumps(doc)!r} + '\\n')\n")
    failing = tmp_path / "failing.py"
    failing.write_text("print('no server'); raise SystemExit(2)\n")
    run = bench.Run(out, "candidate", 30, tmp_path / "bench.log")
    with BenchClient(tmp_path / "client.log") as client:
        got = bench.run_bench([sys.executable, str(writer), str(out)], Scenario, run, client)
        assert got.duration_s == 1.5
        with pytest.raises(PatchgateError, match="exited with code 2") as err:
            bench.run_bench([sys.executable, str(failing)], Scenario, run, client)
        assert "no server" in err.value.hint
