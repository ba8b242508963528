"""Pure statistics for the gate: samples in, numbers or frozen dataclasses out.

Standard library only, no I/O. Anything that resamples takes ``seed`` and draws from
``random.Random(seed)``, so the same inputs always give the same answer.

- :mod:`.paired`: latency from paired rounds (signed-rank test, Hodges-Lehmann
  interval, three outcomes, Holm, the pooled score change): what the gate decides on;
- :mod:`.paired_t`: the paired t-test a profile may choose instead (``test = "t"``);
- :mod:`.core`: basics (standard errors, a t quantile), and the unpaired interval
  that calibration compares with the paired one;
- :mod:`.accuracy`: per-item scores on the same items (McNemar, paired bootstrap);
- :mod:`.score`: the contest's C, S and score;
- :mod:`.changepoint`: change points in a stored history (E-divisive);
- :mod:`.rates`: error rates measured by calibration (Clopper-Pearson intervals);
- :mod:`.sequential`, :mod:`.strata`, :mod:`.sequential_sim`: the sequential accuracy
  guard (an anytime-valid confidence sequence for sampling without replacement), the
  tasks' weights, order and exact full-set rule, and its error rates by simulation.
"""

from .accuracy import AccuracyComparison, compare_accuracy, mcnemar_exact, mean_ratio
from .changepoint import ChangePoint, e_divisive
from .core import (
    geometric_mean,
    mean_se,
    median,
    median_se,
    order_effect,
    robust_sd,
    shift_interval,
    student_t_1e4,
)
from .paired import (
    EQUIVALENT,
    FASTER,
    NOT_SLOWER,
    OUTCOMES,
    SHOWN_NOT_SLOWER,
    SLOWER,
    UNDECIDED,
    Location,
    PairedComparison,
    SignedRank,
    compare_differences,
    compare_paired,
    hodges_lehmann,
    holm,
    log_ratios,
    outcome,
    pooled_differences,
    signed_rank,
)
from .rates import Rate, rate
from .score import correctness_coefficient, score, speed_score

__all__ = [
    "EQUIVALENT", "FASTER", "NOT_SLOWER", "OUTCOMES", "SHOWN_NOT_SLOWER", "SLOWER",
    "UNDECIDED",
    "AccuracyComparison", "ChangePoint", "Location", "PairedComparison", "Rate",
    "SignedRank", "compare_accuracy", "compare_differences", "compare_paired",
    "correctness_coefficient", "e_divisive", "geometric_mean", "hodges_lehmann", "holm",
    "order_effect",
    "log_ratios", "mcnemar_exact", "mean_ratio", "median", "outcome", "pooled_differences", "rate",
    "robust_sd",
    "mean_se",
    "median_se",
    "student_t_1e4",
    "score", "shift_interval", "signed_rank", "speed_score",
]
