"""Stored results: the versioned JSON envelope, its validation, and the baseline store.

``baselines/<profile>/`` holds up to three results: ``reference.json`` (the unpatched
model), ``current.json`` (the last accepted state) and ``best.json`` (the fastest
accepted state, when the gate has seen one), beside the history of logged changes
(``history.jsonl``, :mod:`patchgate.store.history`) and the measured error rates
(``calibration.json``, :mod:`patchgate.store.calibration`). Each result is an envelope::

    schema_version  1                       (SCHEMA_VERSION; other versions are refused)
    kind            "patchgate.result"      (KIND)
    profile, role   "default", "reference" | "current" | "best"
    created         ISO-8601 UTC time
    commit          git commit of the repo, or null
    environment     environment.fingerprint(...)
    patches         [{"name", "title", "sha256", ...}]
    scenarios       {name: {"phase": "prefill" | "decode", "batch_size", "input_len",
                            "output_len", "samples_s": [raw seconds], "median_s"}}
    accuracy        null or {"tasks": {task: {"metric", "value",
                                              "samples": [{"id", "score"}]}}, "mean"}
    extra           free-form dict (optional)

Loading validates the whole envelope and names the file and the bad key on error.
Writes are atomic; :meth:`BaselineStore.save_many` replaces several files or none.
"""

from __future__ import annotations

import copy
import math
import statistics
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from .. import files
from ..errors import PatchgateError
from . import history
from .environment import same_environment

SCHEMA_VERSION = 1
KIND = "patchgate.result"
ROLES = ("reference", "current", "best")
PHASES = ("prefill", "decode")
_Fail = Callable[[str, str], NoReturn]
_REQUIRED = ("schema_version", "kind", "profile", "role", "created", "commit", "environment",
             "patches", "scenarios", "accuracy")


class BaselineStore:
    """The stored results of one profile: ``root/<profile>/<role>.json``."""

    def __init__(self, root: Path, profile: str) -> None:
        if not profile or profile in (".", "..") or "/" in profile or "\\" in profile:
            raise PatchgateError(f"invalid profile name {profile!r}",
                                 "a profile name is a plain folder name, e.g. 'default'")
        self.root = Path(root)
        self.profile = profile

    def path(self, role: str) -> Path:
        """Where the result of ``role`` ("reference", "current" or "best") is stored."""
        if role not in ROLES:
            raise PatchgateError(f"unknown baseline role {role!r}",
                                 f"use one of: {', '.join(ROLES)}")
        return self.root / self.profile / f"{role}.json"

    def history_path(self) -> Path:
        """Where the logged changes of this profile are appended."""
        return self.root / self.profile / history.HISTORY

    def calibration_path(self) -> Path:
        """Where the measured error rates of this profile are stored
        (:mod:`patchgate.store.calibration`)."""
        return self.root / self.profile / "calibration.json"

    def history(self) -> list[dict]:
        """The logged changes of this profile (``[]`` if none); errors name the line."""
        return history.read(self.history_path())

    def _recreate_hint(self, path: Path) -> str:
        return (f"delete {path} and re-create it with "
                f"`patchgate guard --profile {self.profile} --accept`")

    def load(self, role: str) -> dict | None:
        """The stored result of ``role``, validated; ``None`` if there is none yet."""
        path = self.path(role)
        if not path.exists():
            return None
        envelope = files.read_json(path, hint=self._recreate_hint(path))
        self._check(envelope, role, path)
        return envelope

    def validate(self, envelope: dict, path: Path) -> None:
        """Raise :class:`PatchgateError` naming ``path`` and the bad key if invalid."""
        hint = self._recreate_hint(path)
        version = envelope.get("schema_version") if isinstance(envelope, dict) else None
        if isinstance(envelope, dict) and envelope.get("kind") == KIND and _is_int(version):
            if version > SCHEMA_VERSION:
                hint = (f"upgrade patchgate: this version reads schema_version "
                        f"{SCHEMA_VERSION} only")
        validate(envelope, path, hint)

    def save(self, role: str, envelope: dict) -> Path:
        """Validate ``envelope`` and write it as the result of ``role``; returns the path."""
        return self.save_many({role: envelope})[0]

    def save_many(self, envelopes: dict[str, dict]) -> list[Path]:
        """Write several results so that either all files are replaced or none.

        Every envelope is validated and serialized before anything is written.
        """
        texts = self.render_many(envelopes)
        files.atomic_write_many(texts)
        return list(texts)

    def render_many(self, envelopes: dict[str, dict]) -> dict[Path, str]:
        """Validate and serialize results: ``{path: text}`` ready for one atomic write
        (with other files, e.g. the change log, through ``files.atomic_write_many``)."""
        texts: dict[Path, str] = {}
        for role, envelope in envelopes.items():
            path = self.path(role)
            self._check(envelope, role, path)
            texts[path] = files.json_text(envelope, path)
        return texts

    def _check(self, envelope: dict, role: str, path: Path) -> None:
        self.validate(envelope, path)
        for key, want in (("profile", self.profile), ("role", role)):
            if envelope[key] != want:
                raise PatchgateError(
                    f"{path}: {key} is {envelope[key]!r}, expected {want!r}",
                    self._recreate_hint(path),
                )


