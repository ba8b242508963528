"""``--explain``: why a scenario got slower, from one profile of each side.

For a scenario found slower, the current baseline and the candidate each run it
once under a profiler (:mod:`patchgate.engines.profiling`; never timed into the
verdict).
Each profile becomes tables of rows ``{name, where, kind, count, total_s}``:

- ``torch``: torch.profiler's operators, self CPU time (``kind`` "op", counted in
  calls);
- ``gpu``: GPU kernels, device time (``kind`` "kernel", counted in launches), from
  torch.profiler on CUDA or from SGLang's trace files;
- ``python``: cProfile's functions, self time (``kind`` "function"), each with the
  caller that spent most time in it. torch.profiler never sees pure-Python time (a
  ``time.sleep`` in a patch), cProfile does.

:func:`diff` matches rows by (name, where) and orders the changes by how much time
they add or remove; :func:`sentence` says one in words ("+2.1 ms: 32 more
`rmsnorm_kernel` launches"). One profile is one sample: small changes are noise, the
large ones point at the cause. The tables and their diff are pure (rows in, changes
out); :func:`run` at the end drives the profiling through a callable (an engine's
``profile_generate``, :func:`in_engines`, or a server's profiler,
:meth:`patchgate.latency.serving.configurations.ServingConfigurations.profile_one`) and
writes nothing itself: the profilers write their traces into
``<verdict>.explain/<scenario>/<side>/``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

TOP = 5  # changes per scenario in the report
UNITS = {"kernel": "launches", "op": "calls", "function": "calls"}


def diff(before: list[dict], after: list[dict], source: str) -> list[dict]:
    """Per (name, where): counts and times before and after, ``delta_s`` = after - before,
    largest absolute change first. Rows present on one side only count as 0 on the
    other (a new function, a kernel no longer launched)."""
    keyed_b = {(r["name"], r["where"]): r for r in before}
    keyed_a = {(r["name"], r["where"]): r for r in after}
    out = []
    for key in dict.fromkeys([*keyed_b, *keyed_a]):
        b, a = keyed_b.get(key), keyed_a.get(key)
        ref = a or b
        t_b = b["total_s"] if b else 0.0
        t_a = a["total_s"] if a else 0.0
        out.append({"source": source, "name": key[0], "where": key[1], "kind": ref["kind"],
                    "count_before": b["count"] if b else 0,
                    "count_after": a["count"] if a else 0,
                    "time_before_s": t_b, "time_after_s": t_a, "delta_s": t_a - t_b,
                    "caller": (a or {}).get("caller") or (b or {}).get("caller")})
    out.sort(key=lambda c: (-abs(c["delta_s"]), c["name"]))
    return out


def sentence(change: Mapping) -> str:
    """One change in words: "+2.1 ms: 32 more `rmsnorm_kernel` launches"."""
    ms = 1000 * change["delta_s"]
    unit = UNITS.get(change["kind"], "calls")
    n = change["count_after"] - change["count_before"]
    name = f"`{change['name']}`" + (f" ({change['where']})" if change.get("where") else "")
    if n:
        what = f"{abs(n)} {'more' if n > 0 else 'fewer'} {name} {unit} " \
               f"({change['count_before']} -> {change['count_after']})"
    else:
        what = f"{name}, {change['count_after']} {unit} on both sides"
    caller = f", called from `{change['caller']}`" if change.get("caller") else ""
    return f"{ms:+.1f} ms: {what}{caller} [{change['source']}]"


def top_changes(changes: Iterable[dict], n: int = TOP) -> list[dict]:
    """The ``n`` largest changes across tables (largest absolute time change first)."""
    finite = [c for c in changes if math.isfinite(c["delta_s"]) and c["delta_s"] != 0]
    return sorted(finite, key=lambda c: -abs(c["delta_s"]))[:n]


def compare(current: Mapping, candidate: Mapping, n: int = TOP) -> dict:
    """The explanation of one scenario from two profiles (``{"tables": {source: rows},
    "wall_s": {source: seconds}, "files": [...]}`` each): every table's diff, and the
    top changes over all of them in words."""
    sources = [s for s in current.get("tables", {}) if s in candidate.get("tables", {})]
    diffs = {s: diff(current["tables"][s], candidate["tables"][s], s) for s in sources}
    top = top_changes([c for d in diffs.values() for c in d], n)
    return {"wall_s": {"current": current.get("wall_s", {}),
                       "candidate": candidate.get("wall_s", {})},
            "files": {"current": current.get("files", []),
                      "candidate": candidate.get("files", [])},
            "changes": {s: d[: 4 * n] for s, d in diffs.items()},
            "top": [sentence(c) for c in top]}


# ---------------------------------------------------------------- running it (impure)
def targets(lat) -> list[tuple[object, str]]:
    """The scenarios to explain, with why: each one found slower than the current
    baseline; if only the pooled score is slower, the scenario with the largest ratio."""
    from ..stats import SLOWER
    from .decide import SCORE

    decisions = lat.decisions.get("current", {})
    out = [(s, f"slower: {_pct(decisions[s.name].comparison.ratio)} vs the current baseline")
           for s in lat.scenarios if lat.final("current", s.name) == SLOWER]
    if out or SCORE not in decisions or lat.final("current", SCORE) != SLOWER:
        return out
    worst = max(lat.scenarios, key=lambda s: decisions[s.name].comparison.ratio)
    return [(worst, "the pooled score is slower; this scenario changed most "
                    f"({_pct(decisions[worst.name].comparison.ratio)})")]


def _pct(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f} %"


def folder_for(json_path: Path | None) -> Path:
    """Where the traces go: ``<verdict>.explain/`` beside the verdict file, else a new
    folder under the system's temporary directory (the report names it)."""
    if json_path is not None:
        return Path(json_path).with_suffix(".explain")
    import tempfile

    return Path(tempfile.mkdtemp(prefix="patchgate-explain-"))


