"""Fixtures shared by the test files: paths, the default model's tokenizer, and a
reporter whose step lines the test can read."""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
from pathlib import Path

import pytest

from patchgate.gate import GuardOptions, run_guard
from patchgate.profile import Lengths, get_profile
from patchgate.report.console import Reporter

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
# The default profile, small: the end-to-end gate runs of the tests
GATE_PROFILE = get_profile("default").with_overrides(
    lengths=Lengths(prefill_input=64, prefill_output=1, decode_input=8, decode_output=12),
    rounds=7,
)


def gate_options(tmp: Path, patches: Path, **kw) -> GuardOptions:
    """A guard run of :data:`GATE_PROFILE` on ``patches``, its files under ``tmp``."""
    kw.setdefault("quiet", True)
    kw.setdefault("profile", GATE_PROFILE)
    return GuardOptions(patches_dir=patches, baselines_dir=tmp / "baselines",
                        changelog=tmp / "CHANGELOG.md", **kw)


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder``, by relative path."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class ListReporter(Reporter):
    """A quiet :class:`~patchgate.report.console.Reporter` that keeps its step lines
    (without the ``[patchgate]`` prefix) in ``lines``."""

    def __init__(self, lines: list[str] | None = None):
        super().__init__(quiet=True, stream=io.StringIO())
        self.lines = lines if lines is not None else []

    def say(self, text: str) -> None:
        self.lines.append(text)


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository's root."""
    return ROOT


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """tests/fixtures."""
    return FIXTURES


@pytest.fixture(scope="session")
def tok():
    """The default model's tokenizer (models/default)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ROOT / "models" / "default", trust_remote_code=True)


@pytest.fixture
def reporter() -> ListReporter:
    """A reporter that keeps its step lines in ``reporter.lines``."""
    return ListReporter()


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory) -> Path:
    """Baselines of the unpatched model under :data:`GATE_PROFILE` (created once, with
    --accept)."""
    tmp = tmp_path_factory.mktemp("gate-ref")
    empty = tmp / "no_patches"
    empty.mkdir()
    v = run_guard(gate_options(tmp, empty, accept=True))
    assert v["verdict"] == "accepted"
    return tmp


@pytest.fixture
def work(reference_dir, tmp_path) -> Path:
    """A fresh copy of :func:`reference_dir`'s baselines to run the gate on."""
    shutil.copytree(reference_dir / "baselines", tmp_path / "baselines")
    return tmp_path


@pytest.fixture
def in_checkout():
    """A scratch folder inside the checkout: outside every folder the patch sandbox lets
    patch code write (tmp_path is under /tmp, which it may), as a real checkout is."""
    folder = Path(tempfile.mkdtemp(prefix=".sandbox-test-", dir=ROOT))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
