"""The serving scenarios: one fixed dataset, sent at each concurrency.

A serving scenario is the whole dataset (``num_prompts`` requests of ``input_len``
tokens in, ``output_len`` out) at one concurrency: at most ``concurrency`` requests
in flight (None: unlimited, every request sent at once). Its sample is the duration
``sglang.bench_serving`` reports: from the first request sent to the last answer.

The scenarios fit where the static ones go (:mod:`patchgate.latency`,
:mod:`patchgate.verdict.judge`): ``batch_size`` is the most requests in flight (the
concurrency, or ``num_prompts`` when unlimited), and :func:`batch_sizes` maps them
onto the score's S1, S8 and Sinf in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import PatchgateError


@dataclass(frozen=True)
class ServingScenario:
    concurrency: int | None  # None: unlimited
    num_prompts: int
    input_len: int
    output_len: int

    phase = "serving"

    @property
    def name(self) -> str:
        return f"serving_c{'inf' if self.concurrency is None else self.concurrency}"

    @property
    def batch_size(self) -> int:
        """The most requests in flight at once."""
        return self.num_prompts if self.concurrency is None else \
            min(self.concurrency, self.num_prompts)

    def record(self) -> dict:
        return {"name": self.name, "phase": self.phase, "batch_size": self.batch_size,
                "input_len": self.input_len, "output_len": self.output_len,
                "concurrency": self.concurrency, "num_prompts": self.num_prompts}


def make_scenarios(profile) -> list[ServingScenario]:
    """The profile's serving scenarios, in the order of the score's S1, S8, Sinf."""
    sv = profile.serving
    if len(sv.concurrencies) != 3:
        raise PatchgateError(
            f"profile {profile.name}: serving.concurrencies is {sv.concurrencies!r}; the score "
            "needs three (S1, S8, Sinf), e.g. (1, 8, None)",
            hint="None stands for unlimited concurrency")
    for key, value in (("num_prompts", sv.num_prompts), ("input_len", sv.input_len),
                       ("output_len", sv.output_len)):
        if value < 1:
            raise PatchgateError(f"profile {profile.name}: serving.{key} is {value}",
                                 hint="use a positive number")
    out = [ServingScenario(c, sv.num_prompts, sv.input_len, sv.output_len)
           for c in sv.concurrencies]
    sizes = [s.batch_size for s in out]
    if len(set(sizes)) != len(sizes):
        raise PatchgateError(
            f"profile {profile.name}: the serving concurrencies {sv.concurrencies!r} with "
            f"{sv.num_prompts} prompts keep {sizes} requests in flight: two scenarios would "
            "measure the same thing",
            hint="give more prompts than the largest finite concurrency (16 for 1, 8, None)")
    return out


def batch_sizes(scenarios: list[ServingScenario]) -> tuple[int, ...]:
    """The batch sizes that stand for S1, S8 and Sinf, in that order."""
    return tuple(s.batch_size for s in scenarios)