def in_engines(configs, lat, seed: int, out_dir: Path, say=lambda _: None,
               explicit_folder: bool = False) -> dict:
    """:func:`run` on the configurations' loaded engines (the static set): each side's
    engine profiles the scenario's own batch (``profile_generate``). ``explicit_folder``
    puts the folder's full path in the block (no verdict file to sit beside)."""
    from .scenarios import prompt_ids

    vocab = min(e.vocab_size for e in configs.by_name().values())

    def one(label, scenario, folder):
        return configs.engine(label).profile_generate(prompt_ids(scenario, vocab, seed),
                                       scenario.output_len, str(folder))

    block = run(one, lat, out_dir, say)
    if explicit_folder:
        block["folder"] = str(out_dir)
    return block


def run(profile_one, lat, out_dir: Path, say=lambda _: None) -> dict:
    """Profile every target scenario once for the current baseline and once for the
    candidate (``profile_one(label, scenario, folder) -> profile``, the engine's or
    server's), and compare. The ``explain`` block of the verdict; its timings never
    enter the measured samples."""
    out_dir = Path(out_dir)
    found = targets(lat)
    block: dict = {"folder": out_dir.name, "scenarios": []}
    if not found:
        block["note"] = "nothing was slower than the current baseline: nothing to explain"
        return block
    for scenario, why in found:
        say(f"explain: profiling {scenario.name} once for the current baseline and once for "
            "the candidate (not timed into the verdict)")
        sides = {label: profile_one(label, scenario, out_dir / scenario.name / label)
                 for label in ("current", "candidate")}
        entry = {"name": scenario.name, "why": why} | compare(sides["current"],
                                                             sides["candidate"])
        entry["files"] = {label: [f"{scenario.name}/{label}/{f}" for f in files]
                          for label, files in entry["files"].items()}
        block["scenarios"].append(entry)
    return block
