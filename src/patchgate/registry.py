"""The kinds of things a run is made of, each registered by name, once, here.

Three kinds vary between profiles, and each kind is a small protocol:

- an **engine** (:class:`patchgate.engines.base.Engine`): runs the patched model;
- a **scenario set** (:class:`patchgate.latency.sets.ScenarioSet`): what the latency
  phase measures, and how;
- a **guard** (:class:`patchgate.guard.base.Guard`): how accuracy is judged.

A new kind is one new module that implements the protocol plus one line in the table
below. Everything that needs the names reads them here: the CLI's choices, profile
validation, a patch's ``ENGINES`` check, the environment fingerprint (an engine's
package version). Entries name their implementation as ``"module:attribute"`` and are
imported only when used, so this module imports nothing of the project and the tables
cost nothing to read.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .errors import PatchgateError


@dataclass(frozen=True)
class Entry:
    """One registered kind: where it lives, and the package whose version the
    environment fingerprint records (engines only)."""

    ref: str  # "package.module:Attribute"
    package: str | None = None


ENGINES = {
    "transformers": Entry("patchgate.engines.isolated:IsolatedEngine", "transformers"),
    "sglang": Entry("patchgate.engines.sglang:SGLangEngine", "sglang"),
}
SCENARIO_SETS = {
    "static": Entry("patchgate.latency.static:StaticSet"),
    "serving": Entry("patchgate.latency.serving.phase:ServingSet"),
}
GUARDS = {
    "lm_eval": Entry("patchgate.guard.lmeval_guard:LmEvalGuard"),
    "token_agreement": Entry("patchgate.guard.agreement:AgreementGuard"),
}
KINDS = {"engine": ENGINES, "scenarios": SCENARIO_SETS, "guard": GUARDS}


def names(kind: str) -> tuple[str, ...]:
    """The registered names of ``kind`` ("engine", "scenarios" or "guard")."""
    return tuple(KINDS[kind])


def load(kind: str, name: str):
    """The implementation registered as ``name`` for ``kind`` (imported now)."""
    table = KINDS[kind]
    if name not in table:
        raise PatchgateError(f"unknown {kind} {name!r}",
                             hint=f"choose one of: {', '.join(table)}")
    module, _, attr = table[name].ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def create(kind: str, name: str, *args, **kwargs):
    """An instance of the ``kind`` registered as ``name``, built with the arguments."""
    return load(kind, name)(*args, **kwargs)
