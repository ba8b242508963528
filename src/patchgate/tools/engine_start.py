"""Where an engine's start goes: ``python -m patchgate.tools.engine_start --profile P``.

A GPU verdict starts two engines, and four when it confirms a slowdown; on
``h200-minicpm8b`` the engines phase took 94-128 s of a 346 s verdict. This tool starts
one engine of the profile (no patches) the way the gate does and times, each on its own:

- ``import``: importing the engine's package (SGLang: 15-20 s, paid once per gate run);
- ``start``: the engine's constructor until it is ready (SGLang: the scheduler process,
  weights, memory pool, CUDA graphs); with ``--log-level info`` SGLang's own log lines
  say which of these took the time (pipe stderr through a timestamping loop);
- ``first_call`` and ``second_call`` per scenario: the first call of each scenario's
  shape against the next one on fresh token ids; the difference is what a warm-up round
  pays for;
- ``close``: shutting the engine down.

It prints one JSON document (stdout) and writes it to ``--json``. Nothing is compared
and no stored file is read or written.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from ..files import atomic_write_json


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def measure(profile, package: str | None = None, patches=()) -> dict:
    """Start one engine of ``profile`` with ``patches`` (default none), time the phases
    of the module docstring, close it. ``package``: the module whose import is timed
    first (default: the engine's own, ``sglang`` for the SGLang engine)."""
    from ..engines.factory import start
    from ..latency.measure import Rounds
    from ..latency.measure import measure as timed_rounds
    from ..latency.scenarios import make_scenarios

    package = package or {"sglang": "sglang"}.get(profile.engine)
    out: dict = {"profile": profile.name, "engine": profile.engine,
                 "patches": [p.name for p in patches]}
    if package:
        _, out["import_s"] = _timed(lambda: importlib.import_module(package))
    engine, out["start_s"] = _timed(lambda: start(profile, list(patches), "reference").ready())
    try:
        calls = {}
        for scenario in make_scenarios(profile):
            first = timed_rounds({"reference": engine}, [scenario],
                                 Rounds(1, 0, profile.seed, 0.0, first=0))
            second = timed_rounds({"reference": engine}, [scenario],
                                  Rounds(1, 0, profile.seed, 0.0, first=1))
            calls[scenario.name] = {"first_call_s": first["reference"][scenario.name][0],
                                    "second_call_s": second["reference"][scenario.name][0]}
        out["calls"] = calls
        out["warmup_excess_s"] = round(sum(c["first_call_s"] - c["second_call_s"]
                                           for c in calls.values()), 3)
    finally:
        _, out["close_s"] = _timed(engine.close)
    return out


def main(argv: list[str] | None = None) -> int:
    from ..patches import discover
    from ..profile import get_profile

    ap = argparse.ArgumentParser(prog="python -m patchgate.tools.engine_start",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True, help="profile name or .toml file")
    ap.add_argument("--log-level", help="the engine's log level (SGLang: info shows its "
                    "start-up steps on stderr)")
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument("--patches", type=Path, help="a folder of patches to start the engine "
                    "with (default: none; one with apply() also runs the sandbox there)")
    args = ap.parse_args(argv)
    profile = get_profile(args.profile)
    if args.log_level:
        profile = profile.with_overrides(
            engine_args={**profile.engine_args, "log_level": args.log_level})
    patches = discover(args.patches) if args.patches else []
    doc = measure(profile, patches=patches)
    if args.json:
        atomic_write_json(args.json, doc)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
