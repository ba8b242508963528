"""Profiles: everything one gate run needs to know, with defaults written once.

A profile names the model, the engine and its settings, the scenario lengths, the
accuracy guard and the thresholds. The dataclasses below are the only place defaults
live; the profiles themselves are TOML files (``profiles/<name>.toml``, or any file
given by path), read and checked by :mod:`patchgate.profile.load`. Paths in a profile
are relative to the repository root (:func:`repo_root`). The engine, the scenario set
and the guard are names of :mod:`patchgate.registry`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

BATCH_SIZES = (1, 8, 64)  # they stand for S1, S8 and Sinf (patchgate.stats.score)
PHASES = ("prefill", "decode")


def scenario_name(phase: str, batch_size: int) -> str:
    """A static scenario's name, ``prefill_b8``: what reports, verdicts and a profile's
    ``repeats`` call it."""
    return f"{phase}_b{batch_size}"


@dataclass(frozen=True)
class Lengths:
    """Token lengths of the two phases (every request of a batch has exactly these)."""

    prefill_input: int
    prefill_output: int
    decode_input: int
    decode_output: int


@dataclass(frozen=True)
class Thresholds:
    accuracy_reject: float = 0.99  # relative accuracy below this rejects
    c_low: float = 0.97  # C = 0 below, linear up to c_high
    c_high: float = 0.99
    # A scenario (or the pooled score) is slower if its paired ratio is above 1 + latency
    # AND significantly above 1 (Holm over the seven items) at ``alpha`` overall: the
    # false-alarm rate of a run, split over its looks (patchgate.latency).
    latency: float = 0.05
    alpha: float = 0.05


@dataclass(frozen=True)
class Sequential:
    """The accuracy guard's early stop (patchgate.guard.sequential): items in a seeded
    order stratified over the tasks, a confidence sequence for the full-set ratio after
    each block, and a stop as soon as it lies wholly on one side of accuracy_reject."""

    full: bool = False  # evaluate every item (--full-accuracy)
    # The allowed rate of early decisions that the full set would reverse.
    delta: float = 0.01
    block: int = 16  # items of the first look
    growth: float = 1.25  # each later look sees this many times the items (fewer lm-eval runs)
    # skip a look unless its interval, predicted from the last one, could clear the limit
    # within this factor (patchgate.stats.schedule); 0 looks at every point
    skip_margin: float = 0.25


@dataclass(frozen=True)
class Serving:
    """The serving scenario set (``Profile.scenarios = "serving"``): the contest's own
    measurement. Each configuration runs as an SGLang server; ``sglang.bench_serving``
    sends the same fixed dataset (``num_prompts`` requests of exactly ``input_len``
    random token ids, each asked for exactly ``output_len`` tokens, EOS ignored, cache
    flushed) at each of ``concurrencies`` (None: unlimited, every request at once).
    S at a concurrency = 100 x reference duration / candidate duration."""

    num_prompts: int = 16
    input_len: int = 1024
    output_len: int = 256
    concurrencies: tuple[int | None, ...] = (1, 8, None)
    startup_timeout_s: float = 900.0  # a server not ready (GET /health) by then is an error
    bench_timeout_s: float = 1800.0  # one bench_serving run


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    model: str  # a folder (relative to the repo root or absolute)
    engine: str  # a name of patchgate.registry.ENGINES
    lengths: Lengths
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None  # CPU threads (transformers); None: one per free core
    engine_args: dict = field(default_factory=dict)  # engine settings (SGLang ServerArgs)
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    rounds: int = 10  # timed rounds per configuration and scenario
    warmup: int = 1  # thrown-away rounds before timing
    # Warm-up calls generate at most this many tokens (None: the scenario's own output):
    # each scenario's prefill shape and decode batch still run once before timing, the
    # long decode does not (on an H100 only an engine's very first call paid anything,
    # docs/gpu-runs/2026-12-06c; a whole warm-up round was about 19 s a look there).
    warmup_tokens: int | None = None
    # {scenario name: k}: a sample of that scenario is the mean of k back-to-back calls,
    # each on token ids of its own. For calls so short that their jitter rules the score's
    # noise (prefill 1 x 2048 took 54 ms on an H100, its rounds 6 % apart, the decodes
    # 1-2 %): k calls cost little and cut that jitter by about sqrt(k).
    repeats: dict = field(default_factory=dict)
    # Scenarios whose every timed sample follows one untimed call of the same scenario on
    # the same engine (fresh ids): the sample then never starts cold after the other
    # configuration's calls. On an H200 (docs/gpu-runs/2026-12-07f) the configuration
    # timed second in a round was 2-3 % slower at prefill_b1, an order effect that
    # widened the intervals; an experiment so far (docs/gpu-runs/profiles).
    primed: tuple[str, ...] = ()
    # The budget of an undecided comparison: at most this many looks of ``rounds``
    # rounds each (the first included); every look tests at alpha / max_looks.
    max_looks: int = 3
    # A slowdown counts only if fresh engine processes find it too (patchgate.latency):
    # a steady per-process difference is not a change.
    confirm: bool = True
    # The confirmation replicates a slowdown the first processes found at alpha: each of
    # its looks measures ``confirm_rounds`` rounds (None: ``rounds``), and its tests run
    # at alpha / (comparisons it tests x ``confirm_looks``) (None: ``max_looks``). The
    # rounds are raised, with a note, to the fewest that can decide the pooled score at
    # that level (patchgate.latency.looks): a confirmation that cannot confirm would
    # accept every slowdown.
    confirm_rounds: int | None = None
    confirm_looks: int | None = None
    # Measure one scenario alone first: the one where the first processes' slowdown
    # stands out most (patchgate.latency.budgets.strongest), with the fewest rounds that
    # can decide it at half the confirmation's level. Slower again: the rejection stands
    # on it, and nothing else is re-measured. Else every item found slower is measured,
    # at the other half. On a GPU one decode scenario costs a sixth of the calls.
    confirm_strongest: bool = False
    # The test of every latency look (patchgate.stats.paired_t): "signed-rank" (no
    # assumption on the noise's shape; n rounds reach p = 2^-n at best, so a look needs
    # as many rounds as its level asks) or "t" (Student's t on the same log ratios: 3 or
    # 4 rounds decide where a round's noise is small against the threshold). Its error
    # rates are what `patchgate calibrate` measures on the profile.
    test: str = "signed-rank"
    settle_s: float = 0.01  # pause before each timed call (patchgate.latency.measure)
    # A call into a transformers worker that has not answered after this long (a
    # patch that hangs) ends the run with an error; a call here takes seconds.
    call_timeout_s: float = 600.0
    # A patch's module-level code runs once in a scratch process (patchgate.patches.probe,
    # `check` and `guard`); an import that has not returned after this long is an error
    # naming the patch. Module-level code only defines things: seconds, not minutes.
    import_timeout_s: float = 60.0
    tasks: tuple[str, ...] = ("default_suite",)
    task_path: str = "guards/tasks"
    guard: str = "lm_eval"  # a name of patchgate.registry.GUARDS
    eval_batch_size: int = 16
    thresholds: Thresholds = field(default_factory=Thresholds)
    sequential: Sequential = field(default_factory=Sequential)
    seed: int = 0
    # A shape of patchgate.profile.grow.SHAPES: the engines load ``model`` grown to it,
    # built into the cache on first use (patchgate.profile.grown); None: ``model`` itself.
    grow: str | None = None
    # A name of patchgate.registry.SCENARIO_SETS: "static", the six scenarios on one
    # loaded engine per configuration; "serving", the serving benchmark against one
    # server per configuration (patchgate.latency.serving)
    scenarios: str = "static"
    serving: Serving = field(default_factory=Serving)
    # The metric and filter the 99 % rule reads, per lm-eval task (or group):
    # {"gsm8k": {"metric": "exact_match", "filter": "flexible-extract"}}. A task not
    # named here is judged on its first filter and its first metric.
    primary: dict = field(default_factory=dict)
    # Handed to every lm-eval task as metadata: a task's ``custom_dataset`` function
    # receives them as keyword arguments (e.g. ``data_path``).
    task_args: dict = field(default_factory=dict)
    # Prompts go through the tokenizer's chat template (lm-eval apply_chat_template).
    chat_template: bool = False
    # The lowest version of the engine's package the model needs ("0.5.19"), checked
    # before anything is loaded; None: any.
    engine_version: str | None = None

    def model_path(self, root: Path | None = None) -> Path:
        p = Path(self.model)
        p = p if p.is_absolute() else (root or repo_root()) / p
        if self.grow:
            from .grown import build

            return build(p, self.grow)
        return p

    def task_folder(self, root: Path | None = None) -> Path:
        """The folder of the profile's lm-eval task YAMLs (``task_path``), absolute."""
        p = Path(self.task_path)
        return p if p.is_absolute() else (root or repo_root()) / p

    def with_overrides(self, **kw) -> Profile:
        return dataclasses.replace(self, **kw)


def repo_root() -> Path:
    """The checkout this package runs from (the folder holding pyproject.toml)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "model_patches").exists():
            return parent
    return Path.cwd()
