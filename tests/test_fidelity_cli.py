"""Fidelity (gate vs sglang.bench_one_batch) and CLI error mapping; no GPU needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchgate import cli, gate
from patchgate.engines.sglang import model_vocab_size
from patchgate.errors import PatchgateError
from patchgate.profile import get_profile
from patchgate.tools import fidelity

ROOT = Path(__file__).resolve().parent.parent


def test_bench_command_mirrors_the_profile(tmp_path):
    prof = get_profile("h200-minicpm8b-dummy")
    cmd = fidelity.bench_command(prof, tmp_path / "r.jsonl", repeats=2)
    assert cmd[1:3] == ["-m", "sglang.bench_one_batch"]
    assert cmd[cmd.index("--batch-size") + 1: cmd.index("--input-len")] == \
        ["1", "8", "64", "1", "8", "64"]
    assert cmd[cmd.index("--input-len") + 1: cmd.index("--output-len")] == ["2048", "128"]
    assert cmd[cmd.index("--load-format") + 1] == "dummy"
    assert "--disable-radix-cache" in cmd
    # one unchunked forward of 64 x 2048 tokens needs room beyond the KV pool
    assert float(cmd[cmd.index("--mem-fraction-static") + 1]) <= 0.7
    # no tokenizer in the dummy folder: bench_one_batch gets the default model's
    assert cmd[cmd.index("--tokenizer-path") + 1].endswith("models/default")
    tiny = fidelity.bench_command(get_profile("h200-default"), tmp_path / "r.jsonl")
    assert "--disable-prefill-cuda-graph" in tiny and "--tokenizer-path" not in tiny


def test_recorded_command_names_no_machine_paths(tmp_path):
    cmd = fidelity.bench_command(get_profile("h200-minicpm8b-dummy"), tmp_path / "r.jsonl")
    shown = fidelity.shown(cmd)
    assert shown[0] == "python" and shown[1:3] == ["-m", "sglang.bench_one_batch"]
    assert shown[shown.index("--model-path") + 1] == "models/minicpm4-8b-dummy"
    assert shown[shown.index("--result-filename") + 1] == "r.jsonl"
    assert not any(a.startswith("/") for a in shown)


def test_bench_rows_map_to_scenarios_and_ratios():
    prof = get_profile("h200-minicpm8b-dummy")
    rows = [{"batch_size": 1, "input_len": 2048, "output_len": 1, "prefill_latency": x,
             "total_latency": x} for x in (0.060, 0.058, 0.059)]
    rows += [{"batch_size": 1, "input_len": 128, "output_len": 256, "prefill_latency": 0.01,
              "total_latency": 1.40}]
    rows += [{"batch_size": 1, "input_len": 2048, "output_len": 256, "prefill_latency": 9,
              "total_latency": 9}]  # the cross combination is ignored
    med = fidelity.bench_medians(rows, prof)
    assert med == {"prefill_b1": 0.059, "decode_b1": 1.40}
    verdict = {"scenarios": [{"name": "prefill_b1", "reference_median_s": 0.0605},
                             {"name": "decode_b1", "reference_median_s": 1.414}]}
    out = fidelity.compare(verdict, med)
    assert [round(r["ratio"], 3) for r in out] == [1.025, 1.01]
    with pytest.raises(PatchgateError, match="decode_b8"):
        fidelity.compare({"scenarios": [{"name": "decode_b8", "reference_median_s": 1}]}, med)


def test_fidelity_refuses_a_verdict_of_another_profile(tmp_path):
    v = tmp_path / "v.json"
    v.write_text(json.dumps({"schema_version": 2, "verdict": "accepted", "reasons": [],
                             "profile": "default", "scenarios": []}))
    with pytest.raises(PatchgateError, match="not 'h200-default'"):
        fidelity.run(get_profile("h200-default"), v, tmp_path / "f.json")


def test_vocab_size_comes_from_the_config():
    assert model_vocab_size(ROOT / "models/minicpm4-8b-dummy") == 73448
    assert model_vocab_size(ROOT / "models/default") == 448
    with pytest.raises(PatchgateError, match="vocab_size"):
        model_vocab_size(ROOT / "models")


def test_an_unexpected_exception_is_an_error_not_a_rejection(tmp_path, monkeypatch, capsys):
    def boom(opts, run=None):
        raise RuntimeError("library bug")

    monkeypatch.setattr(gate, "run_guard", boom)
    out = tmp_path / "v.json"
    code = cli.main(["guard", "--patches", str(tmp_path), "--json", str(out), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unexpected RuntimeError" in err and "library bug" in err
    assert json.loads(out.read_text())["verdict"] == "error"


def test_offline_bench_mirrors_the_gate_inputs(tmp_path):
    from dataclasses import dataclass

    from patchgate.latency.scenarios import make_scenarios, prompt_ids
    from patchgate.tools import bench_offline

    prof = get_profile("h200-minicpm8b-dummy")
    kw = bench_offline.engine_kwargs(prof)
    assert kw["disable_radix_cache"] is True and kw["skip_tokenizer_init"] is True
    assert kw["load_format"] == "dummy" and kw["model_path"].endswith("minicpm4-8b-dummy")
    from patchgate.engines.sglang import server_args
    assert kw == server_args(prof, [])  # the gate's own settings: only the harness differs

    @dataclass
    class Row:  # the fields of SGLang's DatasetRow that throughput_test_once reads
        prompt: list
        prompt_len: int
        output_len: int

    batches = bench_offline.requests(prof, Row)
    scen = {s.name: s for s in make_scenarios(prof)}
    assert set(batches) == set(scen)
    for name, rows in batches.items():
        s = scen[name]
        assert len(rows) == s.batch_size
        assert all(r.prompt_len == s.input_len == len(r.prompt) for r in rows)
        assert all(r.output_len == s.output_len for r in rows)
        # the very token ids the gate measured (same seed, same vocabulary)
        assert [r.prompt for r in rows] == prompt_ids(s, 73448, prof.seed)

    cmd = fidelity.offline_command(prof, tmp_path / "r.jsonl", repeats=5)
    assert cmd[1:3] == ["-m", "patchgate.tools.bench_offline"] and cmd[-2:] == ["--repeats", "5"]
    cmd = fidelity.offline_command(prof, tmp_path / "r.jsonl", batch_params=True)
    assert cmd[-1] == "--batch-params"


class Recorder:
    """Stands in for ``sglang.Engine`` (not installable here): records the call."""

    def generate(self, **kw):
        self.kw = kw
        return []


def test_offline_backend_sends_the_benchmark_call_or_the_gate_call():
    from patchgate.tools.bench_offline import TokenIdBackend

    params = [{"temperature": 0, "max_new_tokens": 4, "ignore_eos": True}] * 3
    prompts = [[1, 2], [3, 4], [5, 6]]
    for batch_params, want in ((False, params), (True, params[0])):
        eng = Recorder()
        TokenIdBackend(eng, batch_params).generate(prompt=prompts, sampling_params=params,
                                                   return_logprob=False)
        assert eng.kw == {"input_ids": prompts, "sampling_params": want,
                          "return_logprob": False}
    mixed = [params[0], dict(params[0], max_new_tokens=5)]
    eng = Recorder()
    TokenIdBackend(eng, True).generate(prompt=prompts[:2], sampling_params=mixed)
    assert eng.kw["sampling_params"] == mixed  # unequal parameters stay per request


def test_offline_rows_map_to_medians():
    rows = [{"scenario": "decode_b8", "total_latency": x} for x in (1.5, 1.4, 1.6)]
    rows += [{"scenario": "prefill_b1", "total_latency": 0.05}]
    assert fidelity.offline_medians(rows) == {"decode_b8": 1.5, "prefill_b1": 0.05}


def test_fidelity_names_the_failing_bench(tmp_path):
    v = tmp_path / "v.json"
    v.write_text(json.dumps({"schema_version": 2, "verdict": "accepted", "reasons": [],
                             "profile": "h200-default", "scenarios": []}))
    with pytest.raises(PatchgateError, match="unknown bench"):
        fidelity.run(get_profile("h200-default"), v, tmp_path / "f.json", bench="nope")
    # no SGLang on this machine: the benchmark process fails and the error names it
    with pytest.raises(PatchgateError, match="patchgate.tools.bench_offline exited with 2"):
        fidelity.run(get_profile("h200-default"), v, tmp_path / "f.json", bench="offline")
