"""Accuracy spread over a Ray cluster: one configuration's engine in several actors.

The accuracy guard gives its engine whole batches, the very batches a serial run forms
(:func:`patchgate.guard.lm_model.answer_batches`: same order, same contents). An
:class:`EnginePool` stands in for one configuration's engine there: it sends each batch
to whichever of its actors is free and gives the answers back in the batches' order.
Each batch is computed whole by one engine of that configuration, on one hardware
class, so every item's score is the serial run's, and the sequential guard sees items,
not shards.

- **Actors.** One engine of one configuration each (:class:`EngineActor`): one GPU on a
  GPU profile, one CPU otherwise, spread over the nodes. Each tells its node and hardware
  class; a pool whose actors span two classes is refused, and so is a run whose
  candidate and reference pools do (:func:`.cluster.one_class`).
- **GPUs.** The candidate's and the reference's pools answer side by side. Where the
  cluster has a GPU for every engine of both, each engine gets one; where it has one for
  every engine of one pool (one GPU: ``guard --ray`` on a single-GPU machine), each
  engine takes half a GPU and half its memory, as the serial run's two engines share one
  GPU (:func:`gpu_share`); with fewer the run is refused before any engine starts.
- **Faults.** An actor lost mid-batch (its node died): the batch goes to another actor of
  the pool; with none left the run is an error naming the node, and nothing is written.
- **Nothing left behind.** :meth:`EnginePool.close` closes every engine and kills every
  actor: no actor, engine process or GPU memory stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..engines.base import described
from ..errors import PatchgateError
from .cluster import end_actors, node_here, one_class, ray_module, task_error

START_TIMEOUT_S = 600.0  # actors not ready by then: the cluster lacks what they ask for


class EngineActor:
    """One engine of one configuration, in a Ray actor (wrapped by :func:`_actor_class`)."""

    def __init__(self, profile, patches, label: str, share: float = 1.0):
        from ..engines import factory

        self.engine = factory.start(profile, patches, label, share).ready()
        self.node = node_here(profile.engine, profile.device)

    def info(self) -> dict:
        return {"node": self.node, "vocab_size": self.engine.vocab_size}

    def answer(self, verb: str, args: tuple):
        return getattr(self.engine, verb)(*args)

    def close(self) -> None:
        self.engine.close()


def gpu_share(gpus: float, actors: int, pools: int = 2) -> float:
    """The part of a GPU each accuracy engine takes when ``pools`` pools of ``actors``
    engines answer side by side on a cluster of ``gpus`` GPUs: a whole GPU where there
    is one for every engine, else an equal part of one (1 / ``pools``: a GPU holds
    ``pools`` engines) where there is one for every engine of a pool. Fewer GPUs: an
    error that says how many the pools need."""
    if gpus >= actors * pools:
        return 1.0
    if gpus >= actors:
        return 1.0 / pools
    raise PatchgateError(f"accuracy on the Ray cluster: {actors} engine(s) a configuration "
                         f"need at least {actors} GPU(s); the cluster has {gpus:g}",
                         hint="add GPU nodes, or pass fewer --ray-actors")


def _actor_class(profile, options: dict | None, share: float = 1.0):
    """:class:`EngineActor` as a Ray actor class: ``share`` of a GPU each on a GPU
    profile, else one CPU; ``options`` (Ray's ``.options``: resources, a runtime_env)
    on top."""
    ray = ray_module()
    need = {"num_gpus": share} if profile.device == "cuda" else {"num_cpus": 1}
    return ray.remote(max_restarts=0, max_task_retries=0, **need)(EngineActor).options(
        scheduling_strategy="SPREAD", **(options or {}))


class EnginePool:
    """``actors`` engines of one configuration (``label``, ``patches``) on the cluster
    this process is connected to; the accuracy guard's engine for that configuration."""

    name = "ray-pool"

    def __init__(self, profile, patches, label: str, actors: int, *,
                 options: dict | None = None, say: Callable[[str], None] = lambda _: None,
                 share: float = 1.0):
        ray = ray_module()
        self.label, self.profile, self.share = label, profile, share
        self._patch_names = [p.name for p in patches]
        self._tokenizer = None
        cls = _actor_class(profile, options, share)
        self.actors = [cls.remote(profile, list(patches), label, share)
                       for _ in range(actors)]
        self.nodes: dict = {}  # actor -> its node {"id", "class"}
        self.batches: dict[str, int] = {}  # node id -> batches it answered
        self.lost: list[str] = []  # nodes whose actor was lost mid-run
        t0 = time.perf_counter()
        try:
            refs = {a.info.remote(): a for a in self.actors}
            ready, pending = ray.wait(list(refs), num_returns=len(refs),
                                      timeout=START_TIMEOUT_S)
            if pending:
                raise PatchgateError(
                    f"accuracy on the Ray cluster: {len(pending)} of {actors} engines of "
                    f"{self.describe()} not started after {START_TIMEOUT_S:.0f} s",
                    hint="the cluster lacks the resources they ask for (one GPU each on a "
                    "GPU profile, one CPU otherwise): add nodes or pass fewer --ray-actors")
            infos = {refs[r]: _get(ray, r, f"starting an engine of {self.describe()}")
                     for r in ready}
            self.nodes = {a: i["node"] for a, i in infos.items()}
            self.vocab_size = min(i["vocab_size"] for i in infos.values())
            one_class(self.classes(), f"the accuracy engines of {self.describe()}")
        except BaseException:
            self.close()
            raise
        each = "" if profile.device != "cuda" else (
            ", a GPU each" if share == 1 else f", {share:g} of a GPU each")
        say(f"accuracy: {actors} engine(s) of {self.describe()} on "
            f"{len({n['id'] for n in self.nodes.values()})} Ray node(s){each}, ready in "
            f"{time.perf_counter() - t0:.1f} s")

    def classes(self) -> dict[str, list[str]]:
        """``{hardware class: [node ids]}`` of the actors."""
        out: dict[str, list[str]] = {}
        for n in self.nodes.values():
            ids = out.setdefault(n["class"], [])
            if n["id"] not in ids:
                ids.append(n["id"])
        return out

    def describe(self) -> str:
        return described(self.label, self._patch_names)

    def ready(self) -> EnginePool:
        return self

    @property
    def tokenizer(self):
        """The model's tokenizer, loaded here (the guard encodes and decodes text here;
        the actors get token ids)."""
        if self._tokenizer is None and self.profile.guard == "lm_eval":
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.profile.model_path(),
                                                            trust_remote_code=True)
        return self._tokenizer

    def answer_all(self, verb: str, batches: list[tuple], tick=lambda n: None) -> list:
        """Each batch answered whole by one free actor; the answers in the batches'
        order. A batch whose actor is lost goes to another one."""
        ray = ray_module()
        out: list = [None] * len(batches)
        queue = list(range(len(batches)))[::-1]
        free = [a for a in self.actors if a in self.nodes]
        running: dict = {}
        try:
            while queue or running:
                while queue and free:
                    i, actor = queue.pop(), free.pop(0)
                    running[actor.answer.remote(verb, batches[i])] = (i, actor)
                if not running:
                    raise PatchgateError(
                        f"accuracy on the Ray cluster: every engine of {self.describe()} "
                        f"was lost (nodes {', '.join(self.lost)})",
                        hint="nothing was written; run again when the cluster is whole, "
                        "or without --ray")
                done, _ = ray.wait(list(running), num_returns=1)
                i, actor = running.pop(done[0])
                try:
                    out[i] = ray.get(done[0])
                except ray.exceptions.RayActorError:
                    self._lose(actor)
                    queue.append(i)
                    continue
                except ray.exceptions.RayTaskError as e:
                    raise _cause(e, f"{verb} on an engine of {self.describe()}") from e
                node = self.nodes[actor]["id"]
                self.batches[node] = self.batches.get(node, 0) + 1
                free.append(actor)
                tick(len(batches[i][0]))
        except BaseException:
            for ref in running:  # Ctrl-C or an error: the batches still out are cancelled
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - one already done or its actor gone
                    pass
            raise
        return out

    def _lose(self, actor) -> None:
        node = self.nodes.pop(actor)
        self.lost.append(node["id"])

    def _call(self, verb: str, *args):
        return self.answer_all(verb, [args])[0]

    def loglikelihood(self, requests):
        return self._call("loglikelihood", requests)

    def generate_until(self, prompts, max_new_tokens, stop_ids):
        return self._call("generate_until", prompts, max_new_tokens, stop_ids)

    def generate(self, batch, max_new_tokens):
        return self._call("generate", batch, max_new_tokens)

    def spread(self) -> dict:
        """Where the work ran, for the verdict: actors, nodes and their class, batches
        per node, nodes lost."""
        classes = self.classes()
        out = {"actors": len(self.actors), "nodes": sorted({n for ids in classes.values()
                                                            for n in ids}),
                "classes": sorted(classes), "batches_per_node": dict(self.batches),
                "lost_nodes": list(self.lost)}
        if self.profile.device == "cuda":
            out["gpu_share"] = self.share
        return out

    def close(self) -> None:
        """Every engine closed, every actor killed (safe to call twice)."""
        actors, self.actors = self.actors, []
        end_actors(actors, timeout_s=30)


