"""A Ray cluster as patchgate uses it: connect, list the nodes that may time, and name
each node's hardware class.

Ray is an optional extra (``pip install -e .[ray]``; the dev setup installs it). A node
offers ``bench_slot`` (a custom Ray resource, one per node: ``ray start --resources
'{"bench_slot": 1}'``) when it may run timing work; a task that times holds the slot, so
two timing phases never share a node. A node's hardware class is the machine key of its
environment fingerprint (:func:`patchgate.store.environment.machine_key`: CPU model and
flags, GPU, driver, the versions of the software that runs the model); samples of two
classes are never compared with each other.
"""

from __future__ import annotations

from ..errors import PatchgateError

SLOT = "bench_slot"  # the Ray resource a node offers when it may run timing work


def ray_module():
    """Ray, or an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise PatchgateError("--ray needs Ray, which is not installed",
                             hint="pip install -e .[ray] (the dev setup has it)") from None
    return ray


def connect(address: str) -> dict:
    """Connect to the cluster at ``address`` (``auto``: the one this machine belongs to;
    ``ray://host:10001``; an address ``ray start`` printed); a driver that is connected
    already stays so. Returns ``{node id: slots}`` of the nodes that offer a bench slot,
    or an error when none does."""
    ray = ray_module()
    if not ray.is_initialized():
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise PatchgateError(f"--ray {address}: cannot connect ({e})",
                                 hint="start a cluster (`ray start --head --resources "
                                 f"'{{\"{SLOT}\": 1}}'`) or pass its address") from e
    slots = {n["NodeID"]: int(n["Resources"].get(SLOT, 0)) for n in ray.nodes()
             if n.get("Alive") and n["Resources"].get(SLOT, 0) >= 1}
    if not slots:
        raise PatchgateError(f"the Ray cluster at {address} has no node that offers "
                             f"{SLOT}: nothing may time there",
                             hint=f"start each timing node with --resources "
                             f"'{{\"{SLOT}\": 1}}'")
    return slots


def node_here(engine: str, device: str) -> dict:
    """The node this code runs on: its Ray id and hardware class (in a Ray task)."""
    from ..store import environment

    ray = ray_module()
    fp = environment.fingerprint(engine, device)
    return {"id": ray.get_runtime_context().get_node_id(),
            "class": environment.machine_key(fp)}


def end_actors(actors: list, timeout_s: float) -> None:
    """Every actor's ``close()`` called (its engines end), awaited up to ``timeout_s``,
    then every actor killed; actors already gone are skipped."""
    ray = ray_module()
    closing = []
    for a in actors:
        try:
            closing.append(a.close.remote())
        except Exception:  # noqa: BLE001 - an actor already gone
            pass
    if closing:
        ray.wait(closing, num_returns=len(closing), timeout=timeout_s)
    for a in actors:
        try:
            ray.kill(a)
        except Exception:  # noqa: BLE001 - an actor already gone
            pass


def task_error(e, what: str) -> PatchgateError:
    """The patchgate error a Ray task raised (a patch failing in its engine, say), or one
    that says ``what`` failed and with which error."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, PatchgateError):
        return cause
    return PatchgateError(f"{what} ({type(cause or e).__name__}: "
                          f"{str(cause or e).splitlines()[0][:200]})",
                          hint="see the cluster's logs (ray logs)")


def one_class(classes: dict[str, list[str]], what: str) -> None:
    """Refuse to compare across hardware classes: ``classes`` maps each class to the
    items (runs, blocks) measured on it."""
    if len(classes) > 1:
        named = "; ".join(f"{c}: {', '.join(items)}" for c, items in sorted(classes.items()))
        raise PatchgateError(f"{what} mixes hardware classes ({named})",
                             hint="compare on one class: give the nodes of one class the "
                             f"{SLOT} resource, or run on one machine")
