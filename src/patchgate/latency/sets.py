"""Scenario sets: what the latency phase measures, and how.

A scenario set is a small protocol (:class:`ScenarioSet`), registered by name in
:mod:`patchgate.registry` (``SCENARIO_SETS``): ``static``, the six scenarios on the
run's loaded engines (:mod:`.static`), and ``serving``, ``sglang.bench_serving``
against one server per configuration (:mod:`.serving.phase`). Every set ends in the
same paired decision (:func:`patchgate.latency.looks.run`), so the verdict reads any
of them alike; a new set is one module and one registry line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import registry
from ..engines.configurations import Configurations
from ..profile import Profile
from .result import LatencyResult


@dataclass(frozen=True, kw_only=True)
class Options:
    """The run's options a scenario set may refuse before anything starts."""

    accept: bool = False
    record: bool = False
    attribute: bool = False
    explain: bool = False


@dataclass(kw_only=True)
class Phase:
    """What a scenario set measures with: the profile, the run's configurations (their
    engines not started yet), the reporter, and where ``--explain`` traces go (None:
    no ``--explain``; ``explicit_folder``: the report names the folder in full)."""

    profile: Profile
    configs: Configurations
    reporter: object  # patchgate.report.console.Reporter (a stage above: not imported)
    explain_dir: Path | None = None
    explicit_folder: bool = False


@dataclass
class LatencyOutcome:
    """What a scenario set gives the verdict: the latency result, how it was measured
    (one sentence), and the set's own blocks (``serving``: TTFT/ITL; ``explain``)."""

    latency: LatencyResult
    how: str
    serving: dict | None = None
    explain: dict | None = None


class ScenarioSet(Protocol):
    name: str
    stores: bool  # its results can be accepted and recorded (the baselines hold them)

    def check(self, profile: Profile, options: Options) -> None:
        """Refuse, before anything starts, a run this set cannot do."""

    def scenarios(self, profile: Profile) -> list:
        """The scenarios (objects with ``name``, ``batch_size``, ``record()``)."""

    def measure(self, phase: Phase) -> LatencyOutcome:
        """The latency phase. It may start the configurations' engines (the static set
        does) or run its own processes and end them before it returns (serving)."""


def get(name: str) -> ScenarioSet:
    """The scenario set registered as ``name``."""
    return registry.create("scenarios", name)


HOW = ("side by side, rounds interleaved and counterbalanced, paired by round")


def how(where: str, confirm: bool) -> str:
    """The verdict's sentence on how latency was measured."""
    again = "; slowdowns measured again in fresh engine processes" if confirm else ""
    return f"{where}, {HOW}{again}"