def _get(ray, ref, doing: str):
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        raise _cause(e, doing) from e
    except ray.exceptions.RayActorError as e:
        raise PatchgateError(f"accuracy on the Ray cluster: an actor died while {doing} "
                             f"({str(e).splitlines()[0][:200]})",
                             hint="see the cluster's logs (ray logs)") from e


def _cause(e, doing: str) -> PatchgateError:
    return task_error(e, f"accuracy on the Ray cluster: {doing} failed")


def pools(address: str, actors: int | None = None, options: dict | None = None,
          say: Callable[[str], None] = lambda _: None):
    """A factory of :class:`EnginePool` for :meth:`Configurations.spread_accuracy`:
    ``make(profile, patches, label)``, each pool ``actors`` engines (default: half the
    nodes that offer a bench slot, at least one: the candidate's and the reference's
    pools answer side by side, one actor a node each), each engine a GPU or a part of
    one on a GPU profile (:func:`gpu_share`); every pool made must be of one hardware
    class."""
    from .cluster import connect

    nodes = connect(address)
    count = actors or max(1, len(nodes) // 2)
    made: list[EnginePool] = []

    def make(profile, patches, label: str) -> EnginePool:
        share = 1.0
        if profile.device == "cuda":
            share = gpu_share(ray_module().cluster_resources().get("GPU", 0), count)
        pool = EnginePool(profile, patches, label, count, options=options, say=say,
                          share=share)
        made.append(pool)
        merged: dict[str, list[str]] = {}
        for p in made:
            for c, ids in p.classes().items():
                merged.setdefault(c, []).extend(f"{p.label} on {n}" for n in ids)
        try:
            one_class(merged, "the accuracy comparison")
        except PatchgateError:
            pool.close()
            raise
        return pool

    make.made = made
    return make
