"""The serving latency phase: servers per configuration, bench_serving, the decision.

The configurations of the run (candidate, current, best, reference; one server per
distinct patch set) each get an SGLang server (:mod:`.server`), started one after
the other with an equal share of the GPU's memory. Then every round runs
``sglang.bench_serving`` (:mod:`.bench`) once per scenario (concurrency 1, 8,
unlimited) and configuration, the order rotating from round to round as
:mod:`patchgate.measure` does, the cache flushed before each run. A run's sample is
bench_serving's ``duration``. The decision is the static set's own
(:func:`patchgate.latency.run`: paired by round, log ratios of durations, looks,
Holm, the pooled score, confirmation in freshly started servers), with the serving
scenarios weighted as the contest weighs S1, S8 and Sinf; so the verdict's rows are
``serving_c1``, ``serving_c8`` and ``serving_cinf``, and S = 100 x reference
duration / candidate duration (medians over the rounds).

TTFT and ITL medians and 99th percentiles of every run are kept beside the samples
(:func:`metrics`): they describe, the durations decide. With ``--explain`` the
scenarios found slower are run once more on the current and the candidate server
under SGLang's profiler (``/start_profile``, ``/stop_profile``) while the servers
are still up; that run is not a sample.

Nothing here runs without SGLang and a GPU except through a ``Launcher`` that starts
something else (the tests' fake server and bench client).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import explain as explain_mod
from .. import latency as lat
from ..configs import Configurations
from ..engines.sglang import known_server_args
from ..errors import PatchgateError
from ..measure import interleave
from ..profiling import sglang_traces, trace_tables
from . import bench, server
from .scenarios import batch_sizes, make_scenarios

# Forward steps one --explain profile covers (SGLang stops its profiler after them):
# the same first steps on both sides (bench_serving's warm-up request, then the
# dataset), and a trace of tens of MB instead of every step of the run.
PROFILE_STEPS = 128


def sglang_server(profile, patches, port: int, share: float) -> list[str]:
    return server.launch_command(profile, patches, port, share, known_server_args())


def sglang_bench(srv: server.Server, scenario, profile, output_file: Path) -> list[str]:
    model = profile.model_path()
    return bench.bench_command(srv.url, scenario, str(model), str(server.tokenizer_path(model)),
                               profile.seed, output_file)


@dataclass
class Launcher:
    """How a server is started and a benchmark run: SGLang's by default; the tests give
    commands of their own."""

    server: Callable = sglang_server  # (profile, patches, port, share) -> command
    bench: Callable = sglang_bench  # (server, scenario, profile, output_file) -> command
    env: dict[str, str] = field(default_factory=dict)  # added to the servers' environment
    grace_s: float = 15.0  # SIGTERM to SIGKILL


def default_launcher() -> Launcher:
    """SGLang's server and bench_serving (the tests replace this function)."""
    return Launcher()


class ServingConfigurations(Configurations):
    """:class:`~patchgate.configs.Configurations` whose "engines" are servers: the same
    labels, names and sharing; ``start()`` (re)starts one server per distinct patch set."""

    def __init__(self, profile, sets, say=lambda _: None, launcher: Launcher | None = None,
                 folder: Path | None = None):
        super().__init__(profile, sets, say)
        self.launcher = launcher or default_launcher()
        self.folder = Path(folder or tempfile.mkdtemp(prefix="patchgate-serving-"))
        self.results: dict[str, dict[str, list[bench.BenchResult]]] = {}

    def start(self) -> None:
        self.close()
        self.starts += 1
        names = self.names()
        for i, name in enumerate(names):
            label = name.split("+")[0]
            patches = [p for p in self.sets[label] if p.applies_to("sglang")]
            again = " (fresh)" if self.starts > 1 else ""
            self._say(f"starting server {i + 1}/{len(names)} for {name} "
                      f"({len(patches)} patches){again}")
            folder = self.folder / f"{label}-{self.starts}"
            folder.mkdir(parents=True, exist_ok=True)
            port = server.free_port()
            env = server.hook_environment(self.profile, patches, label, folder) | \
                self.launcher.env
            srv = server.Server(name, patches, self.launcher.server(
                self.profile, patches, port, 1 / len(names)), env, port,
                self.profile.serving.startup_timeout_s, self.launcher.grace_s, folder)
            self._engines[self.keys[label]] = srv
            srv.start()
            srv.wait_ready()  # one at a time: each sizes its memory from what is free

    def cleanup(self) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def timer(self, servers, scenarios, rounds, warmup, seed=0, progress=None, settle_s=0.0):
        """:func:`patchgate.measure.measure` for servers: per round and scenario, each
        server flushed and benchmarked once, the order rotating; ``{name: {scenario:
        [duration seconds]}}``, warm-up rounds thrown away, every run's metrics kept."""
        def call(name, s, timed):
            result = self.bench(servers[name], s)
            if timed:
                self.results.setdefault(name, {}).setdefault(s.name, []).append(result)
            return result.duration_s

        return interleave(list(servers), scenarios, rounds, warmup, call, progress, settle_s)

    def bench(self, srv: server.Server, scenario) -> bench.BenchResult:
        """One bench_serving run of ``scenario`` against ``srv``, the cache flushed first."""
        srv.flush_cache()
        out = srv.folder / f"bench-{scenario.name}.jsonl"
        cmd = self.launcher.bench(srv, scenario, self.profile, out)
        return bench.run_bench(cmd, out, scenario, srv.describe(),
                               self.profile.serving.bench_timeout_s, srv.folder / "bench.log")

    def profile_one(self, label: str, scenario, folder: Path) -> dict:
        """One run of ``scenario`` on ``label``'s server under SGLang's profiler
        (``--explain``; not a sample): the GPU kernel table and the trace files."""
        srv = self.engine(label)
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        since = time.time()
        srv.post("/start_profile", {"output_dir": str(folder), "activities": ["CPU", "GPU"],
                                    "num_steps": PROFILE_STEPS})
        try:
            result = self.bench(srv, scenario)
        finally:
            # after num_steps the profiler has stopped itself; an answer other than 200
            # here says so and is no error
            srv.request("/stop_profile")
        traces = sglang_traces(folder, since)
        if not traces:
            raise PatchgateError(f"SGLang server for {srv.describe()}: its profiler wrote no "
                                 f"trace into {folder}",
                                 hint="see the server's log; SGLang writes the trace after "
                                 "/stop_profile")
        tables = trace_tables(traces)
        return {"tables": tables, "wall_s": dict.fromkeys(tables, result.duration_s),
                "files": [p.relative_to(folder).as_posix() for p in traces]}


