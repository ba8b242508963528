"""The timed calls compute the model's answers: each configuration's first tokens on the
timed inputs checked against the reference's on the same inputs.

A timed call's outputs are otherwise only counted (every row must get exactly the
scenario's tokens). A patch could then make the timed calls fast by not computing them:
answer from a cache keyed by the batch's shape (the same answer for every round's new
ids), return zeros, or skip layers only for inputs shaped like the scenarios, while the
accuracy guard, whose prompts are shaped otherwise, sees the real model.

Every round's inputs are fresh and shared by all configurations, so each row's first
generated token is a function of the same prompt in every configuration: the argmax of
the prefill. A patch that changes numerics (FP8, int4) changes some of them (near-ties
on random prompts); a call that does not compute matches the reference only by chance.
Chance is not one token in the vocabulary: a model favours some tokens whatever the
prompt, so a constant answer matches often (4 % on the default model). Chance is what
the two configurations' token frequencies give when paired at random (per scenario,
over its calls), and the statistic is Cohen's kappa: agreement beyond chance, 1 for the
same answers, about 0 for answers unrelated to the prompts.

:func:`check` requires kappa of at least :data:`KAPPA_FLOOR` in the median round (the
scenarios pooled: a cache filled in one round agrees in that round only) and in every
scenario with at least :data:`MIN_TOKENS` first tokens (a cache for one scenario),
else the run ends with an error naming the patch set. The gate checks after the
accuracy guard, and only when the candidate passes the accuracy rule: a patch that
breaks the model fails both, and is rejected for its accuracy. Not caught: a patch that
computes a share of its timed calls and fakes the rest keeps kappa near that share.

Measured with ``python -m patchgate.tools.answers`` (default model on CPU, 4 rounds of
the six scenarios, 146 first tokens a round): 0001 and 0002 agree on all of them (kappa
1.00); 0005 (int4/int8 weights, dequantized) on 124 to 132 of 146 a round (kappa 0.85
in the median round, 0.77 to 1.00 by scenario); the shape cache of
tests/fixtures/attacks/shape-cache on 2 to 14 of 146 (kappa -0.01; -0.02 to 0.01).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import PatchgateError

KAPPA_FLOOR = 0.2  # agreement beyond chance, in the median round and in each scenario
MIN_TOKENS = 32  # a scenario is judged alone from this many compared first tokens

Answers = Mapping[str, Mapping[str, list]]  # {configuration: {scenario: [first tokens]}}


@dataclass(frozen=True)
class Agreement:
    """First tokens compared: ``same`` of ``total`` agree, ``expected`` by chance."""

    same: int
    total: int
    expected: float

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa; None where chance alone agrees on everything."""
        room = self.total - self.expected
        return (self.same - self.expected) / room if room > 1e-9 else None

    def __add__(self, other: Agreement) -> Agreement:
        return Agreement(self.same + other.same, self.total + other.total,
                         self.expected + other.expected)


NONE = Agreement(0, 0, 0.0)


def chance(mine: list, theirs: list) -> float:
    """How often two first tokens agree when drawn independently from the two lists of
    calls' tokens (the collision probability of their frequencies)."""
    a, b = Counter(t for call in mine for t in call), Counter(t for call in theirs for t in call)
    na, nb = sum(a.values()), sum(b.values())
    return sum(n * b[t] for t, n in a.items()) / (na * nb) if na and nb else 0.0


def _calls(answers: Answers, label: str, reference: str):
    """(scenario, round, agreement) of every timed call, paired with the reference's
    call of the same scenario and round."""
    for name, mine in answers[label].items():
        theirs = answers[reference].get(name, [])
        p = chance(mine, theirs)
        for k, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            n = min(len(a), len(b))
            yield name, k, Agreement(sum(x == y for x, y in zip(a, b, strict=False)), n, n * p)


def by_round(answers: Answers, label: str, reference: str) -> list[Agreement]:
    """``label`` against ``reference`` in each timed round (the k-th timed call of every
    scenario is round k), the scenarios pooled."""
    rounds: list[Agreement] = []
    for _, k, agreement in _calls(answers, label, reference):
        rounds += [NONE] * (k + 1 - len(rounds))
        rounds[k] += agreement
    return [r for r in rounds if r.total]


def by_scenario(answers: Answers, label: str, reference: str) -> dict[str, Agreement]:
    """``label`` against ``reference`` in each scenario, its rounds pooled."""
    out: dict[str, Agreement] = {}
    for name, _, agreement in _calls(answers, label, reference):
        out[name] = out.get(name, NONE) + agreement
    return out


def typical(rounds: list[Agreement]) -> float | None:
    """The median round's kappa (None: chance explains every round)."""
    kappas = [r.kappa for r in rounds if r.kappa is not None]
    return statistics.median(kappas) if kappas else None


def check(answers: Answers, reference: str | None,
          describe: Mapping[str, str] | None = None) -> None:
    """Raise if a configuration's timed calls agree with the reference's little more than
    chance would (see the module docstring). ``reference``: the configuration that runs
    no patches (None: nothing to compare against)."""
    if reference is None or reference not in answers:
        return
    for label in answers:
        if label == reference:
            continue
        rounds = by_round(answers, label, reference)
        low = [("the median round", typical(rounds), sum(rounds, NONE))]
        low += [(f"scenario {name}", a.kappa, a)
                for name, a in by_scenario(answers, label, reference).items()
                if a.total >= MIN_TOKENS]
        for where, kappa, a in low:
            if kappa is not None and kappa < KAPPA_FLOOR:
                who = (describe or {}).get(label, label)
                raise PatchgateError(
                    f"latency: the timed calls of {who} gave the reference's first token "
                    f"on {a.same} of {a.total} inputs, {a.expected:.0f} expected by chance "
                    f"(kappa {kappa:.2f} in {where}, under {KAPPA_FLOOR}): they did not "
                    "compute the model's answers, so their timings say nothing",
                    hint="a patch must compute what it is timed on (no cache of outputs, "
                    "no shortcut for inputs shaped like the scenarios); nothing was written")
