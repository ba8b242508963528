"""What a reviewer must know before the tables: what the run ran on, and every caveat.

A verdict is read in seconds when its first lines say the decision, the score and what
could make it mean something else than it seems: a stored reference accuracy forced in
from another environment, a profile file from outside ``profiles/`` that reuses a
built-in profile's name, command-line overrides of the profile, and edits to the stored
state that the run ignored. Each is one short sentence; the details stay in the notes.
"""

from __future__ import annotations

FORCED = "stored reference accuracy from another environment used (--force-environment): "


def device(verdict: dict) -> str | None:
    """The machine the run measured on: its GPU, else its CPU model."""
    env = verdict.get("environment") or {}
    return env.get("gpu_name") or env.get("cpu_model")


def caveats(verdict: dict) -> list[str]:
    """One sentence per caveat, most important first (none for a plain run)."""
    out = []
    for note in verdict.get("notes", []):
        if note.startswith(FORCED):
            keys = [part.split(":", 1)[0].strip() for part in note[len(FORCED):].split("; ")]
            out.append("the reference accuracy was measured in another environment and "
                       f"forced in (--force-environment; differs in {', '.join(keys)})")
    source = verdict.get("profile_source") or {}
    if source and not source.get("builtin"):
        out.append(f"profile {verdict.get('profile', '?')} came from {source['file']} "
                   f"(sha256 {source['sha256'][:12]}), not from profiles/: its settings "
                   "may differ from the built-in profile of that name")
    overrides = [o for o in source.get("overrides", []) if o != "--force-environment"]
    if overrides:
        out.append(f"the profile was overridden on the command line: {', '.join(overrides)}")
    if (verdict.get("base") or {}).get("differs"):
        out.append("this change edits the stored state (baselines/, CHANGELOG.md); it was "
                   f"judged against the base, the edit ignored: "
                   f"{', '.join(verdict['base']['differs'])}")
    return out
