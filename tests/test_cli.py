"""The small things of the command line: --version, --help, `patchgate check`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchgate import __version__
from patchgate.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"patchgate {__version__}"


def test_help_names_the_exit_codes_and_the_profiles(capsys):
    with pytest.raises(SystemExit):
        main(["guard", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "exit codes: 0 accepted, skipped" in out and "1 rejected; 2 error" in out
    assert "h200-minicpm8b" in out and "default" in out


def test_check_validates_the_patch_folder_quickly():
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "patchgate", "check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - t0 < 5
    assert "ok  0001-fused-add-rmsnorm.py: Fuse the residual add into RMSNorm." in run.stdout
    assert run.stdout.rstrip().splitlines()[-2].endswith(": valid")
    # the imports ran in a sandbox where the kernel offers one, and check says which
    assert run.stdout.rstrip().splitlines()[-1].startswith("the import ran ")


def test_check_names_a_broken_patch_and_exits_2(capsys):
    assert main(["check", "--patches", str(FIX / "patches" / "syntax_error")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR patch ") and "0001-broken.py: SyntaxError at line 4" in err
