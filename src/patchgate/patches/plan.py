"""Which patches each configuration of a run gets, from the folder and the stored state.

- ``candidate``: every patch in the folder that applies to the profile's engine;
- ``current``: the accepted patches (named, with the same sha256, in ``current.json``);
- ``best``: the fastest accepted state (``best.json``), when all its patches are still
  in the folder;
- ``reference``: no patches.

Pure: patches and stored records in, patch sets and notes out.
"""

from __future__ import annotations

from .patch import Patch, skipped


def plan(patches: list[Patch], engine: str, current: dict | None, best: dict | None = None
         ) -> tuple[dict[str, list[Patch]], list[str]]:
    """The patch set of each configuration, and notes about the plan. ``best`` (the
    fastest accepted state) joins only if all its patches are still in the folder."""
    notes = [f"{p.name} does not apply to engine {engine} (ENGINES={list(p.engines)}): skipped"
             for p in skipped(patches, engine)]
    applicable = [p for p in patches if p.applies_to(engine)]
    accepted = {(p["name"], p["sha256"]) for p in (current or {}).get("patches", [])}
    cur = [p for p in applicable if (p.name, p.sha256) in accepted]
    present = {(p.name, p.sha256) for p in applicable}
    for name, digest in sorted(accepted - present):
        notes.append(f"{name} is in the current baseline but not in the patch folder "
                     f"(or its content changed, sha256 {digest[:12]}...)")
    for p in applicable:
        if (p.name, p.sha256) not in accepted:
            notes.append(f"new: {p.name} — {p.title}")
    sets = {"candidate": applicable, "current": cur, "reference": []}
    if best is not None:
        wanted = [(p["name"], p["sha256"]) for p in best.get("patches", [])]
        missing = [name for name, digest in wanted if (name, digest) not in present]
        if missing:
            notes.append("the fastest accepted state cannot be measured: "
                         f"{', '.join(missing)} changed or left the patch folder")
        else:
            sets["best"] = [p for p in applicable if (p.name, p.sha256) in set(wanted)]
    return sets, notes


def known(current: dict | None) -> set[tuple[str, str]]:
    """(name, sha256) of the patches the current baseline has seen: those it contains
    and those for another engine that were in the folder when it was written."""
    current = current or {}
    seen = current.get("patches", []) + current.get("extra", {}).get("other_engines", [])
    return {(p["name"], p["sha256"]) for p in seen}


def untested(patches: list[Patch], engine: str, current: dict | None) -> str | None:
    """Why nothing can be tested: there are new patches, and none of them applies to
    this profile's engine (None when something can be tested). A patch for another
    engine that the current baseline has already seen is not new."""
    seen = known(current)
    new = [p for p in patches if (p.name, p.sha256) not in seen]
    if not new or any(p.applies_to(engine) for p in new):
        return None
    names = ", ".join(f"{p.name} (ENGINES={list(p.engines)})" for p in new)
    return (f"nothing was tested: every new patch is for another engine than this "
            f"profile's {engine}: {names}; run the gate on a profile of that engine")
