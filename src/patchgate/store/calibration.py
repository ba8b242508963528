"""The calibration file: a profile's measured latency error rates, and how reports
quote them.

``patchgate calibrate`` (:mod:`patchgate.tools.calibrate`) measures the rates and writes
``baselines/<profile>/calibration.json`` (:meth:`BaselineStore.calibration_path`). The
rates and the noise are those of one hardware class (the machine key of the file's
environment fingerprint, :func:`patchgate.store.environment.machine_key`): a calibration
of another class goes beside it, to ``calibration-<machine key>.json``
(:func:`path_for`), and never replaces it. Every verdict of that profile quotes the file
of its own class ("measured on this runner: 1/20 false alarms, 20/20 caught at 5 %"),
else the profile's main file, saying it was measured on another runner
(:func:`pick`). A file has ``kind`` and ``schema_version``; :func:`load` refuses others
and says what to do.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PatchgateError
from ..files import read_json
from . import environment
from .baselines import BaselineStore

SCHEMA_VERSION = 2
READABLE = (1, 2)  # 1: rejections only, no conditions
KIND = "patchgate.calibration"


def load(path: Path) -> dict | None:
    """A calibration file, or None if there is none; a broken one is an error naming it."""
    if not path.exists():
        return None
    hint = f"run `patchgate calibrate` again, or delete {path}"
    doc = read_json(path, hint=hint)
    if doc.get("kind") != KIND or doc.get("schema_version") not in READABLE:
        raise PatchgateError(f"{path}: not a calibration file of schema "
                             f"{' or '.join(map(str, READABLE))}", hint=hint)
    if not isinstance(doc.get("summary"), dict) or "kinds" not in doc["summary"]:
        raise PatchgateError(f"{path}: summary.kinds missing", hint=hint)
    return doc


def _count(k: dict, what: str) -> int | None:
    c = k.get(what)
    return c.get("count") if isinstance(c, dict) else (c if what == "rejected" else None)


def measured_apart(k: dict) -> float | None:
    """The slowdown a planted kind's runs measured (median score ratio - 1) where it is
    not the planted one's size within a factor of 2 (a planted 5 % measured +21.7 %: the
    catch rate is that of the size measured); None where it is, and for A/A runs."""
    planted, ratio = k.get("planted") or 0.0, k.get("median_score_ratio")
    if planted <= 0 or ratio is None:
        return None
    measured = ratio - 1
    return None if planted / 2 <= measured <= 2 * planted else measured


def _text(kinds: dict) -> str:
    parts = []
    for label, k in sorted(kinds.items(), key=lambda kv: kv[1]["planted"]):
        n, rejected = k["runs"], _count(k, "rejected")
        accepted = _count(k, "accepted")
        if k["planted"] == 0:
            part = f"{rejected}/{n} false alarms"
            inconclusive = _count(k, "inconclusive")
            if inconclusive is not None:
                part += f", {inconclusive}/{n} inconclusive"
        else:
            part = f"{rejected}/{n} caught at {label}"
            apart = measured_apart(k)
            if apart is not None:
                part += f" (measured {100 * apart:+.1f} %)"
            if accepted is not None:
                part += f" ({accepted}/{n} accepted)"
        parts.append(part)
    return "; ".join(parts)


def machine_of(doc: dict) -> str:
    """The hardware class a calibration was measured on: its environment's machine key."""
    return environment.machine_key(doc.get("environment") or {})


def paths(store: BaselineStore) -> list[Path]:
    """The profile's calibration files that exist: the main one first, then those of
    other hardware classes (``calibration-<machine key>.json``), by name."""
    main = store.calibration_path()
    others = sorted(main.parent.glob(f"{main.stem}-*{main.suffix}"))
    return [p for p in (main, *others) if p.exists()]


def path_for(store: BaselineStore, env: dict) -> Path:
    """Where a calibration measured in environment ``env`` goes: the main file where
    there is none yet or it holds the same hardware class; else the class's own file
    beside it (a broken main file is an error naming it)."""
    main = store.calibration_path()
    doc = load(main)
    key = environment.machine_key(env)
    if doc is None or machine_of(doc) == key:
        return main
    return main.with_name(f"{main.stem}-{key}{main.suffix}")


def quotes(store: BaselineStore) -> list[dict]:
    """The quote (:func:`quote`) of every calibration file of the profile, the main
    file's first; ``[]`` where there is none."""
    return [quote(load(p)) for p in paths(store)]


def pick(found: list[dict], env: dict) -> dict | None:
    """The quote a verdict measured in ``env`` gives: that of its own hardware class
    (``this_runner`` True), else the main file's (``this_runner`` False: its rates and
    noise are another machine's, the verdict says so and compares no noise with them);
    None where the profile has no calibration."""
    key = environment.machine_key(env)
    for q in found:
        if q["machine"] == key:
            return {**q, "this_runner": True}
    return {**found[0], "this_runner": False} if found else None


def own_noise(quote: dict | None) -> float | None:
    """The calibrated A/A noise a verdict's own noise may be compared with: that of a
    quote of its own hardware class (a verdict's quote from before ``this_runner`` was
    recorded counts as its own); None for another runner's quote, or none."""
    if not quote or not quote.get("this_runner", True):
        return None
    return quote.get("noise")


def quote(doc: dict) -> dict:
    """What a verdict says about the measured error rates of a calibration ``doc``:
    "1/20 false alarms, 0/20 inconclusive; 20/20 caught at 10 % (0/20 accepted)", per
    condition, the A/A noise the runner had when calibrated (``noise``, quiet), and the
    hardware class (``machine``) and machine (``runner``) it was measured on."""
    summary = doc["summary"]
    conditions = summary.get("conditions") or {"quiet": summary["kinds"]}
    texts = {cond: _text(kinds) for cond, kinds in conditions.items()}
    text = texts.get("quiet") or next(iter(texts.values()))
    if "load" in texts:
        text += f"; under load: {texts['load']}"
    env = doc.get("environment") or {}
    return {"text": text, "created": doc.get("created"), "settings": doc.get("settings"),
            "cpu": env.get("cpu_model"), "machine": machine_of(doc),
            "runner": environment.describe(env),
            "kinds": summary["kinds"], "conditions": texts,
            "noise": (summary.get("noise") or {}).get("quiet")}
