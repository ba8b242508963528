"""Engine adapters behind one protocol (:class:`~patchgate.engines.base.Engine`)."""

from .base import Engine, load_engine

__all__ = ["Engine", "load_engine"]
