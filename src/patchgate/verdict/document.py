"""The verdict document: its schema, its version, and the one way to read it.

A guard run's outcome is one JSON document (:class:`Verdict`), written by ``guard
--json`` and rendered by the reports. This module owns it:

- the schema (the typed dicts below) and :data:`SCHEMA_VERSION`;
- :func:`assemble`, the only place a verdict is put together, once, from the
  judgement (:mod:`patchgate.verdict.judge`) and what the run knows beside it
  (:class:`Facts`); nothing changes it afterwards;
- :func:`load`, which every reader goes through (report, table, plot, fidelity, the
  serving commands): it refuses a file of another version and says what to do.

The flipped items beside a verdict (``<verdict>.flips.jsonl``) are a file of their own,
versioned too: :mod:`patchgate.store.flips`.

``verdict``: accepted | rejected | inconclusive | skipped | error. Versions 1 (before
outcomes and the latency block), 2 (before "inconclusive", "not slower", the run's noise
and fresh inputs) and 3 are read; version 1 renders with its marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from ..errors import PatchgateError
from ..files import read_json

SCHEMA_VERSION = 3
READABLE = (1, 2, 3)
KIND = "patchgate.verdict"
REQUIRED = ("schema_version", "verdict", "reasons", "scenarios")
HINT = "pass a file written by `patchgate guard --json`"


class Confirmation(TypedDict, total=False):
    """An item found slower, measured again in fresh engine processes; for a scenario,
    ``samples_s``: the seconds of each round there, per configuration, paired by index."""

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    outcome: str
    rounds: int
    samples_s: dict[str, list[float]]


class Row(TypedDict, total=False):
    """One scenario. ``ratio`` (candidate / current, > 1 slower) is the Hodges-Lehmann
    estimate from paired rounds (with the t-test: the mean log ratio's), with its
    ``ci_low``..``ci_high`` interval at level
    1 - 2 ``alpha``; ``p_value`` is the one-sided p for "slower" of the profile's test
    (``latency.test``: signed-rank, or the paired t-test).
    ``outcome``: slower | faster | equivalent | undecided (the final one: a slowdown
    that fresh processes do not repeat is undecided). ``detectable``: the smallest
    change this row could have detected. ``samples_s``: the seconds of every round,
    candidate and current baseline, paired by index (with ``repeats``, a round's
    sample is the mean of its calls): every number of the row can be recomputed."""

    name: str
    phase: str
    batch_size: int
    input_len: int
    output_len: int
    median_s: float
    baseline_median_s: float
    reference_median_s: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    alpha: float
    outcome: str
    mark: str
    regressed: bool
    improved: bool
    detectable: float
    rounds: int
    looks: int
    samples_s: dict[str, list[float]]
    confirmation: Confirmation | None


class Pooled(TypedDict):
    """The score item: per round, the score-weighted mean of the six log ratios.
    ``score_change`` = 1 / ratio - 1 (-0.08: the score drops by 8 %)."""

    against: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    outcome: str
    score_change: float
    detectable: float
    rounds: int
    confirmation: Confirmation | None


class Latency(TypedDict):
    """How latency was decided: the threshold, alpha and its split, the looks."""

    threshold: float
    alpha: float
    alpha_look: float
    max_looks: int
    looks: int
    confirm_looks: int
    confirm_rounds: int  # rounds a look in the fresh processes (0: no confirmation)
    confirm_alpha: float | None  # the level of each of their tests
    pairing: str
    test: NotRequired[str]  # the test of every look: "signed-rank" or "t" (stats.paired_t)
    weights: dict[str, float]
    score: Pooled
    best: Pooled | None
    noise: float | None  # robust SD of the score-weighted per-round log ratios
    # the one scenario the fresh processes measured alone first (confirm_strongest):
    # item, ratio, p_value, outcome, rounds, alpha; None where they measured every item
    alone: NotRequired[dict | None]
    inputs: str  # how the token ids were drawn
    # with --ray: the nodes, their class and every block of rounds (patchgate.spread.latency)
    spread: NotRequired[dict]


class Verdict(TypedDict, total=False):
    """The verdict document. ``verdict``: accepted | rejected | inconclusive | skipped |
    error; ``reasons``: one sentence per failed check (for inconclusive: what could not
    be shown, and what a re-run would need); ``scenarios``: :class:`Row` s; ``latency``:
    :class:`Latency`; ``accuracy``: see :func:`patchgate.verdict.judge.accuracy_block`;
    and from the run (:class:`Facts`): ``profile``, ``patches``, ``new_patches``,
    ``environment``, ``workload``, ``measured``, ``notes``, ``history`` (change
    points), ``calibration`` (measured error rates) and ``timings_s`` (seconds per
    phase: validate, baselines, probe, engines, latency, confirm_engines, confirm,
    explain, accuracy_candidate, accuracy_reference, accuracy, attribution; and
    ``total``, the run's wall time up to its judgement)."""

    kind: str
    schema_version: int
    profile: str
    patches: dict
    new_patches: list[str]
    environment: dict
    workload: dict
    measured: dict
    notes: list[str]
    history: dict
    calibration: dict | None
    timings_s: dict[str, float]
    verdict: str
    reasons: list[str]
    score: float | None
    S: dict[str, float] | None
    C: float | None
    accuracy: dict | None
    scenarios: list[Row]
    latency: Latency
    allowed_slower: dict  # {"reason": the maintainer's, "slowdowns": [what was found]}
    attribution: list[dict]  # --attribute: per new patch, its prefix's effect (descriptive)
    serving: dict  # --scenarios serving: the dataset, TTFT/ITL per scenario and configuration
    explain: dict  # --explain: per slower scenario, the profiles' largest differences
    base: dict  # the stored state judged against: ref, commit, differs, note (store.base)
    profile_source: dict  # the profile's file, sha256, builtin, overrides (profile.origin)


@dataclass
class Facts:
    """What the run knows beside the judgement, for the document: the patch records of
    each configuration, the new patches, the environment and workload fingerprints,
    how each side was measured, notes, history change points, the calibration quote,
    the phase timings, and the blocks of optional parts (``serving``, ``explain``,
    ``attribution``, ``flips_file``...)."""

    profile: str
    patches: dict = field(default_factory=dict)
    new_patches: list = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    history: dict | None = None
    calibration: dict | None = None
    timings_s: dict = field(default_factory=dict)
    blocks: dict = field(default_factory=dict)


def assemble(judgement: dict, facts: Facts) -> Verdict:
    """The verdict: the judgement's checks and score, and the run's facts. Built once."""
    doc: Verdict = dict(judgement)  # type: ignore[assignment]
    doc.update({"kind": KIND, "schema_version": SCHEMA_VERSION, "profile": facts.profile,
                "patches": facts.patches, "new_patches": list(facts.new_patches),
                "environment": facts.environment, "workload": facts.workload,
                "measured": facts.measured, "notes": list(facts.notes),
                "history": facts.history or {"change_points": []},
                "calibration": facts.calibration, "timings_s": dict(facts.timings_s)})
    doc.update({k: v for k, v in facts.blocks.items() if v is not None})
    return doc


def _without(profile: str, status: str, reason: str, notes: list[str]) -> Verdict:
    return {"kind": KIND, "schema_version": SCHEMA_VERSION, "profile": profile,
            "verdict": status, "reasons": [reason], "score": None, "S": None, "C": None,
            "accuracy": None, "scenarios": [], "notes": list(notes)}


def skipped(profile: str, reason: str, notes: list[str] = ()) -> Verdict:
    """A run with nothing to test (every new patch is for another engine). Not tested
    is not accepted: ``skipped`` (exit 0), nothing measured."""
    return _without(profile, "skipped", reason, list(notes))


def error(profile: str, message: str) -> Verdict:
    """The document of a run that ended in an error (no numbers)."""
    return _without(profile, "error", message, [])


def check(doc: object, where: str) -> Verdict:
    """``doc`` as a verdict of a readable version, or an error naming ``where``."""
    if not isinstance(doc, dict):
        raise PatchgateError(f"{where}: not a verdict file (not a JSON object)", hint=HINT)
    version = doc.get("schema_version")
    if "schema_version" in doc and version not in READABLE:
        newer = isinstance(version, int) and not isinstance(version, bool) and \
            version > SCHEMA_VERSION
        raise PatchgateError(
            f"{where}: verdict schema_version {version!r}; this patchgate reads "
            f"{', '.join(map(str, READABLE))}",
            hint="upgrade patchgate to read it" if newer else
            "re-run `patchgate guard --json` to write it again with this version")
    for key in REQUIRED:
        if key not in doc:
            raise PatchgateError(f"{where}: not a verdict file (no {key!r})", hint=HINT)
    if doc.get("kind", KIND) != KIND:
        raise PatchgateError(f"{where}: kind {doc.get('kind')!r}, not a verdict", hint=HINT)
    return doc  # type: ignore[return-value]


def load(path: Path) -> Verdict:
    """The verdict stored at ``path``: any reader's way in."""
    return check(read_json(Path(path), hint=HINT), str(path))
