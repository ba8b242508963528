"""The small things of the command line: --version, --help, `patchgate check`."""

from __future__ import annotations

import json
import subprocess
import sys
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


def test_check_validates_the_patch_folder_without_an_engine():
    """`check` imports the patches in a scratch process and loads no model (about 1.5 s
    on the 2-core development machine; speed is not asserted here)."""
    run = subprocess.run([sys.executable, "-m", "patchgate", "check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "loading engine" not in run.stdout + run.stderr
    assert "ok  0001-fused-add-rmsnorm.py: Fuse the residual add into RMSNorm." in run.stdout
    assert run.stdout.rstrip().splitlines()[-2].endswith(": valid")
    # the imports ran in a sandbox where the kernel offers one, and check says which
    assert run.stdout.rstrip().splitlines()[-1].startswith("the import ran ")


def test_check_names_a_broken_patch_and_exits_2(capsys):
    assert main(["check", "--patches", str(FIX / "patches" / "syntax_error")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR patch ") and "0001-broken.py: SyntaxError at line 4" in err


def test_bare_patchgate_prints_its_help_and_exits_0(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: patchgate") and "guard" in out and "check" in out


def _subcommands():
    import argparse

    from patchgate.cli import _parser

    out = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out.append((" ".join([*path, name]), sub))
                    walk(sub, [*path, name])
    walk(_parser(), [])
    return out


@pytest.mark.parametrize(("name", "parser"), _subcommands(), ids=lambda x: str(x))
def test_every_command_says_what_it_does_and_shows_its_defaults(name, parser):
    text = parser.format_help()
    assert parser.description, f"`patchgate {name} --help` has no description"
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert action.help, f"{name} {action.option_strings[0]} has no help"
        if action.default is not None and not isinstance(action.default, bool):
            assert "default" in text, f"{name}: no default shown"
    assert str(ROOT) not in text  # paths are shown relative to the checkout


def test_check_reports_every_bad_file_in_one_run(tmp_path, capsys):
    good = '"""Fine."""\n\ndef apply(model):\n    return None\n'
    (tmp_path / "0001-fine.py").write_text(good)
    (tmp_path / "0002-broken.py").write_text("def apply(\n")
    (tmp_path / "3-badname.py").write_text(good)
    (tmp_path / "0004-raises.py").write_text('"""Raises."""\nraise ValueError("boom")\n' + good)
    (tmp_path / "0005-fine-too.py").write_text(good)
    assert main(["check", "--patches", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert [x.split()[1] for x in out.splitlines() if x.startswith("ok ")] == \
        ["0001-fine.py:", "0005-fine-too.py:"]
    assert "0002-broken.py: SyntaxError" in err and "bad file name '3-badname.py'" in err
    assert "0004-raises.py: import raised ValueError at line 2: boom" in err
    assert "3 problem(s)" in out
    # the same as one JSON document
    assert main(["check", "--patches", str(tmp_path), "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False and len(doc["problems"]) == 3
    assert {p["name"]: p["ok"] for p in doc["patches"]} == {
        "0001-fine.py": True, "0004-raises.py": False, "0005-fine-too.py": True}


def test_a_file_given_as_the_patch_folder_gets_a_hint_that_works(capsys):
    assert main(["check", "--patches", str(ROOT / "README.md")]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "create it" not in err
    assert f"--patches {ROOT}" in err


def test_profiles_as_json(capsys):
    assert main(["profiles", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"name": "default", "engine": "transformers"}.items() <= rows[0].items()


def test_the_pre_commit_hook_runs_check_on_the_patch_folder():
    import yaml

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "patchgate-check" and hook["entry"] == "patchgate check"
    assert hook["pass_filenames"] is False and hook["files"] == "^model_patches/"


@pytest.mark.parametrize("argv", [["--ray-actors", "2"], ["--ray", "auto", "--ray-actors", "0"]])
def test_ray_actors_needs_ray_and_one_actor_at_least(argv, capsys):
    assert main(["guard", "--profile", "default", *argv]) == 2
    err = capsys.readouterr().err
    assert "--ray-actors" in err and "--ray auto --ray-actors 4" in err


def _swallowing(sig):
    """What SGLang's engine start does with an interruption (2026-12-07, on a GPU): the
    signal also killed its scheduler, and the start fails with an error of its own."""
    import os
    import signal as signals

    from patchgate.errors import PatchgateError

    def start(*args, **kw):
        try:
            os.kill(os.getpid(), getattr(signals, sig))
            for _ in range(100):  # the handler runs at the next instruction
                pass
        except BaseException:
            pass
        raise PatchgateError("SGLang engine for candidate failed to start: RuntimeError: "
                             "Rank 0 scheduler died during initialization (exit code: -15)",
                             hint="see SGLang's log above")
    return start


def test_an_interruption_an_engine_turned_into_its_own_error_is_reported_as_one(
        tmp_path, monkeypatch, capsys):
    """SIGTERM (a CI cancel, a device call's limit) during a calibration whose engine
    start catches it and fails instead: the command says it was interrupted, names what
    followed, leaves the file out and exits 2. Ctrl-C during a guard, likewise."""
    import signal as signals

    from patchgate import cli
    from patchgate.tools import calibrate

    monkeypatch.setattr(calibrate, "run_job", _swallowing("SIGTERM"))
    out = tmp_path / "cal.json"
    code = main(["calibrate", "--profile", "default", "--runs", "1", "--slowdowns", "",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "ERROR calibration interrupted by SIGTERM: " in err
    assert "(then: SGLang engine for candidate failed to start" in err
    assert not out.exists()
    assert signals.getsignal(signals.SIGTERM) is not None  # the old handler is back

    monkeypatch.setattr(cli, "_guard", _swallowing("SIGINT"))
    # Ctrl-C as Python answers it in a terminal; a background job (`cmd &`) starts with
    # SIGINT ignored, and there the CLI leaves it so (the signal then does nothing)
    before = signals.signal(signals.SIGINT, signals.default_int_handler)
    try:
        assert main(["guard", "--profile", "default"]) == 2
        assert signals.getsignal(signals.SIGINT) is signals.default_int_handler
    finally:
        signals.signal(signals.SIGINT, before)
    err = capsys.readouterr().err
    assert "ERROR interrupted during " in err and "nothing under baselines/" in err
    assert "(then: SGLang engine for candidate failed to start" in err

    # an engine error without a signal is that error, as before
    from patchgate.errors import PatchgateError

    def fails(*args, **kw):
        raise PatchgateError("SGLang engine for candidate failed to start: boom", hint="h")

    monkeypatch.setattr(cli, "_guard", fails)
    assert main(["guard", "--profile", "default"]) == 2
    err = capsys.readouterr().err
    assert "ERROR SGLang engine for candidate failed to start: boom" in err
    assert "interrupted" not in err
