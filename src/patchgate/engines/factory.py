"""Starting engines: one per configuration, built by the registry, loaded in parallel.

:func:`start` builds the profile's engine (``patchgate.registry.ENGINES``) for one
patch set; :func:`start_all` starts several side by side, each with an equal share
of the device, and waits until all are ready; if one fails, those already started
are closed before the error goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import registry
from .base import Engine


def start(profile, patches, label: str, share: float = 1.0) -> Engine:
    """The profile's engine with ``patches`` applied, for configuration ``label``."""
    return registry.create("engine", profile.engine, profile, list(patches), label, share)


def start_all(profile, sets: dict, say: Callable[[str], None] = lambda _: None,
              share: float | None = None, names: dict[str, str] | None = None,
              fresh: bool = False) -> dict[str, Engine]:
    """``{label: engine}`` for ``sets`` (``{label: patches}``), all ready. ``share``
    defaults to an equal part of the device each; ``names`` (what the step lines call
    each label) and ``fresh`` only change the words."""
    share = share if share is not None else 1 / max(1, len(sets))
    engines: dict[str, Engine] = {}
    t0 = time.perf_counter()
    took: dict[str, float] = {}  # each start call (SGLang's returns once it is ready)
    try:
        for label, patches in sets.items():
            say(f"loading engine for {(names or {}).get(label, label)} ({len(patches)} "
                "patches)" + (" in fresh processes" if fresh else ""))
            began = time.perf_counter()
            engines[label] = start(profile, patches, label, share)
            took[label] = time.perf_counter() - began
        for label, engine in engines.items():  # engines in worker processes load in parallel
            engine.ready()
            say(f"engine for {(names or {}).get(label, label)} ready "
                f"{time.perf_counter() - t0:.1f} s after the first start (its start call "
                f"{took[label]:.1f} s)")
    except BaseException:
        for engine in engines.values():
            engine.close()
        raise
    return engines
