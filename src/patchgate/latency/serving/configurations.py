"""The serving set's configurations: one SGLang server per distinct patch set.

:class:`ServingConfigurations` is the run's
:class:`~patchgate.engines.configurations.Configurations` with servers for engines
(:mod:`.server`), started one after the other with an equal share of the GPU's memory;
it times rounds of ``sglang.bench_serving`` (:mod:`.bench`) in the rotating order of
:func:`patchgate.latency.measure.interleave`, keeps every run's TTFT/ITL, and profiles
one run under SGLang's profiler for ``--explain``. A :class:`Launcher` says how a
server is started and a benchmark run: SGLang's by default, the tests' fake server and
bench client otherwise. The benchmark runs go through one long-lived
:class:`~.client.BenchClient` (bench_serving's imports paid once per phase).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...engines.configurations import Configurations
from ...engines.profiling import sglang_traces, trace_tables
from ...engines.sglang import known_server_args
from ...errors import PatchgateError
from ..measure import Rounds, interleave
from . import bench, server
from .client import BenchClient

# Forward steps one --explain profile covers (SGLang stops its profiler after them):
# the same first steps on both sides (bench_serving's warm-up request, then the
# dataset), and a trace of tens of MB instead of every step of the run.
PROFILE_STEPS = 128


def sglang_server(profile, patches, port: int, share: float) -> list[str]:
    return server.launch_command(profile, patches, port, share, known_server_args())


def sglang_bench(srv: server.Server, scenario, profile, output_file: Path, seed: int
                 ) -> list[str]:
    model = profile.model_path()
    return bench.bench_command(srv.url, scenario, (str(model), str(server.tokenizer_path(model))),
                               seed, output_file)


@dataclass
class Launcher:
    """How a server is started and a benchmark run: SGLang's by default; the tests give
    commands of their own."""

    server: Callable = sglang_server  # (profile, patches, port, share) -> command
    # (server, scenario, profile, output_file, seed) -> command; the seed draws the round's
    # dataset (each round its own, the same for every configuration)
    bench: Callable = sglang_bench
    env: dict[str, str] = field(default_factory=dict)  # added to the servers' environment
    grace_s: float = 15.0  # SIGTERM to SIGKILL
    # the benchmark runs in one long-lived process (imports paid once: .client), or each
    # in a process of its own
    persistent: bool = True


def default_launcher() -> Launcher:
    """SGLang's server and bench_serving (the tests replace this function)."""
    return Launcher()


class ServingConfigurations(Configurations):
    """:class:`~patchgate.engines.configurations.Configurations` whose "engines" are
    servers: the same labels, names and sharing; ``start(labels)`` (re)starts one server
    per distinct patch set of ``labels`` (all by default), each in fresh processes,
    and leaves the others running."""

    def __init__(self, profile, sets, say=lambda _: None, launcher: Launcher | None = None,
                 folder: Path | None = None):
        super().__init__(profile, sets, say)
        self.launcher = launcher or default_launcher()
        self.folder = Path(folder or tempfile.mkdtemp(prefix="patchgate-serving-"))
        self.results: dict[str, dict[str, list[bench.BenchResult]]] = {}
        self.client = BenchClient(self.folder / "bench-client.log") \
            if self.launcher.persistent else None

    def start(self, labels: tuple[str, ...] | None = None) -> None:
        keys = {self.keys[lb] for lb in (labels or self.labels)}
        for key in keys:
            srv = self._engines.pop(key, None)
            if srv is not None:
                srv.close()
        self.starts += 1
        names = self.names()
        for i, name in enumerate(names):
            label = name.split("+")[0]
            if self.keys[label] not in keys:
                continue
            patches = [p for p in self.sets[label] if p.applies_to("sglang")]
            again = " (fresh)" if self.starts > 1 else ""
            self._say(f"starting server {i + 1}/{len(names)} for {name} "
                      f"({len(patches)} patches){again}")
            folder = self.folder / f"{label}-{self.starts}"
            folder.mkdir(parents=True, exist_ok=True)
            port = server.free_port()
            env = server.hook_environment(self.profile, patches, label, folder) | \
                self.launcher.env
            command = self.launcher.server(self.profile, patches, port, 1 / len(names))
            srv = server.Server(name, patches, command, env, port, server.Limits(
                self.profile.serving.startup_timeout_s, self.launcher.grace_s, folder))
            self._engines[self.keys[label]] = srv
            srv.start()
            srv.wait_ready()  # one at a time: each sizes its memory from what is free

    def cleanup(self) -> None:
        if self.client is not None:
            self.client.close()
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def timer(self, servers, scenarios, rounds: Rounds, progress=None):
        """:func:`patchgate.latency.measure.measure` for servers: per round and scenario,
        each server flushed and benchmarked once, the order rotating; ``{name: {scenario:
        [duration seconds]}}``, warm-up rounds thrown away, every run's metrics kept."""
        def call(name, s, r, timed):
            result = self.bench(servers[name], s, _seed(self.profile.seed, rounds.first + r))
            if timed:
                self.results.setdefault(name, {}).setdefault(s.name, []).append(result)
            return result.duration_s

        return interleave(list(servers), scenarios, rounds, call, progress)

    def bench(self, srv: server.Server, scenario, seed: int) -> bench.BenchResult:
        """One bench_serving run of ``scenario`` against ``srv`` on the dataset drawn from
        ``seed``, the cache flushed first."""
        srv.flush_cache()
        out = srv.folder / f"bench-{scenario.name}.jsonl"
        cmd = self.launcher.bench(srv, scenario, self.profile, out, seed)
        return bench.run_bench(cmd, scenario, bench.Run(
            out, srv.describe(), self.profile.serving.bench_timeout_s,
            srv.folder / "bench.log"), self.client)

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
            result = self.bench(srv, scenario, _seed(self.profile.seed, -1))
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


def _seed(seed: int, round_index: int) -> int:
    """bench_serving's ``--seed`` of a round: its own dataset each round (a positive int)."""
    return (seed * 1_000_003 + round_index) % (2**31 - 1)
