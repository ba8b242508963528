"""The static scenario set: the six scenarios, timed on the run's loaded engines.

prefill (long input, short output) and decode (short input, long output) at batch
size 1, 8 and 64 (the profile's ``lengths`` and ``batch_sizes``); one engine per
configuration, started here and kept for the accuracy guard. ``--explain`` profiles
the scenarios found slower in those engines.
"""

from __future__ import annotations

import dataclasses

from ..errors import PatchgateError
from . import explain, looks
from .scenarios import make_scenarios
from .sets import LatencyOutcome, Options, Phase, how


class StaticSet:
    name = "static"
    stores = True

    def check(self, profile, options: Options) -> None:
        if not profile.batch_sizes:
            raise PatchgateError(f"profile {profile.name}: batch_sizes is empty",
                                 hint="e.g. batch_sizes = [1, 8, 64]")

    def scenarios(self, profile) -> list:
        return make_scenarios(profile)

    def measure(self, phase: Phase) -> LatencyOutcome:
        prof, configs, reporter = phase.profile, phase.configs, phase.reporter
        reporter.phase("engines")
        configs.start()
        reporter.phase("latency")
        schedule = looks.Schedule.static(prof)
        where = "measured now"
        bench = configs.latency_bench
        if bench is not None:  # on the cluster's nodes, a block of rounds each
            schedule = dataclasses.replace(schedule, timer=bench.measure)
            where = f"measured now on {len(bench.nodes)} Ray node(s), every round on one"
        result = looks.run(configs, prof, reporter, schedule)
        block = None
        if phase.explain_dir is not None:
            reporter.phase("explain", "explain: profiling the slower scenarios")
            block = explain.in_engines(configs, result, prof.seed, phase.explain_dir,
                                       reporter.say, phase.explicit_folder)
        return LatencyOutcome(result, how(where, prof.confirm), explain=block)
