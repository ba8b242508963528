"""The contest's scoring: correctness coefficient C, speed scores S and the score.

The score is ``(0.4 S1 + 0.3 S8 + 0.3 Sinf) * C``: :data:`WEIGHTS` says it once, keyed
"1", "8" and "inf"; :func:`batch_keys` maps a profile's batch sizes (or a serving
set's concurrencies) onto those keys, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .core import _nonempty, geometric_mean

WEIGHTS = {"1": 0.4, "8": 0.3, "inf": 0.3}  # S1, S8, Sinf (unlimited: the largest batch)
KEYS = tuple(WEIGHTS)


def batch_keys(batch_sizes: Sequence[int]) -> dict[int, str]:
    """``{batch size: "1" | "8" | "inf"}``: the sizes that stand for S1, S8 and Sinf,
    in that order (the largest stands for unlimited concurrency)."""
    return dict(zip(batch_sizes, KEYS, strict=False))


def correctness_coefficient(ratio: float, low: float = 0.97, high: float = 0.99) -> float:
    """The contest's C: 0.0 for an accuracy ratio below ``low``, 1.0 at or above ``high``,
    linear in between (0.98 -> 0.5 with the defaults)."""
    if ratio >= high:
        return 1.0
    if ratio < low:
        return 0.0
    return (ratio - low) / (high - low)


def score(s1: float, s8: float, sinf: float, c: float) -> float:
    """Contest score: (0.4 s1 + 0.3 s8 + 0.3 sinf) * C, from speed scores at batch 1, 8, max."""
    return (WEIGHTS["1"] * s1 + WEIGHTS["8"] * s8 + WEIGHTS["inf"] * sinf) * c


def speed_score(reference_times: Sequence[float], candidate_times: Sequence[float]) -> float:
    """100 * geometric mean of reference / candidate over paired times (e.g. prefill and
    decode medians at one batch size). 100 = as fast as the reference, 200 = twice as fast."""
    ref = _nonempty(reference_times, "reference_times")
    cand = _nonempty(candidate_times, "candidate_times")
    if len(ref) != len(cand):
        raise ValueError(f"paired times differ in length: {len(ref)} vs {len(cand)}")
    if any(not x > 0 for x in ref + cand):
        raise ValueError("times must be > 0")
    return 100 * geometric_mean([r / c for r, c in zip(ref, cand, strict=True)])
