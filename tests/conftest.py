"""Fixtures shared by the test files: paths, the default model's tokenizer, and a
reporter whose step lines the test can read."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from patchgate.report.console import Reporter

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"


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
