"""The serving latency phase: servers per configuration, bench_serving, the decision.

The configurations of the run (candidate, current, best, reference; one server per
distinct patch set) each get an SGLang server (:mod:`.server`), started one after
the other with an equal share of the GPU's memory. Then every round runs
``sglang.bench_serving`` (:mod:`.bench`) once per scenario (concurrency 1, 8,
unlimited) and configuration, the order rotating from round to round as
:func:`patchgate.latency.measure.interleave` does, the cache flushed before each run. A
run's sample is bench_serving's ``duration``. The decision is the static set's own
(:func:`patchgate.latency.looks.run`: paired by round, log ratios of durations, looks,
Holm, the pooled score, confirmation in freshly started servers), with the serving
scenarios weighted as the contest weighs S1, S8 and Sinf; so the verdict's rows are
``serving_c1``, ``serving_c8`` and ``serving_cinf``, and S = 100 x reference
duration / candidate duration (medians over the rounds).

TTFT and ITL medians and 99th percentiles of every run are kept beside the samples
(:func:`metrics`): they describe, the durations decide. With ``--explain`` the
scenarios found slower are run once more on the current and the candidate server
under SGLang's profiler (``/start_profile``, ``/stop_profile``) while the servers
are still up; that run is not a sample.

:class:`ServingSet` is the scenario set ``serving`` (:mod:`patchgate.registry`); its
servers are :class:`.configurations.ServingConfigurations`. Nothing here runs without
SGLang and a GPU except through a ``Launcher`` that starts something else (the tests'
fake server and bench client).
"""

from __future__ import annotations

import statistics

from ...errors import PatchgateError
from .. import explain as explain_mod
from ..looks import Schedule, run
from ..result import LatencyResult
from ..sets import LatencyOutcome, Options, Phase, how
from . import bench
from .configurations import Launcher, ServingConfigurations, default_launcher
from .scenarios import batch_sizes, make_scenarios

WHERE = "sglang.bench_serving against one server per configuration"


class ServingSet:
    """The scenario set ``serving``: its servers start before any engine holds the GPU,
    and all of them are ended before :meth:`measure` returns (errors and Ctrl-C too)."""

    name = "serving"
    stores = False  # the baselines and the history hold the static scenarios

    def __init__(self, launcher: Launcher | None = None):
        self.launcher = launcher

    def check(self, profile, options: Options) -> None:
        """Refuse a run that cannot work, before anything starts: a serving run on another
        engine than SGLang, or with options that need the static set."""
        given = [flag for flag, on in (("--accept", options.accept),
                                       ("--record", options.record),
                                       ("--attribute", options.attribute)) if on]
        if given:
            raise PatchgateError(f"{', '.join(given)}: not with the serving scenario set yet "
                                 "(the baselines and the history hold the six static "
                                 "scenarios)",
                                 hint="run the gate with --scenarios static to accept or record")
        if profile.engine != "sglang":
            raise PatchgateError(
                f"profile {profile.name}: the serving scenario set runs SGLang servers; this "
                f"profile's engine is {profile.engine}",
                hint="use an SGLang profile (h200-minicpm8b, ...) or --scenarios static")
        make_scenarios(profile)  # the settings are valid

    def scenarios(self, profile) -> list:
        return make_scenarios(profile)

    def measure(self, phase: Phase) -> LatencyOutcome:
        """Servers up, rounds, decisions, optional profiles into ``phase.explain_dir``."""
        profile, reporter = phase.profile, phase.reporter
        scenarios = make_scenarios(profile)
        launcher = self.launcher or default_launcher()
        reporter.phase("latency")
        with ServingConfigurations(
                profile, phase.configs.sets, reporter.say, launcher) as configs:
            configs.start()
            result = run(configs, profile, reporter, Schedule(
                scenarios, batch_sizes(scenarios), configs.timer, stands_in=True))
            block = None
            if phase.explain_dir is not None:
                reporter.phase("explain")
                block = explain_mod.run(configs.profile_one, result, phase.explain_dir,
                                        reporter.say)
                if phase.explicit_folder:
                    block["folder"] = str(phase.explain_dir)
            return LatencyOutcome(result, how(WHERE, profile.confirm),
                                  serving=metrics(configs, result), explain=block)


def _summary(runs: list[bench.BenchResult]) -> dict:
    med = statistics.median
    return {"runs": len(runs), "duration_s": med(r.duration_s for r in runs),
            "median_ttft_ms": med(r.median_ttft_ms for r in runs),
            "p99_ttft_ms": med(r.p99_ttft_ms for r in runs),
            "median_itl_ms": med(r.median_itl_ms for r in runs),
            "p99_itl_ms": med(r.p99_itl_ms for r in runs)}


def metrics(configs: ServingConfigurations, result: LatencyResult) -> dict:
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