def validate(envelope: object, path: Path, hint: str = "") -> None:
    """Check an envelope's header, keys and types; errors name ``path`` and the key."""

    def fail(key: str, problem: str) -> NoReturn:
        raise PatchgateError(f"{path}: {key}: {problem}", hint)

    if not isinstance(envelope, dict):
        fail("(top level)", f"expected an object, got {type(envelope).__name__}")
    if envelope.get("kind") != KIND:
        fail("kind", f"found {envelope.get('kind')!r}, expected {KIND!r} "
                     "(this file is not a patchgate result)")
    version = envelope.get("schema_version")
    if version != SCHEMA_VERSION or not _is_int(version):
        fail("schema_version", f"found {version!r}, this patchgate reads {SCHEMA_VERSION}")
    for key in _REQUIRED:
        if key not in envelope:
            fail(key, "missing")
    _expect(envelope, "profile", str, fail)
    if envelope["role"] not in ROLES:
        fail("role", f"found {envelope['role']!r}, expected one of {ROLES}")
    _expect(envelope, "created", str, fail)
    try:
        datetime.fromisoformat(envelope["created"])
    except ValueError:
        fail("created", f"not an ISO-8601 time: {envelope['created']!r}")
    if envelope["commit"] is not None:
        _expect(envelope, "commit", str, fail)
    _expect(envelope, "environment", dict, fail)
    if "extra" in envelope:
        _expect(envelope, "extra", dict, fail)
    _expect(envelope, "patches", list, fail)
    for i, patch in enumerate(envelope["patches"]):
        if not isinstance(patch, dict):
            fail(f"patches[{i}]", "expected an object")
        for key in ("name", "title", "sha256"):
            _expect(patch, key, str, fail, f"patches[{i}].")
    _expect(envelope, "scenarios", dict, fail)
    for name, scenario in envelope["scenarios"].items():
        _validate_scenario(scenario, f"scenarios.{name}", fail)
    if envelope["accuracy"] is not None:
        _validate_accuracy(envelope["accuracy"], fail)


def _validate_scenario(scenario: object, where: str, fail: _Fail) -> None:
    if not isinstance(scenario, dict):
        fail(where, "expected an object")
    if scenario.get("phase") not in PHASES:
        fail(f"{where}.phase", f"found {scenario.get('phase')!r}, expected one of {PHASES}")
    for key in ("batch_size", "input_len", "output_len"):
        value = scenario.get(key)
        if not _is_int(value) or value < 1:
            fail(f"{where}.{key}", f"expected a positive integer, got {value!r}")
    samples = scenario.get("samples_s")
    if not isinstance(samples, list) or not samples:
        fail(f"{where}.samples_s", f"expected a non-empty list of seconds, got {samples!r}")
    for i, value in enumerate(samples):
        if not _is_positive(value):
            fail(f"{where}.samples_s[{i}]", f"expected a positive finite number, got {value!r}")
    if not _is_positive(scenario.get("median_s")):
        fail(f"{where}.median_s",
             f"expected a positive finite number, got {scenario.get('median_s')!r}")


