"""The stored state a run is judged against: the base commit's, never the change's own.

A pull request carries its own ``baselines/`` and ``CHANGELOG.md``. If the gate read them,
a change could list its own slow patch in ``current.json`` (then it is "the current
baseline", compared with itself), or a patch's import could rewrite them during an
earlier ``patchgate check``. So :func:`resolve` reads ``baselines/<profile>/`` and
``CHANGELOG.md`` from the git objects of a base commit (``--base REF``; locally ``HEAD``)
into a scratch folder, which the run reads instead of the working tree. The run still
writes (``--accept``, ``--record``) into the working tree.

Where the working tree's stored files differ from the base's, :attr:`Base.differs`
names them, and the verdict says the change to them was ignored. Without git (a
tarball), with ``--base worktree``, or with a baselines folder outside the repository
(``--baselines /tmp/bl``), the working tree is read as it is, and the verdict says so.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import PatchgateError
from . import calibration
from .baselines import ROLES, BaselineStore

WORKTREE = "worktree"  # --base worktree: read the stored files as they are on disk
_GIT_TIMEOUT_S = 60


@dataclass(kw_only=True)
class Base:
    """Where a run reads its stored state: ``baselines_dir`` and ``changelog`` (a scratch
    copy of the base commit's, or the working tree's own), the ``ref`` and ``commit``
    they come from (None: the working tree), the working-tree files that differ from the
    base (``differs``, relative to the repository) and ``note``, the verdict's sentence.
    A base from git owns its scratch copy: :meth:`close` removes it."""

    baselines_dir: Path
    changelog: Path
    ref: str | None = None
    commit: str | None = None
    differs: list[str] = field(default_factory=list)
    note: str = ""
    _scratch: tempfile.TemporaryDirectory | None = None
    shown: dict[str, str] = field(default_factory=dict)  # scratch path -> "REF:path"

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> Base:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self) -> dict:
        """The verdict's ``base`` block."""
        return {"ref": self.ref, "commit": self.commit, "differs": list(self.differs),
                "note": self.note}


@dataclass(frozen=True)
class State:
    """A profile's stored state, read once before any patch code runs: the stored
    results by role (None where there is none), the history of logged changes, the
    quotes of its calibration files, one per hardware class
    (:func:`patchgate.store.calibration.quotes`; the run picks its own class's), and
    where they came from (``base``: :meth:`Base.record`)."""

    results: dict
    history: list
    calibrations: list
    base: dict


def read(baselines_dir: Path, changelog: Path, profile: str, ref: str | None = None
         ) -> State:
    """The stored state of ``profile`` from the base :func:`resolve` picks; the scratch
    copy is gone when this returns."""
    with resolve(baselines_dir, changelog, profile, ref) as base:
        store = BaselineStore(base.baselines_dir, profile)
        try:
            return State({role: store.load(role) for role in ROLES}, store.history(),
                         calibration.quotes(store), base.record())
        except PatchgateError as e:  # name the file as the base holds it, not the copy
            message, hint = e.message, e.hint
            for scratch, shown in base.shown.items():
                message, hint = message.replace(scratch, shown), hint.replace(scratch, shown)
            if base.commit:
                hint = (f"{hint}; the base {base.ref} holds the broken file: fix it in a "
                        "commit of the base branch") if hint else hint
            raise PatchgateError(message, hint) from e


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                          text=not binary, timeout=_GIT_TIMEOUT_S, check=False)


