"""docs/RESULTS.md: every table is what its `patchgate table` command prints now."""

import re
import shlex
from pathlib import Path

from patchgate.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "RESULTS.md"


def _commands() -> list[list[str]]:
    return [shlex.split(m.group(1)) for m in
            re.finditer(r"^patchgate table (.+?)\s*$", DOC.read_text(), re.M)]


def test_every_table_matches_its_verdict_files(tmp_path):
    commands = _commands()
    assert len(commands) >= 2
    text = DOC.read_text()
    for i, patterns in enumerate(commands):
        files = [str(p) for pat in patterns for p in sorted(ROOT.glob(pat))]
        assert files, f"{patterns} matches no verdict file"
        out = tmp_path / f"t{i}.md"
        assert main(["table", *files, "--output", str(out)]) == 0
        assert out.read_text().strip() in text, f"table of {patterns} is out of date"
