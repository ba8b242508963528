"""Patch code runs in a Landlock sandbox (patchgate.sandbox): it may write only to
temporary, device and cache folders, and (ABI 6+) not signal processes outside it. Each
check runs in a child process: a sandbox cannot be left, and pytest must stay free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from patchgate import sandbox

ROOT = Path(__file__).resolve().parent.parent
needs_landlock = pytest.mark.skipif(sandbox.abi() < 1, reason="the kernel offers no Landlock")

PROBE = r"""
import json, os, sys
from pathlib import Path
from patchgate import sandbox
state = sandbox.enter()
out = {"state": state}
for key, path in json.loads(sys.argv[1]).items():
    try:
        Path(path).write_text("x")
        out[key] = "written"
        Path(path).unlink()
    except OSError as e:
        out[key] = e.errno
try:
    os.kill(int(sys.argv[2]), 0)
    out["signal"] = "sent"
except OSError as e:
    out["signal"] = e.errno
print(json.dumps(out))
"""


def run_probe(targets: dict[str, Path], env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps({k: str(v) for k, v in
                                                                  targets.items()}),
                          str(os.getpid())], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})},
                         cwd=tempfile.gettempdir())
    return json.loads(out.stdout)


@needs_landlock
def test_sandboxed_code_writes_temporary_files_only(in_checkout):
    site = Path(sysconfig.get_paths()["purelib"])
    out = run_probe({"checkout": in_checkout / "current.json",
                     "site_packages": site / "patchgate-sandbox-test.pth",
                     "tmp": Path(tempfile.gettempdir()) / f"sbx-{os.getpid()}.txt"})
    assert out["state"]["on"] and out["state"]["abi"] == sandbox.abi()
    assert out["checkout"] == 13 and out["site_packages"] == 13  # EACCES
    assert out["tmp"] == "written"
    assert not (in_checkout / "current.json").exists()
    if sandbox.abi() >= 6:
        assert out["signal"] == 1  # EPERM: the gate is outside the sandbox
    else:
        assert out["signal"] == "sent"


def test_it_can_be_turned_off_and_then_says_so(in_checkout):
    out = run_probe({"checkout": in_checkout / "x.txt"}, env={sandbox.ENV: "off"})
    assert out["state"] == {"on": False, "abi": sandbox.abi(), "why": f"{sandbox.ENV}=off"}
    assert out["checkout"] == "written"
    os.environ[sandbox.ENV] = "off"
    try:
        assert sandbox.status()["text"] == "patch code ran without a sandbox " \
            f"({sandbox.ENV}=off)"
    finally:
        del os.environ[sandbox.ENV]


@needs_landlock
def test_the_status_names_the_abi_and_what_it_forbids():
    text = sandbox.status()["text"]
    assert text.startswith(f"patch code ran in a Landlock sandbox (ABI {sandbox.abi()})")
