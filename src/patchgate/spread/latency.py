"""A verdict's latency on the nodes of a Ray cluster: every round on one node, the nodes
as blocks of rounds.

Spread the work, never the pairs. A round is every configuration once per scenario,
interleaved, and a round never spans nodes: each node that offers a bench slot holds
one :class:`BenchActor` with the run's configurations started there (their own engine
processes; one GPU on a GPU profile), and measures whole rounds. A look's rounds are cut
into one block per node (:func:`blocks`: each a balanced number of rounds, numbered
apart, so no two blocks repeat an input); the blocks are measured side by side and their
samples follow each other in node order. The paired tests then see rounds whose pairs
all lie within one node, which is what makes a node a block: a node faster or slower as
a whole moves both sides of its rounds alike. With one node the block is the serial
run's look, round for round.

- **Hardware classes.** Every node tells its class (:func:`.cluster.node_here`); a bench
  spanning two is refused by name (:func:`.cluster.one_class`).
- **Work off the clock** is metered on each node over its own rounds
  (:mod:`patchgate.latency.offclock`); a node's finding is the run's.
- **Faults.** A node lost while it measures: its block, whole, runs again on another
  bench (all of one class) after that one's own block, with the same round numbers; the
  lost bench is out of the run, and the verdict's ``lost_nodes`` and the block's
  ``rerun_of`` name it. What the lost bench measured of its block is never used. No
  other bench left: the run is an error naming the node (exit 2), nothing is written.
- **Nothing left behind.** :meth:`Bench.close` closes every engine and kills every actor.
- **The record.** :meth:`Bench.spread`: the node and round numbers of every block, for
  the verdict's latency block.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from ..errors import PatchgateError
from .cluster import SLOT, connect, end_actors, node_here, one_class, ray_module, task_error

START_TIMEOUT_S = 600.0  # actors not placed by then: the cluster lacks what they ask for


class BenchActor:
    """One node's bench (wrapped by :func:`_actor_class`): the run's configurations
    started here, measuring blocks of whole rounds."""

    def __init__(self, profile, sets: dict):
        from ..engines.configurations import Configurations

        self.profile = profile
        self.configs = Configurations(profile, sets)
        self.meter = None
        self.node = node_here(profile.engine, profile.device)

    def info(self) -> dict:
        return self.node

    def start(self, labels: tuple[str, ...] | None) -> list[str]:
        """(Re)start the engines of ``labels`` here; the notes of how they started."""
        self.configs.start(labels)
        return list(self.configs.notes)

    def measure(self, labels: tuple[str, ...], scenarios: list, rounds, answers: bool
                ) -> tuple[dict, dict | None, object]:
        """One block: :func:`patchgate.latency.measure.measure` on this node's engines of
        ``labels``; the samples, the first tokens of each timed call (``answers``) and
        the off-clock finding over every block this node measured so far."""
        from ..latency import offclock
        from ..latency.measure import measure

        if self.meter is None:
            self.meter = offclock.Meter()
        got: dict | None = {} if answers else None
        samples = measure(self.configs.by_name(tuple(labels)), scenarios, rounds, None,
                          answers=got, meter=self.meter)
        return samples, got, self.meter.finding

    def close(self) -> None:
        self.configs.close()


def _actor_class(profile, options: dict | None):
    """:class:`BenchActor` as a Ray actor holding its node's bench slot (one GPU too on
    a GPU profile); ``options`` (Ray's ``.options``) on top."""
    ray = ray_module()
    need = {"num_gpus": 1} if profile.device == "cuda" else {}
    return ray.remote(max_restarts=0, max_task_retries=0, num_cpus=0,
                      resources={SLOT: 1}, **need)(BenchActor).options(**(options or {}))


def blocks(rounds, nodes: int, configurations: int) -> list:
    """A look's :class:`~patchgate.latency.measure.Rounds` cut into one block per node:
    each ``ceil(timed / nodes)`` rounds, balanced over the configurations, with the
    look's warm-up, numbered from where the previous block's rounds end. One node: the
    look itself."""
    from ..latency.measure import balanced_rounds

    m = balanced_rounds(math.ceil(rounds.timed / max(1, nodes)), configurations)
    span = rounds.warmup + m
    return [dataclasses.replace(rounds, timed=m, first=rounds.first + k * span)
            for k in range(nodes)]


class Bench:
    """One :class:`BenchActor` per node that offers a bench slot (or ``nodes`` of them),
    for the configurations ``sets`` (``{label: patches}``) of one run; ``described``:
    each engine name as the messages say it (:meth:`Configurations.described`)."""

    def __init__(self, profile, sets: dict, described: dict[str, str], nodes: int,
                 options: dict | None = None, say: Callable[[str], None] = lambda _: None):
        ray = ray_module()
        self.profile, self.described, self._say = profile, described, say
        cls = _actor_class(profile, options)
        self.actors = [cls.remote(profile, sets) for _ in range(nodes)]
        self.nodes: list[dict] = []  # each actor's node {"id", "class"}, in actor order
        self.record: list[dict] = []  # every block: series, look, node, round numbers
        self.lost_nodes: list[str] = []  # nodes whose bench was lost (its block ran again)
        self.notes: list[str] = []
        try:
            refs = [a.info.remote() for a in self.actors]
            ready, pending = ray.wait(refs, num_returns=len(refs), timeout=START_TIMEOUT_S)
            if pending:
                raise PatchgateError(
                    f"latency on the Ray cluster: {len(pending)} of {nodes} benches not "
                    f"placed after {START_TIMEOUT_S:.0f} s",
                    hint=f"each needs a node with a free {SLOT} (and a GPU on a GPU "
                    "profile): free the nodes, or run without --ray")
            self.nodes = [self._get(r, None, "placing a bench") for r in refs]
            classes: dict[str, list[str]] = {}
            for n in self.nodes:
                classes.setdefault(n["class"], []).append(n["id"])
            one_class(classes, "the latency benches")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ engines
    def start(self, labels: tuple[str, ...] | None) -> None:
        """The engines of ``labels`` (re)started on every node, side by side."""
        t0 = time.perf_counter()
        refs = [a.start.remote(labels) for a in self.actors]
        notes = [self._get(r, i, "starting its engines") for i, r in enumerate(refs)]
        self.notes = notes[0]
        self._say(f"engines started on {len(self.actors)} Ray node(s) in "
                  f"{time.perf_counter() - t0:.1f} s")

    # ------------------------------------------------------------------ the timer
    def measure(self, engines: dict, scenarios: list, rounds, progress=None,
                answers: dict | None = None, meter=None) -> dict:
        """The looks' timer (:func:`patchgate.latency.measure.measure`'s signature, the
        engines by name): the look's rounds in one block per node, measured side by side,
        the samples of each configuration and scenario in node order; ``answers`` get
        the first tokens the same way; ``meter.finding`` is a node's finding."""
        ray = ray_module()
        labels = tuple(name.split("+")[0] for name in engines)
        parts = blocks(rounds, len(self.actors), len(engines))
        calls = len(scenarios) * len(engines)  # a round's calls
        if progress is not None:  # more rounds than the look planned: one block a node
            extra = sum(p.warmup + p.timed for p in parts) - rounds.warmup - rounds.timed
            progress.total += max(0, extra) * calls
            progress.refresh()

        def done(i: int) -> None:  # block i measured
            if progress is not None:
                progress.update((parts[i].warmup + parts[i].timed) * calls)

        want = answers is not None
        refs = [a.measure.remote(labels, list(scenarios), p, want)
                for a, p in zip(self.actors, parts, strict=True)]
        got: list = []
        on = list(range(len(parts)))  # the bench that measured each block
        lost: list[int] = []
        try:
            for i, r in enumerate(refs):
                got.append(self._get(r, i, "measuring its block", lost))
                if got[-1] is not None:
                    done(i)
            for i in [i for i, g in enumerate(got) if g is None]:
                on[i], got[i] = self._rerun(i, lost, (labels, list(scenarios), parts[i], want))
                done(i)
        except BaseException:
            for r in refs:
                try:
                    ray.cancel(r)
                except Exception:  # noqa: BLE001 - one already done or its actor gone
                    pass
            raise
        samples: dict = {name: {s.name: [] for s in scenarios} for name in engines}
        for k, (part, (block, firsts, finding)) in enumerate(zip(parts, got, strict=True)):
            for name, per in block.items():
                for scenario, xs in per.items():
                    samples[name][scenario].extend(xs)
            for name, per in (firsts or {}).items():
                for scenario, xs in per.items():
                    answers.setdefault(name, {}).setdefault(scenario, []).extend(xs)
            if meter is not None and finding is not None and meter.finding is None:
                meter.finding = finding
            self.record.append({"node": self.nodes[on[k]]["id"], "first_round": part.first,
                                "warmup": part.warmup, "rounds": part.timed}
                               | ({"rerun_of": self.nodes[k]["id"]} if on[k] != k else {}))
        self._drop(lost)
        return samples

    # ------------------------------------------------------------------ a lost node
    def _rerun(self, i: int, lost: list[int], args: tuple) -> tuple[int, tuple]:
        """Block ``i``, whose bench was lost, measured whole on another bench (every
        bench is of one class), after that one's own block: (its index, what it
        measured). None left: the error that names the lost node."""
        for j in range(len(self.actors)):
            if j in lost:
                continue
            self._say(f"latency: the bench on node {self.nodes[i]['id']} was lost; its "
                      f"block runs again on node {self.nodes[j]['id']}")
            got = self._get(self.actors[j].measure.remote(*args), j, "measuring a lost "
                            "node's block", lost)
            if got is not None:
                return j, got
        raise PatchgateError(
            f"latency on the Ray cluster: the bench on node {self.nodes[i]['id']} was lost "
            "while measuring its block, and no other bench of its class was left to "
            "measure it again; nothing was written",
            hint="run again when the cluster is whole, or without --ray")

    def _drop(self, lost: list[int]) -> None:
        """The lost benches out of the run: later looks and the confirmation's engines
        use the others; the verdict names them (``lost_nodes``)."""
        ray = ray_module()
        for j in sorted(set(lost), reverse=True):
            self.lost_nodes.append(self.nodes[j]["id"])
            try:
                ray.kill(self.actors[j], no_restart=True)
            except Exception:  # noqa: BLE001 - its node is gone with it
                pass
            del self.actors[j], self.nodes[j]

    # ------------------------------------------------------------------ the record
    def spread(self) -> dict:
        """Where the latency ran, for the verdict: the nodes, their class, and every
        block (its node, its first round number, its warm-up and timed rounds)."""
        return {"nodes": [n["id"] for n in self.nodes],
                "classes": sorted({n["class"] for n in self.nodes}),
                "blocks": list(self.record), "rounds_on_one_node": 1.0,
                "lost_nodes": list(self.lost_nodes)}

    def _get(self, ref, i: int | None, doing: str, lost: list[int] | None = None):
        """``ray.get(ref)`` of bench ``i``; its loss an error naming its node, or, with
        ``lost``, None and ``i`` added to ``lost`` (a block to measure again)."""
        ray = ray_module()
        node = "?" if i is None or i >= len(self.nodes) else self.nodes[i]["id"]
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as e:
            if lost is not None and i is not None:
                lost.append(i)
                return None
            raise PatchgateError(
                f"latency on the Ray cluster: the bench on node {node} was lost while "
                f"{doing} ({str(e).splitlines()[0][:160]}); nothing was written",
                hint="run again when the cluster is whole, or without --ray") from e
        except ray.exceptions.RayTaskError as e:
            raise task_error(e, f"latency on the Ray cluster: the bench on node {node} "
                             f"failed while {doing}") from e

    def close(self) -> None:
        """Every engine closed, every actor killed (safe to call twice)."""
        actors, self.actors = self.actors, []
        end_actors(actors, timeout_s=60)


def check(opts, profile) -> None:
    """What a run spread over a cluster cannot do, refused before anything starts: the
    latency benches time the static set only, and ``--explain`` and ``--attribute``
    call engines from here."""
    if opts.ray_benches == 0:
        return
    if profile.scenarios != "static":
        raise PatchgateError(f"--ray: profile {profile.name} runs the {profile.scenarios} "
                             "set; latency spreads over a cluster for the static set only",
                             hint="pass --ray-benches 0 to time it on this machine")
    for flag, on in (("--explain", opts.explain), ("--attribute", opts.attribute)):
        if on:
            raise PatchgateError(f"{flag} with --ray: it calls the engines, which run on the "
                                 "cluster's nodes", hint=f"pass --ray-benches 0 (latency "
                                 f"here) or run {flag} without --ray")


def benches(address: str, nodes: int | None = None, options: dict | None = None,
            say: Callable[[str], None] = lambda _: None) -> Callable[..., Bench]:
    """A factory of :class:`Bench` for :meth:`Configurations.spread_latency`:
    ``make(profile, sets, described)``, one bench per node that offers a bench slot
    (``nodes``: that many, at most one a node)."""
    slots = connect(address)
    count = nodes or len(slots)
    if count > len(slots):
        raise PatchgateError(f"--ray-benches {count}: the cluster has {len(slots)} node(s) "
                             f"with a {SLOT}", hint=f"pass at most {len(slots)}")

    def make(profile, sets: dict, described: dict[str, str]) -> Bench:
        return Bench(profile, sets, described, count, options, say)

    return make
