"""Engine adapters behind one protocol (:class:`~patchgate.engines.base.Engine`).

- :mod:`.base`: the protocol and the timed call;
- :mod:`.factory`: building engines by name (:mod:`patchgate.registry`);
- :mod:`.configurations`: the configurations of one run and their engines;
- :mod:`.transformers` in its own process (:mod:`.isolated`), :mod:`.sglang` (with
  :mod:`.sglang_hook`, which runs ``apply()`` inside SGLang's worker);
- :mod:`.profiling`: one call under a profiler (``--explain``).
"""

from .base import Engine
from .factory import start, start_all

__all__ = ["Engine", "start", "start_all"]
