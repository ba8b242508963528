"""Profiles as files: ``profiles/<name>.toml``, or any TOML file given by path.

A profile file's keys are the fields of :class:`patchgate.profile.schema.Profile`; the tables
``[lengths]`` and ``[thresholds]`` hold those dataclasses' fields, ``[engine_args]``
the engine's settings (SGLang ``ServerArgs`` names), ``[primary.<task>]`` the metric
and filter the 99 % rule reads for a task, ``[task_args]`` what every lm-eval task
receives as metadata. A file writes only what differs from the defaults, which live
in the dataclasses alone. ``name`` defaults to the file's name without ``.toml``.

Loading checks everything before anything runs: an unknown key, a value of the wrong
type, a missing required key (``description``, ``model``, ``engine``, ``[lengths]``)
a value outside its allowed set, or a number outside its range (:data:`RANGES`:
``0 < thresholds.latency < 1``, ``rounds >= 2``, ...) is a
:class:`~patchgate.errors.PatchgateError` that names the file and the key, says what
is wrong and what is allowed.

    patchgate guard --profile h200-minicpm8b          # profiles/h200-minicpm8b.toml
    patchgate guard --profile path/to/my-model.toml   # any file
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import tomllib
import types
import typing
from pathlib import Path

from .. import registry
from ..errors import PatchgateError
from ..stats.paired_t import TESTS
from .schema import BATCH_SIZES, PHASES, Lengths, Profile, repo_root, scenario_name

FOLDER = "profiles"
CHOICES = {
    "engine": registry.names("engine"),
    "guard": registry.names("guard"),
    "dtype": ("float32", "float16", "bfloat16"),
    "scenarios": registry.names("scenarios"),
    "test": TESTS,
}
UNLIMITED = "unlimited"  # TOML has no null: an optional count (a concurrency) writes this
PRIMARY_KEYS = ("metric", "filter")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")
_KIND = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
         dict: "a table", list: "an array"}


def folder(root: Path | None = None) -> Path:
    """The repository's profile folder."""
    return (root or repo_root()) / FOLDER


def is_path(ref: str) -> bool:
    """``--profile`` names a file (rather than a profile in ``profiles/``)."""
    return ref.endswith(".toml") or "/" in ref or "\\" in ref


def get_profile(ref: str, root: Path | None = None) -> Profile:
    """The profile ``ref`` names: a file path, or ``profiles/<ref>.toml``."""
    if is_path(ref):
        path = Path(ref).expanduser()
        if not path.is_file():
            raise PatchgateError(f"profile file {ref} does not exist",
                                 hint="pass an existing .toml file, or a name from "
                                 "`patchgate profiles`")
        return load(path)
    path = folder(root) / f"{ref}.toml"
    if not path.is_file():
        names = [p.stem for p in available(root)]
        raise PatchgateError(f"unknown profile {ref!r} (no {FOLDER}/{ref}.toml)",
                             hint=f"choose one of: {', '.join(names)}; or pass a profile "
                             "file's path")
    return load(path, expect_name=ref)


def available(root: Path | None = None) -> list[Path]:
    """The profile files of the repository, sorted by name."""
    return sorted(folder(root).glob("*.toml"))


def listing(root: Path | None = None) -> list[tuple[str, str, str]]:
    """(name, engine, description) of each profile file; a file that does not load is
    listed with its error instead of its description."""
    out = []
    for path in available(root):
        try:
            p = load(path, expect_name=path.stem)
            out.append((p.name, p.engine, p.description))
        except PatchgateError as e:
            out.append((path.stem, "?", f"INVALID: {e.message}"))
    return out


