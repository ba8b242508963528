"""``sglang.bench_serving`` against one server: its command line, a run, its result.

One run sends the scenario's dataset: ``num_prompts`` requests of exactly
``input_len`` token ids (``--dataset-name random-ids --tokenize-prompt
--random-range-ratio 1.0``: ids, not text, so no tokenizer round trip changes a
length; the same ids for every configuration, drawn from ``--seed``), each asked for
exactly ``output_len`` tokens (EOS ignored, bench_serving's default for the sglang
backend), all sent at once (``--request-rate inf``) with at most ``concurrency`` in
flight (no ``--max-concurrency`` for unlimited), after one short warm-up request and
a cache flush (``--flush-cache``). The radix cache is off on the server.

bench_serving appends one JSON line per run to ``--output-file``; :class:`BenchResult`
holds what the gate uses from it: ``duration`` (the contest's number: from the first
request sent to the last answer), the request count, the token totals (checked: a
server that ends requests early is an error, not a fast server), and the TTFT and
ITL (inter-token latency) medians and 99th percentiles in milliseconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ...errors import PatchgateError
from .server import log_tail, stop_group


def bench_command(base_url: str, scenario, served: tuple[str, str], seed: int,
                  output_file: Path, python: str = sys.executable) -> list[str]:
    """The ``python -m sglang.bench_serving`` command of one scenario against one server
    of ``served`` = (model folder, tokenizer folder)."""
    model, tokenizer = served
    cmd = [python, "-m", "sglang.bench_serving", "--backend", "sglang",
           "--base-url", base_url, "--model", model, "--tokenizer", tokenizer,
           "--dataset-name", "random-ids", "--tokenize-prompt",
           "--num-prompts", str(scenario.num_prompts),
           "--random-input-len", str(scenario.input_len),
           "--random-output-len", str(scenario.output_len),
           "--random-range-ratio", "1.0", "--request-rate", "inf"]
    if scenario.concurrency is not None:
        cmd += ["--max-concurrency", str(scenario.concurrency)]
    cmd += ["--seed", str(seed), "--warmup-requests", "1", "--flush-cache", "--disable-tqdm",
            "--output-file", str(output_file)]
    return cmd


@dataclass(frozen=True)
class BenchResult:
    """One bench_serving run: seconds for the whole dataset, and per-token latencies (ms)."""

    duration_s: float
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    median_ttft_ms: float
    p99_ttft_ms: float
    median_itl_ms: float
    p99_itl_ms: float
    median_e2e_ms: float

    def record(self) -> dict:
        return asdict(self)


def parse_result(path: Path, scenario, who: str) -> BenchResult:
    """The last line of bench_serving's JSONL output, checked against the scenario: every
    request completed, exactly the requested tokens in and out."""
    try:
        lines = [x for x in Path(path).read_text().splitlines() if x.strip()]
        doc = json.loads(lines[-1])
    except (OSError, ValueError, IndexError) as e:
        raise PatchgateError(f"bench_serving against {who} wrote no result to {path} ({e})",
                             hint="see its output above; is the server still up?") from None
    try:
        result = BenchResult(
            duration_s=float(doc["duration"]), completed=int(doc["completed"]),
            total_input_tokens=int(doc["total_input_tokens"]),
            total_output_tokens=int(doc["total_output_tokens"]),
            median_ttft_ms=float(doc["median_ttft_ms"]), p99_ttft_ms=float(doc["p99_ttft_ms"]),
            median_itl_ms=float(doc["median_itl_ms"]), p99_itl_ms=float(doc["p99_itl_ms"]),
            median_e2e_ms=float(doc.get("median_e2e_latency_ms", "nan")))
    except (KeyError, TypeError, ValueError) as e:
        raise PatchgateError(f"bench_serving result {path}: missing or bad field {e}",
                             hint="a bench_serving of another version? patchgate reads "
                             "duration, completed, total_*_tokens, median/p99 ttft and itl"
                             ) from None
    n = scenario.num_prompts
    if result.completed != n:
        raise PatchgateError(f"bench_serving against {who}: {result.completed} of {n} requests "
                             f"completed ({scenario.name})",
                             hint="the server failed requests; see its log")
    expected = (n * scenario.input_len, n * scenario.output_len)
    got = (result.total_input_tokens, result.total_output_tokens)
    if got != expected:
        raise PatchgateError(
            f"bench_serving against {who} ({scenario.name}): {got[0]} tokens in and {got[1]} "
            f"out, expected {expected[0]} and {expected[1]}",
            hint="every request must have exactly the scenario's lengths (ignore_eos, "
                 "random-range-ratio 1.0); check the server's settings")
    if not result.duration_s > 0:
        raise PatchgateError(f"bench_serving against {who}: duration {result.duration_s}",
                             hint="a run takes time; see its output")
    return result


@dataclass(frozen=True)
class Run:
    """One bench_serving run's files and limits: its JSONL ``output_file``, the server it
    runs against (``who``, for messages), ``timeout_s``, the ``log`` of its output and
    the environment (None: this process's)."""

    output_file: Path
    who: str
    timeout_s: float
    log: Path
    env: dict | None = None


def run_bench(cmd: list[str], scenario, run: Run, client=None) -> BenchResult:
    """Run one bench_serving command and read its result; an error if it fails or runs
    past ``run.timeout_s``. Through ``client`` (a
    :class:`~patchgate.latency.serving.client.BenchClient`) when it can run the command,
    else in a process group of its own, output to ``run.log`` either way."""
    output_file, who, timeout_s, log = Path(run.output_file), run.who, run.timeout_s, run.log
    output_file.unlink(missing_ok=True)  # bench_serving appends: one run, one line
    if client is not None and client.can_run(cmd, run.env):
        code = client.run(cmd, log, timeout_s)
    else:
        code = _own_process(cmd, run)
    if code is None:
        raise PatchgateError(f"bench_serving against {who} ({scenario.name}) ran past "
                             f"{timeout_s:.0f} s", hint=f"its output:\n{log_tail(log)}")
    if code != 0:
        raise PatchgateError(f"bench_serving against {who} ({scenario.name}) exited with code "
                             f"{code}", hint=f"its output:\n{log_tail(log)}")
    return parse_result(output_file, scenario, who)


def _own_process(cmd: list[str], run: Run) -> int | None:
    """``cmd`` in its own process group: its exit code, None past ``run.timeout_s``."""
    with open(run.log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=run.env, start_new_session=True)
        try:
            return proc.wait(run.timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            if proc.poll() is None:  # past its limit, Ctrl-C or another error while it ran
                stop_group(proc, 5)