def _validate_accuracy(accuracy: object, fail: _Fail) -> None:
    if not isinstance(accuracy, dict):
        fail("accuracy", "expected an object or null")
    _expect(accuracy, "tasks", dict, fail, "accuracy.")
    if not _is_number(accuracy.get("mean")):
        fail("accuracy.mean", f"expected a finite number, got {accuracy.get('mean')!r}")
    for task, record in accuracy["tasks"].items():
        where = f"accuracy.tasks.{task}"
        if not isinstance(record, dict):
            fail(where, "expected an object")
        _expect(record, "metric", str, fail, f"{where}.")
        if not _is_number(record.get("value")):
            fail(f"{where}.value", f"expected a finite number, got {record.get('value')!r}")
        _expect(record, "samples", list, fail, f"{where}.")
        for i, sample in enumerate(record["samples"]):
            if not (isinstance(sample, dict) and isinstance(sample.get("id"), str)
                    and _is_number(sample.get("score"))):
                fail(f"{where}.samples[{i}]",
                     f"expected {{'id': str, 'score': number}}, got {sample!r}")


def _expect(obj: dict, key: str, kind: type, fail: _Fail, prefix: str = "") -> None:
    if key not in obj:
        fail(f"{prefix}{key}", "missing")
    if not isinstance(obj[key], kind):
        fail(f"{prefix}{key}", f"expected {kind.__name__}, got {type(obj[key]).__name__}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_positive(value: object) -> bool:
    return _is_number(value) and value > 0


def make_envelope(profile: str, role: str, environment: dict, measured: dict,
                  commit: str | None = None, extra: dict | None = None) -> dict:
    """A new envelope of ``measured`` (``patches``: records, ``scenarios``: ``{name:
    {..., "samples_s"}}``, ``accuracy``: a result or None): fills ``schema_version``,
    ``kind``, ``created`` and each scenario's ``median_s`` (from ``samples_s``). Inputs
    are copied, not shared. Nothing is validated here; :meth:`BaselineStore.save` does it.
    """
    patches, accuracy = measured.get("patches", []), measured.get("accuracy")
    stored_scenarios = {}
    for name, scenario in measured.get("scenarios", {}).items():
        scenario = copy.deepcopy(scenario)
        samples = [float(s) for s in scenario.get("samples_s") or []]
        scenario["samples_s"] = samples
        if samples:
            scenario["median_s"] = statistics.median(samples)
        stored_scenarios[name] = scenario
    envelope = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "profile": profile,
        "role": role,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "environment": copy.deepcopy(environment),
        "patches": copy.deepcopy(patches),
        "scenarios": stored_scenarios,
        "accuracy": copy.deepcopy(accuracy),
    }
    if extra is not None:
        envelope["extra"] = copy.deepcopy(extra)
    return envelope


def check_comparable(stored: dict, current_env: dict, force: bool = False,
                     path: Path | None = None) -> list[str]:
    """Refuse to compare a stored result with this environment if they differ.

    Returns ``[]`` when the environments match. When they differ, raises
    :class:`PatchgateError` naming each key with both values, unless ``force``:
    then returns one warning line per difference.
    """
    stored_env = stored.get("environment") or {}
    differences = [
        f"{key}: stored {stored_env.get(key)!r}, here {current_env.get(key)!r}"
        for key in same_environment(stored_env, current_env)
    ]
    if differences and not force:
        where = str(path) if path is not None else "the stored result"
        raise PatchgateError(
            f"{where} was measured in another environment ({'; '.join(differences)})",
            "re-measure on this machine (the gate does it by default) "
            "or pass --force-environment",
        )
    return differences


def git_commit(repo: Path) -> str | None:
    """``git rev-parse HEAD`` in ``repo``, or ``None`` (no git, not a repo, no commit)."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit or None