def load(path: Path, expect_name: str | None = None) -> Profile:
    """Read and check one profile file."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise PatchgateError(f"{path}: cannot read the profile ({e.strerror})",
                             hint="check the path") from e
    except tomllib.TOMLDecodeError as e:
        raise PatchgateError(f"{path}: not valid TOML ({e})",
                             hint="see https://toml.io for the syntax") from e
    where = _Where(Path(path))
    raw.setdefault("name", Path(path).stem)
    if expect_name is not None and raw["name"] != expect_name:
        where.fail("name", f"is {raw['name']!r} but the file is {FOLDER}/{expect_name}.toml",
                   f"name the file {raw['name']}.toml, or set name = {expect_name!r}")
    values = _fields(Profile, raw, where, "")
    profile = Profile(**values)
    _check_profile(profile, where)
    return profile


class _Where:
    """Error messages that name the file and the key."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, what: str, hint: str) -> typing.NoReturn:
        raise PatchgateError(f"{self.path}: {key} {what}", hint=hint)


def _fields(cls, raw: dict, where: _Where, prefix: str) -> dict:
    """The dataclass ``cls``'s keyword arguments from the table ``raw``, checked."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in raw:
        if key not in fields:
            where.fail(f"{prefix}{key}", "is not a profile key",
                       f"the keys{' of [' + prefix[:-1] + ']' if prefix else ''} are: "
                       f"{', '.join(fields)}")
    out = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        if name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                where.fail(key, "is missing", _required_hint(cls, prefix))
            continue
        out[name] = _value(raw[name], hints[name], where, key)
    return out


def _required_hint(cls, prefix: str) -> str:
    needed = [f.name for f in dataclasses.fields(cls)
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    table = f"[{prefix[:-1]}] needs" if prefix else "a profile needs"
    return f"{table}: {', '.join(needed)}"


def _value(value, hint, where: _Where, key: str):
    """``value`` checked against the type ``hint``; tuples come from arrays."""
    if isinstance(hint, types.UnionType):  # X | None: TOML has no null, so X
        if value == UNLIMITED and int in typing.get_args(hint):
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            where.fail(key, f"must be a table [{key}], got {_show(value)}",
                       f"write it as [{key}] with keys {', '.join(_names(hint))}")
        return hint(**_fields(hint, value, where, f"{key}."))
    origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            base = next((a for a in typing.get_args(item) if a is not type(None)), item)
            plural = {str: "strings", int: "integers"}[base]
            if base is not item:
                plural += f' (or "{UNLIMITED}")'
            example = "1, 8, 64" if base is int else '"a", "b"'
            where.fail(key, f"must be an array of {plural}, got {_show(value)}",
                       f"e.g. {key} = [{example}]")
        return tuple(_value(v, item, where, f"{key}[{i}]") for i, v in enumerate(value))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    ok = isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    if not ok:
        where.fail(key, f"must be {_KIND[hint]}, got {_show(value)}",
                   f"write {key} as {_KIND[hint]}")
    return value


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _show(value) -> str:
    kind = next((k for t, k in _KIND.items() if isinstance(value, t)
                 and not (t is int and isinstance(value, bool))), type(value).__name__)
    return f"{value!r} ({kind})"


def _check_profile(p: Profile, where: _Where) -> None:
    """Allowed values, beyond types."""
    for key, allowed in CHOICES.items():
        value = getattr(p, key)
        if value not in allowed:
            where.fail(key, f"= {value!r} is not allowed",
                       f"choose one of: {', '.join(allowed)}")
    if not _DEVICE.match(p.device):
        where.fail("device", f"= {p.device!r} is not a device",
                   "use cpu, cuda, cuda:N or mps")
    if not p.tasks and p.guard == "lm_eval":
        where.fail("tasks", "is empty", "name at least one lm-eval task or group")
    for i, task in enumerate(p.tasks):
        if not task.strip():
            where.fail(f"tasks[{i}]", "is blank", "name an lm-eval task or group")
    _check_ranges(p, where)
    for task, sel in p.primary.items():
        if not isinstance(sel, dict) or not sel:
            where.fail(f"primary.{task}", "must be a table with metric and/or filter",
                       f'e.g. [primary.{task}] metric = "exact_match" filter = "strict-match"')
        for k, v in sel.items():
            if k not in PRIMARY_KEYS:
                where.fail(f"primary.{task}.{k}", "is not a key of a primary table",
                           f"the keys are: {', '.join(PRIMARY_KEYS)}")
            if not isinstance(v, str):
                where.fail(f"primary.{task}.{k}", f"must be a string, got {_show(v)}",
                           "name an lm-eval metric or filter")
    if p.grow is not None:
        from .grow import SHAPES

        if p.grow not in SHAPES:
            where.fail("grow", f"= {p.grow!r} is not a known shape",
                       f"choose one of: {', '.join(SHAPES)}")


class Range(typing.NamedTuple):
    """Allowed values of a number: above ``lo`` (at least, unless ``lo_open``) and below
    ``hi`` (at most, unless ``hi_open``); None: no bound. Never NaN or infinite."""

    lo: float | None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def holds(self, v: float) -> bool:
        return math.isfinite(v) and \
            (self.lo is None or (v > self.lo if self.lo_open else v >= self.lo)) and \
            (self.hi is None or (v < self.hi if self.hi_open else v <= self.hi))

    def says(self, key: str) -> str:
        """``0 < thresholds.latency < 1``, ``rounds >= 2``."""
        low = "" if self.lo is None else f"{self.lo:g} {'<' if self.lo_open else '<='} "
        high = "" if self.hi is None else f" {'<' if self.hi_open else '<='} {self.hi:g}"
        if self.hi is None:  # one bound: "rounds >= 2" reads better than "2 <= rounds"
            return f"{key} {'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{low}{key}{high}"


_POSITIVE, _COUNT, _FRACTION = Range(0, lo_open=True), Range(1), Range(0, 1, True, True)
# Every number of a profile and its allowed range ("a.b": field b of the table [a]).
RANGES = {
    "rounds": Range(2),  # a paired test needs two rounds
    "warmup": Range(0),
    "warmup_tokens": _COUNT,
    "max_looks": _COUNT,
    "confirm_rounds": Range(2),
    "confirm_looks": _COUNT,
    "settle_s": Range(0),
    "call_timeout_s": _POSITIVE,
    "import_timeout_s": _POSITIVE,
    "eval_batch_size": _COUNT,
    "threads": _COUNT,
    "seed": Range(0),
    "thresholds.latency": _FRACTION,
    "thresholds.alpha": Range(0, 0.5, True, True),
    "thresholds.accuracy_reject": Range(0, 1, lo_open=True),
    "thresholds.c_low": Range(0, 1, lo_open=True),
    "thresholds.c_high": Range(0, 1, lo_open=True),
    **{f"lengths.{f.name}": _COUNT for f in dataclasses.fields(Lengths)},
    "sequential.delta": Range(0, 0.5, True, True),
    "sequential.block": _COUNT,
    "sequential.growth": Range(1),
    "sequential.skip_margin": Range(0),
    "serving.num_prompts": _COUNT,
    "serving.input_len": _COUNT,
    "serving.output_len": _COUNT,
    "serving.startup_timeout_s": _POSITIVE,
    "serving.bench_timeout_s": _POSITIVE,
}


def _check_ranges(p: Profile, where: _Where) -> None:
    """Every number inside its range (:data:`RANGES`); the orders between numbers."""
    for key, allowed in RANGES.items():
        value = functools.reduce(getattr, key.split("."), p)
        if value is not None and not allowed.holds(value):
            default = _default(key)
            where.fail(key, f"= {value!r} is out of range (allowed: {allowed.says(key)})",
                       f"set {key} within that range" +
                       (f", e.g. {default!r} (the default)" if default is not None else ""))
    th = p.thresholds
    if th.c_low > th.c_high:
        where.fail("thresholds.c_low", f"= {th.c_low!r} is above thresholds.c_high = "
                   f"{th.c_high!r} (allowed: c_low <= c_high)",
                   "C is 0 below c_low and 1 from c_high on: set c_low <= c_high")
    _increasing(where, "batch_sizes", p.batch_sizes)
    names = [scenario_name(ph, b) for ph in PHASES for b in p.batch_sizes]
    for name, k in p.repeats.items():
        if name not in names:
            where.fail(f"repeats.{name}", "is not a scenario of this profile",
                       f"name one of {', '.join(names)}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            where.fail(f"repeats.{name}", f"= {k!r} is out of range (allowed: an integer "
                       ">= 1)", "the calls a sample of that scenario averages, e.g. 10")
    for name in p.primed:
        if name not in names:
            where.fail("primed", f"names {name!r}, not a scenario of this profile",
                       f"name scenarios of {', '.join(names)}")
    for i, c in enumerate(p.serving.concurrencies):
        if c is not None and c < 1:
            where.fail(f"serving.concurrencies[{i}]", f"= {c!r} is out of range (allowed: "
                       f">= 1, or \"{UNLIMITED}\")", "a concurrency is a count of requests")
    if p.engine_version is not None:
        from packaging.version import InvalidVersion, Version

        try:
            Version(p.engine_version)
        except InvalidVersion:
            where.fail("engine_version", f"= {p.engine_version!r} is not a version",
                       'write a version such as "0.5.19"')


def _default(key: str):
    """The default of a profile key ("thresholds.alpha"); None where it has none."""
    obj = Profile
    for part in key.split("."):
        f = next(f for f in dataclasses.fields(obj) if f.name == part)
        obj = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        if obj is dataclasses.MISSING:
            return None
    return obj


def _increasing(where: _Where, key: str, sizes: tuple[int, ...]) -> None:
    if not sizes:
        where.fail(key, "is empty", f"e.g. {key} = {list(BATCH_SIZES)}")
    for i, b in enumerate(sizes):
        if b < 1:
            where.fail(f"{key}[{i}]", f"= {b} is out of range (allowed: >= 1)",
                       f"e.g. {key} = {list(BATCH_SIZES)}")
        if i and b <= sizes[i - 1]:
            where.fail(key, f"= {list(sizes)} is not strictly increasing",
                       f"they stand for S1, S8 and Sinf in order: e.g. {list(BATCH_SIZES)}")


def check_engine_version(profile: Profile, ref: str, installed: str | None = None) -> None:
    """The installed engine package must be at least the profile's ``engine_version``
    (not installed: the engine says so when it starts)."""
    if profile.engine_version is None:
        return
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import InvalidVersion, Version

    if installed is None:
        try:
            installed = version(profile.engine)
        except PackageNotFoundError:
            return
    try:
        too_old = Version(installed) < Version(profile.engine_version)
    except InvalidVersion as e:
        raise PatchgateError(f"profile {ref}: engine_version {profile.engine_version!r}: {e}",
                             hint="write a version such as \"0.5.19\"") from e
    if too_old:
        raise PatchgateError(f"profile {ref} needs {profile.engine} >= "
                             f"{profile.engine_version}; this machine has {installed}",
                             hint=f"pip install '{profile.engine}>={profile.engine_version}' "
                             "(a separate environment keeps the other profiles' version)")


def check_model(profile: Profile, ref: str, root: Path | None = None) -> None:
    """The profile's model must be a folder that exists, or a hub id (``org/name``) that
    the engine may download; a missing local folder is an error naming the profile."""
    p = Path(profile.model).expanduser()
    local = p if p.is_absolute() else (root or repo_root()) / p
    if local.is_dir():
        return
    hub_id = not p.is_absolute() and re.fullmatch(r"[\w.-]+/[\w.-]+", profile.model)
    if hub_id and not local.exists():
        return
    raise PatchgateError(f"profile {ref}: model {profile.model!r} is not a folder "
                         f"({local} does not exist)",
                         hint="set model in the profile file to the folder of your model "
                         "(config.json, tokenizer and weights)")