def _toplevel(folder: Path) -> Path | None:
    """The git work tree holding ``folder`` (or its nearest existing parent), or None."""
    probe = Path(folder).resolve()
    while not probe.exists():
        probe = probe.parent
    try:
        out = _git(probe, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 else None


def _inside(path: Path, top: Path) -> str | None:
    try:
        return Path(path).resolve().relative_to(top).as_posix()
    except ValueError:
        return None


def worktree(baselines_dir: Path, changelog: Path, why: str) -> Base:
    """The working tree's stored files as they are (``why``: the verdict's reason)."""
    return Base(baselines_dir=Path(baselines_dir), changelog=Path(changelog),
                note=f"judged against the stored files in the working tree ({why})")


def resolve(baselines_dir: Path, changelog: Path, profile: str, ref: str | None = None
            ) -> Base:
    """The stored state of the run (see the module docstring). ``ref``: a git revision,
    :data:`WORKTREE`, or None (``HEAD`` inside a git work tree, else the working tree)."""
    if ref == WORKTREE:
        return worktree(baselines_dir, changelog, "--base worktree")
    top = _toplevel(baselines_dir)
    if top is None:
        if ref is not None:
            raise PatchgateError(f"--base {ref}: {baselines_dir} is not in a git repository",
                                 hint="run from a git checkout, or pass --base worktree")
        return worktree(baselines_dir, changelog, "no git repository: a change could edit "
                        "them")
    rel_bl, rel_cl = _inside(baselines_dir, top), _inside(changelog, top)
    if rel_bl is None or rel_cl is None:
        if ref is not None:
            raise PatchgateError(f"--base {ref}: {baselines_dir if rel_bl is None else changelog}"
                                 f" is outside the repository {top}",
                                 hint="pass --base worktree to read a folder of your own")
        return worktree(baselines_dir, changelog, "the baselines folder is outside the "
                        "repository")
    name = ref or "HEAD"
    out = _git(top, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if out.returncode != 0:
        if ref is None:  # a repository without a commit yet
            return worktree(baselines_dir, changelog, "the repository has no commit yet")
        raise PatchgateError(f"--base {ref}: not a commit of {top}",
                             hint="fetch it first (CI: git fetch --depth=1 origin <sha>), or "
                             "name a branch, tag or sha that exists")
    commit = out.stdout.strip()
    scratch = tempfile.TemporaryDirectory(prefix="patchgate-base-")
    try:
        root = Path(scratch.name)
        folder = (PurePosixPath(rel_bl) / profile).as_posix()
        differs = _materialize(top, commit, folder, root / "baselines" / profile,
                               Path(baselines_dir) / profile)
        differs += _materialize(top, commit, rel_cl, root / "CHANGELOG.md", Path(changelog),
                                single=True)
    except BaseException:
        scratch.cleanup()
        raise
    short = commit[:12]
    note = f"judged against the stored files of {name} ({short})"
    if differs:
        note += (f"; the working tree changes {', '.join(differs)}: the change is ignored "
                 "(only the baseline update on main writes them)")
    shown = {str(root / "baselines"): f"{name}:{rel_bl}",
             str(root / "CHANGELOG.md"): f"{name}:{rel_cl}"}
    return Base(baselines_dir=root / "baselines", changelog=root / "CHANGELOG.md", ref=name,
                commit=commit, differs=differs, note=note, _scratch=scratch, shown=shown)


def _materialize(top: Path, commit: str, rel: str, dest: Path, here: Path,
                 single: bool = False) -> list[str]:
    """Write the files of ``rel`` at ``commit`` under ``dest``; returns the paths (relative
    to the repository) whose working-tree copy under ``here`` differs, or exists only on
    one side."""
    if single:
        names = [rel] if _git(top, "cat-file", "-e", f"{commit}:{rel}").returncode == 0 else []
    else:
        out = _git(top, "ls-tree", "-r", "-z", "--name-only", commit, "--", rel)
        if out.returncode != 0:
            raise PatchgateError(f"git ls-tree {commit[:12]} {rel} failed: {out.stderr.strip()}",
                                 hint="check the repository (git fsck)")
        names = [n for n in out.stdout.split("\0") if n]
    base_files: dict[str, bytes] = {}
    for name in names:
        blob = _git(top, "show", f"{commit}:{name}", binary=True)
        if blob.returncode != 0:
            raise PatchgateError(f"git show {commit[:12]}:{name} failed",
                                 hint="check the repository (git fsck)")
        base_files[name] = blob.stdout
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not single:
        dest.mkdir(parents=True, exist_ok=True)
    for name, data in base_files.items():
        target = dest if single else dest / Path(name).relative_to(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return _differences(base_files, rel, here, single)


def _differences(base_files: dict[str, bytes], rel: str, here: Path, single: bool
                 ) -> list[str]:
    if single:
        mine = {rel: here.read_bytes()} if here.is_file() else {}
    else:
        mine = {f"{rel}/{p.relative_to(here).as_posix()}": p.read_bytes()
                for p in sorted(here.rglob("*")) if p.is_file()} if here.is_dir() else {}
    return sorted(n for n in set(base_files) | set(mine)
                  if base_files.get(n) != mine.get(n))

