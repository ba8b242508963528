"""``patchgate calibrate --stored``: the gain of pairing on stored samples, measured
nothing: the paired and the unpaired interval widths of one run's side-by-side rounds.
"""

from __future__ import annotations

from pathlib import Path

from .. import stats
from ..errors import PatchgateError
from ..store import baselines


def stored_pairing_gain(store: baselines.BaselineStore, a: float = 0.025) -> dict[str, dict]:
    """The paired and the unpaired interval widths (log scale, 1 - 2a) on the samples
    stored in ``reference.json`` and ``current.json`` (one run's side-by-side rounds,
    compared round by round over the rounds both have). Nothing is measured."""
    ref, cur = store.load("reference"), store.load("current")
    if ref is None or cur is None:
        raise PatchgateError(f"no reference.json and current.json under "
                             f"{store.root / store.profile}",
                             hint="accept a change first, or calibrate by measuring")
    out = {}
    for name, r in ref["scenarios"].items():
        c = (cur["scenarios"].get(name) or {}).get("samples_s")
        if not c:
            continue
        k = min(len(c), len(r["samples_s"]))
        x, y = c[:k], r["samples_s"][:k]
        if x == y:
            raise PatchgateError(f"{store.profile}: current and reference are the same "
                                 "configuration (identical samples): nothing to compare",
                                 hint="use a profile whose current baseline has patches")
        paired = stats.hodges_lehmann(stats.log_ratios(x, y), a)
        _, lo, hi = stats.shift_interval(x, y, a)
        out[name] = {"rounds": k, "paired": paired.high - paired.low, "unpaired": hi - lo,
                     "gain": (hi - lo) / (paired.high - paired.low)}
    return out


def show(baselines_dir: Path, profile: str) -> int:
    from tabulate import tabulate

    """``patchgate calibrate --stored``: the table of :func:`stored_pairing_gain`."""
    gains = stored_pairing_gain(baselines.BaselineStore(baselines_dir, profile))
    print(tabulate([[n, g["rounds"], f"{100 * g['paired']:.2f} %",
                     f"{100 * g['unpaired']:.2f} %", f"{g['gain']:.2f}x"]
                    for n, g in gains.items()],
                   headers=["scenario", "rounds", "paired 95 % CI width (log)",
                            "unpaired", "unpaired / paired"], disable_numparse=True))
    return 0
