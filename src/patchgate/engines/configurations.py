"""The configurations of one run and their engines, owned in one place.

A run compares up to four configurations, each a set of patches:

- ``candidate``: every patch in the folder that applies to the profile's engine;
- ``current``: the accepted patches (named, with the same sha256, in ``current.json``);
- ``best``: the fastest accepted state (``best.json``), when it differs from current
  and its patches are all still in the folder;
- ``reference``: no patches.

Configurations with the same patch set share one engine: its *name* joins their
labels ("candidate+current"). :class:`Configurations` starts the engines, starts
them again in fresh processes (a confirmation), closes them, and looks them up by
label or by name. Nothing else in the gate holds an engine. On the CPU, the number of
threads every engine of the run uses is fixed at the first start (:mod:`.cpu`).

The accuracy guard asks for :meth:`Configurations.accuracy_engine`: the configuration's
engine, or, where the run spreads accuracy (:meth:`Configurations.spread_accuracy`, the
gate's ``--ray``), a pool of engines elsewhere that this object owns and closes too.
Where the run spreads latency (:meth:`Configurations.spread_latency`), the engines run on
the cluster's nodes instead of here, in a bench (:mod:`patchgate.spread.latency`) that
this object starts and closes; :attr:`Configurations.latency_bench` is the looks' timer then.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import sandbox
from ..errors import PatchgateError
from ..patches import Patch, content_key
from . import cpu
from .base import Engine, described
from .factory import start_all

LABELS = ("candidate", "current", "best", "reference")


class Configurations:
    """Patch sets by label, one engine per distinct set (use as a context manager)."""

    def __init__(self, profile, sets: dict[str, list[Patch]],
                 say: Callable[[str], None] = lambda _: None):
        unknown = set(sets) - set(LABELS)
        if unknown or not {"candidate", "current", "reference"} <= set(sets):
            raise ValueError(f"configurations need candidate, current and reference; "
                             f"got {sorted(sets)}")
        self.profile = profile
        self.sets = {lb: list(sets[lb]) for lb in LABELS if lb in sets}
        self.labels = tuple(self.sets)
        self.keys = {lb: content_key(ps) for lb, ps in self.sets.items()}
        self._say = say
        self._engines: dict[str, Engine] = {}  # by key
        self.starts = 0
        self._engine_profile = None  # the profile with this run's CPU threads fixed
        self.notes: list[str] = []  # for the verdict: how the engines were started
        self._pool_maker: Callable | None = None  # (profile, patches, label) -> engine
        self._pools: dict[str, Engine] = {}  # by key
        self._bench_maker: Callable | None = None  # (profile, sets, described) -> bench
        self.latency_bench = None  # the latency bench on the cluster's nodes, once started
        self._bench_record: dict | None = None  # where latency ran, kept after it closes

    # ------------------------------------------------------------------ naming
    def name(self, label: str) -> str:
        """The engine name of ``label``: every label that shares its patch set."""
        key = self.keys[label]
        return "+".join(lb for lb in self.labels if self.keys[lb] == key)

    def names(self, labels: tuple[str, ...] | None = None) -> list[str]:
        """Distinct engine names of ``labels`` (all by default), in label order."""
        return list(dict.fromkeys(self.name(lb) for lb in (labels or self.labels)))

    def same(self, a: str, b: str) -> bool:
        """Whether two labels run the same patch set (one engine)."""
        return self.keys[a] == self.keys[b]

    # ------------------------------------------------------------------ engines
    def start(self, labels: tuple[str, ...] | None = None) -> None:
        """(Re)start one engine per distinct patch set of ``labels`` (all by default),
        each in fresh processes; the engines of other labels keep running."""
        if self._bench_maker is not None:
            self._start_bench(labels)
            return
        keys = {self.keys[lb] for lb in (labels or self.labels)}
        fresh = any(key in self._engines for key in keys)
        for key in keys:
            eng = self._engines.pop(key, None)
            if eng is not None:
                eng.close()
        self.starts += 1
        if self._engine_profile is None:
            self._engine_profile, note = cpu.pin(self.profile)
            if note:
                self._say(note)
                self.notes.append(note)
            if any(p.has_apply for ps in self.sets.values() for p in ps):
                self.notes.append(sandbox.status()["text"])  # where patch code runs
        firsts = [name.split("+")[0] for name in self.names()]
        wanted = {lb: self.sets[lb] for lb in firsts if self.keys[lb] in keys}
        started = start_all(self._engine_profile, wanted, self._say, 1 / len(firsts),
                            {lb: self.name(lb) for lb in wanted}, fresh=fresh)
        for label, eng in started.items():
            self._engines[self.keys[label]] = eng

    def _start_bench(self, labels: tuple[str, ...] | None) -> None:
        """Start (or restart, in fresh processes) the engines of ``labels`` on every node
        of the bench, the bench built on the first start."""
        if self.latency_bench is None:
            firsts = [name.split("+")[0] for name in self.names()]
            bench = self._bench_maker(self.profile, {lb: self.sets[lb] for lb in self.labels},
                                      self.described())
            self.latency_bench = bench
            self._say(f"latency on {len(bench.nodes)} Ray node(s), every round on one node: "
                      f"{', '.join(firsts)} there")
        self.starts += 1
        self.latency_bench.start(labels)
        for note in self.latency_bench.notes:
            if note not in self.notes:
                self.notes.append(note)

    def spread_latency(self, make: Callable) -> None:
        """Latency on the nodes of a cluster: ``make(profile, sets, described)`` builds the
        bench (:class:`patchgate.spread.latency.Bench`) that :meth:`start` starts there;
        no engine runs here then."""
        self._bench_maker = make

    def latency_spread(self) -> dict | None:
        """Where latency ran (the bench's ``spread()``), or None where it ran here."""
        if self.latency_bench is not None:
            return self.latency_bench.spread()
        return self._bench_record

    def _close_bench(self) -> None:
        if self.latency_bench is not None:
            self._bench_record = self.latency_bench.spread()
            self.latency_bench.close()
            self.latency_bench = None

    @property
    def cpu_threads(self) -> int | None:
        """The CPU threads this run's engines use (:mod:`.cpu`); None before the first
        start, or where the profile leaves it to the engine (a GPU)."""
        return None if self._engine_profile is None else self._engine_profile.threads

    @property
    def started(self) -> bool:
        """Whether :meth:`start` has run (the static set starts the engines; after the
        serving set, the accuracy guard's phase does)."""
        return self.starts > 0

    def ensure_started(self, labels: tuple[str, ...] | None = None) -> None:
        """Start the engines of ``labels`` (all by default) that do not run yet: after
        the serving set, the guard starts only the engines it needs."""
        if self.latency_bench is not None:  # on the cluster's nodes, all started there
            return
        missing = tuple(lb for lb in (labels or self.labels)
                        if self.keys[lb] not in self._engines)
        if missing:
            self.start(missing)

    def engine(self, label: str) -> Engine:
        if self._bench_maker is not None:
            raise PatchgateError(f"the engine of {label} runs on the Ray cluster's nodes "
                                 "(--ray): nothing here can call it",
                                 hint="run without --ray for --explain and --attribute")
        return self._engines[self.keys[label]]

    def spread_accuracy(self, make: Callable) -> None:
        """Accuracy through engines that ``make(profile, patches, label)`` builds (a pool
        of Ray actors, :mod:`patchgate.spread.accuracy`) instead of this run's engines."""
        self._pool_maker = make

    def accuracy_engine(self, label: str) -> Engine:
        """The engine the accuracy guard evaluates ``label`` with: its pool where accuracy
        spreads (built on first use), else its engine here (started if need be)."""
        if self._pool_maker is None:
            self.ensure_started((label,))
            return self.engine(label)
        key = self.keys[label]
        if key not in self._pools:
            self._close_bench()  # its engines hold the nodes' memory (and GPUs)
            if self.profile.device == "cuda" and self._engines:
                # this machine's GPU may be one the pools get: the latency engines give
                # its memory back first (a later phase that needs them starts them again)
                for eng in self._engines.values():
                    eng.close()
                self._engines.clear()
            self._pools[key] = self._pool_maker(self._engine_profile or self.profile,
                                                self.sets[label], self.name(label))
        return self._pools[key]

    def accuracy_spread(self) -> dict | None:
        """Where accuracy ran, per engine name (``spread()`` of each pool), or None."""
        return {p.label: p.spread() for p in self._pools.values()} or None

    def described(self) -> dict[str, str]:
        """``{engine name: "candidate (0001-x.py)"}``, as each engine describes itself,
        from the patch sets alone: with ``--ray`` on a GPU the engines may be closed by
        the time a message needs them."""
        firsts = {name: name.split("+")[0] for name in self.names()}
        return {name: described(lb, [p.name for p in self.sets[lb]])
                for name, lb in firsts.items()}

    def by_name(self, labels: tuple[str, ...] | None = None) -> dict[str, Engine]:
        """``{engine name: engine}`` for ``labels`` (all by default), in label order."""
        out: dict[str, Engine] = {}
        for lb in labels or self.labels:
            if self.latency_bench is not None:  # the names are what the bench's timer needs
                out.setdefault(self.name(lb), self.latency_bench)
            else:
                out.setdefault(self.name(lb), self.engine(lb))
        return out

    def close(self) -> None:
        self._close_bench()
        for eng in [*self._engines.values(), *self._pools.values()]:
            eng.close()
        self._engines.clear()
        self._pools.clear()

    def __enter__(self) -> Configurations:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
