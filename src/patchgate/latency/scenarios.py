"""The six latency scenarios and their deterministic token batches.

prefill: long input, short output; decode: short input, long output; each at batch
size 1, 8 and 64 (the profile's ``batch_sizes``). Every request of a batch has
exactly the scenario's input length and is asked for exactly its output length
(EOS ignored), so every configuration does the same work.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..profile import Profile
from ..profile.schema import scenario_name


@dataclass(frozen=True)
class Scenario:
    phase: str  # "prefill" | "decode"
    batch_size: int
    input_len: int
    output_len: int

    @property
    def name(self) -> str:
        return scenario_name(self.phase, self.batch_size)

    def record(self) -> dict:
        return {"name": self.name, "phase": self.phase, "batch_size": self.batch_size,
                "input_len": self.input_len, "output_len": self.output_len}


def make_scenarios(profile: Profile) -> list[Scenario]:
    ln = profile.lengths
    out = []
    for phase, (i, o) in (("prefill", (ln.prefill_input, ln.prefill_output)),
                          ("decode", (ln.decode_input, ln.decode_output))):
        out += [Scenario(phase, b, i, o) for b in profile.batch_sizes]
    return out


def prompt_ids(scenario: Scenario, vocab_size: int, seed: int = 0, round_index: int = 0,
               reserved: int = 4, part: int = 0) -> list[list[int]]:
    """``batch_size`` rows of ``input_len`` token ids, drawn from ``seed``, the scenario
    and the round: every round of a run gets its own (the same for every configuration);
    ``part`` > 0: the ids of a round's further call (a profile's ``repeats``).

    Ids below ``reserved`` (pad, bos, eos, unk in the default tokenizer) are avoided.
    """
    key = f"{seed}:{scenario.name}:{scenario.input_len}:{round_index}"
    rng = random.Random(key if not part else f"{key}:{part}")
    hi = vocab_size - 1
    return [[rng.randint(reserved, hi) for _ in range(scenario.input_len)]
            for _ in range(scenario.batch_size)]