@dataclass
class Outcome:
    """What the serving phase gives the gate: the latency result (rows of the verdict),
    the TTFT/ITL metrics (:func:`metrics`) and, with ``--explain``, the explanation."""

    latency: lat.LatencyResult
    metrics: dict
    explain: dict | None = None


def check(profile, accept: bool = False, record: bool = False, attribute: bool = False
          ) -> None:
    """Refuse a run that cannot work, before anything starts: an unknown scenario set, a
    serving run on another engine than SGLang, or with options that need the static set."""
    if profile.scenarios not in ("static", "serving"):
        raise PatchgateError(f"profile {profile.name}: unknown scenario set "
                             f"{profile.scenarios!r}",
                             hint="use 'static' (the six scenarios) or 'serving'")
    if profile.scenarios == "static":
        return
    given = [flag for flag, on in (("--accept", accept), ("--record", record),
                                   ("--attribute", attribute)) if on]
    if given:
        raise PatchgateError(f"{', '.join(given)}: not with the serving scenario set yet (the "
                             "baselines and the history hold the six static scenarios)",
                             hint="run the gate with --scenarios static to accept or record")
    if profile.engine != "sglang":
        raise PatchgateError(
            f"profile {profile.name}: the serving scenario set runs SGLang servers; this "
            f"profile's engine is {profile.engine}",
            hint="use an SGLang profile (h200-minicpm8b, ...) or --scenarios static")
    make_scenarios(profile)  # the settings are valid


def run(profile, sets, progress, say, launcher: Launcher | None = None,
        explain_dir: Path | None = None, explicit_folder: bool = False) -> Outcome:
    """The serving phase (see the module docstring): servers up, rounds, decisions,
    optional profiles into ``explain_dir``; every server ended before it returns, on
    errors and Ctrl-C too."""
    check(profile)
    scenarios = make_scenarios(profile)
    with _sigterm_interrupts(), ServingConfigurations(profile, sets, say, launcher) as configs:
        configs.start()
        result = lat.run(configs, profile, progress, say, scenarios=scenarios,
                         batch_sizes=batch_sizes(scenarios), timer=configs.timer)
        block = None
        if explain_dir is not None:
            block = explain_mod.run(configs.profile_one, result, explain_dir, say)
            if explicit_folder:
                block["folder"] = str(explain_dir)
        return Outcome(result, metrics(configs, result), block)


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (a CI job cancelled) ends the phase as Ctrl-C does, servers closed on the
    way out; the previous handler comes back afterwards (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _summary(runs: list[bench.BenchResult]) -> dict:
    med = statistics.median
    return {"runs": len(runs), "duration_s": med(r.duration_s for r in runs),
            "median_ttft_ms": med(r.median_ttft_ms for r in runs),
            "p99_ttft_ms": med(r.p99_ttft_ms for r in runs),
            "median_itl_ms": med(r.median_itl_ms for r in runs),
            "p99_itl_ms": med(r.p99_itl_ms for r in runs)}


def metrics(configs: ServingConfigurations, result: lat.LatencyResult) -> dict:
    """The ``serving`` block of the verdict: the dataset, and per scenario and label the
    medians over the runs of bench_serving's duration, TTFT and ITL (median and p99)."""
    sv = configs.profile.serving
    out = {"bench": "sglang.bench_serving --backend sglang --dataset-name random-ids "
                    "--tokenize-prompt --random-range-ratio 1.0 --request-rate inf "
                    "--flush-cache (ignore_eos; radix cache off)",
           "num_prompts": sv.num_prompts, "input_len": sv.input_len,
           "output_len": sv.output_len, "seed": configs.profile.seed,
           "S": "100 x reference duration / candidate duration (medians over the rounds)",
           "scenarios": []}
    for s in result.scenarios:
        per = {label: _summary(configs.results[configs.name(label)][s.name])
               for label in configs.labels if configs.results.get(configs.name(label), {})
               .get(s.name)}
        out["scenarios"].append({"name": s.name, "concurrency": s.concurrency,
                                 "configurations": per})
    return out
