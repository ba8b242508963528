"""Profiles: everything one gate run needs to know, with defaults written once.

A profile names the model, the engine and its settings, the scenario lengths, the
accuracy guard and the thresholds. ``PROFILES`` holds the built-in ones; paths are
relative to the repository root (:func:`repo_root`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PatchgateError

BATCH_SIZES = (1, 8, 64)
SCORE_WEIGHTS = {1: 0.4, 8: 0.3, 64: 0.3}  # S1, S8, Sinf


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
    engine: str  # "transformers" | "sglang"
    lengths: Lengths
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None  # CPU threads for the transformers engine; None: all cores
    engine_args: dict = field(default_factory=dict)  # engine settings (SGLang ServerArgs)
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    rounds: int = 10  # timed rounds per configuration and scenario
    warmup: int = 1  # thrown-away rounds before timing
    # The budget of an undecided comparison: at most this many looks of ``rounds``
    # rounds each (the first included); every look tests at alpha / max_looks.
    max_looks: int = 3
    # A slowdown counts only if fresh engine processes find it too (patchgate.latency):
    # a steady per-process difference is not a change.
    confirm: bool = True
    settle_s: float = 0.01  # pause before each timed call (patchgate.measure)
    # A call into a transformers worker that has not answered after this long (a
    # patch that hangs) ends the run with an error; a call here takes seconds.
    call_timeout_s: float = 600.0
    tasks: tuple[str, ...] = ("default_suite",)
    task_path: str = "guards/tasks"
    guard: str = "lm_eval"  # "lm_eval" | "token_agreement" (random weights)
    eval_batch_size: int = 16
    thresholds: Thresholds = field(default_factory=Thresholds)
    seed: int = 0
    # A shape of patchgate.grow.SHAPES: the engines load ``model`` grown to it, built
    # into the cache on first use (patchgate.grow_build); None loads ``model`` itself.
    grow: str | None = None
    # "static": the six scenarios on one loaded engine per configuration; "serving": the
    # serving benchmark against one server per configuration (patchgate.serving)
    scenarios: str = "static"
    serving: Serving = field(default_factory=Serving)

    def model_path(self, root: Path | None = None) -> Path:
        p = Path(self.model)
        p = p if p.is_absolute() else (root or repo_root()) / p
        if self.grow:
            from .grow_build import build

            return build(p, self.grow)
        return p

    def with_overrides(self, **kw) -> Profile:
        return dataclasses.replace(self, **kw)


def repo_root() -> Path:
    """The checkout this package runs from (the folder holding pyproject.toml)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "model_patches").exists():
            return parent
    return Path.cwd()


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="default",
            description="embedded default MiniCPM on CPU through transformers (runs anywhere)",
            model="models/default",
            engine="transformers",
            lengths=Lengths(prefill_input=256, prefill_output=1, decode_input=16,
                            decode_output=32),
            rounds=10,
        ),
        Profile(
            name="h200-default",
            description="embedded default MiniCPM on one H200 through SGLang",
            model="models/default",
            engine="sglang",
            device="cuda",
            dtype="bfloat16",
            lengths=Lengths(prefill_input=2048, prefill_output=1, decode_input=128,
                            decode_output=256),
            engine_args={"disable_prefill_cuda_graph": True},
            # a model this small is bound by per-step overhead: calls vary by 10-15 %
            # (8 rounds could only detect 27-46 % changes on one H200), so more rounds,
            # and the CPU's 5 % threshold: two engines of it differ by up to 40 %
            rounds=30,
            thresholds=Thresholds(latency=0.05),
            eval_batch_size=64,
        ),
        Profile(
            name="h200-minicpm8b-dummy",
            description="MiniCPM4-8B-shaped model with random weights on one H200 (SGLang); "
            "the guard compares greedy tokens with the reference",
            model="models/minicpm4-8b-dummy",
            engine="sglang",
            device="cuda",
            dtype="bfloat16",
            lengths=Lengths(prefill_input=2048, prefill_output=1, decode_input=128,
                            decode_output=256),
            engine_args={"load_format": "dummy"},
            # GPU-bound 8B steps: A/A calls agree within 1 % (docs/gpu-runs), so 2 %;
            # 10 paired rounds is the fewest whose signed-rank test can reach a
            # scenario's share of alpha (Holm: alpha / 3 looks / 12 <= 2^-10)
            rounds=10,
            thresholds=Thresholds(latency=0.02),
            guard="token_agreement",
        ),
        Profile(
            name="h200-minicpm8b",
            description="the default MiniCPM grown, function-preserving, to the MiniCPM4-8B "
            "shape on one H200 (SGLang): 8B kernels, the default model's answers",
            model="models/default",
            grow="minicpm4-8b",
            engine="sglang",
            device="cuda",
            dtype="bfloat16",
            lengths=Lengths(prefill_input=2048, prefill_output=1, decode_input=128,
                            decode_output=256),
            # GPU-bound 8B steps: A/A calls agree within 1 % (docs/gpu-runs), so 2 %;
            # 10 paired rounds is the fewest whose signed-rank test can reach a
            # scenario's share of alpha (Holm: alpha / 3 looks / 12 <= 2^-10)
            rounds=10,
            thresholds=Thresholds(latency=0.02),
            eval_batch_size=64,
        ),
        Profile(
            name="target-template",
            description="template for the real target (MiniCPM-SALA or any model path) on "
            "your own GPU runner; copy and set model",
            model="/path/to/MiniCPM-SALA",
            engine="sglang",
            device="cuda",
            dtype="bfloat16",
            lengths=Lengths(prefill_input=4096, prefill_output=1, decode_input=128,
                            decode_output=512),
            # GPU-bound 8B steps: A/A calls agree within 1 % (docs/gpu-runs), so 2 %;
            # 10 paired rounds is the fewest whose signed-rank test can reach a
            # scenario's share of alpha (Holm: alpha / 3 looks / 12 <= 2^-10)
            rounds=10,
            thresholds=Thresholds(latency=0.02),
        ),
    )
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise PatchgateError(
            f"unknown profile {name!r}",
            hint=f"choose one of: {', '.join(sorted(PROFILES))}",
        ) from None
