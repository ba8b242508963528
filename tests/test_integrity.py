"""Verdicts that neither noise nor a patch can fake: attacks written against the gate,
end to end on the default model (CPU). Each one is a class of attack, not a list:
a patch that swaps the clock, one that caches outputs (by content, by shape), one that
works while the other configurations are timed, one that writes the stored files (at
import or in apply), one whose import never returns; two gates writing at once; a
read-only change log; a cancelled run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GATE_PROFILE, gate_options, snapshot
from fakes import SLOW_APPLY

from patchgate import sandbox
from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.gate import run_guard
from patchgate.store.baselines import BaselineStore

pytestmark = pytest.mark.slow

FIX = Path(__file__).parent / "fixtures"
ATTACKS = FIX / "attacks"
ROOT = Path(__file__).resolve().parent.parent


def cli(work: Path, patches: Path, *extra: str) -> int:
    return main(["guard", "--patches", str(patches), "--baselines", str(work / "baselines"),
                 "--changelog", str(work / "CHANGELOG.md"), "--quiet", "--rounds", "4",
                 *extra])


def patch_file(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f'"""Attack: {name}."""\n{body}')
    return folder


def test_a_patch_that_swaps_the_clock_gets_an_error(work, capsys):
    before = snapshot(work)
    assert cli(work, ATTACKS / "clock", "--accept", "--json", str(work / "v.json")) == 2
    err = capsys.readouterr().err
    assert "the engine of candidate (0001-fast-clock.py) reported" in err
    assert "did not run on the gate's clock" in err
    assert json.loads((work / "v.json").read_text())["verdict"] == "error"
    assert {k: v for k, v in snapshot(work).items() if k != "v.json"} == before


def test_a_content_cache_gains_nothing(work):
    """Fresh token ids every round: a cache keyed by the input never hits, so the
    candidate is no faster (the old gate accepted this at score 544). Its memory grows
    every round, and the kernel's work for that (compaction, reclaim) can fall while the
    others are timed: then the off-clock check ends the run instead (seen once in two
    whole-suite runs). Either way it gains nothing."""
    try:
        v = run_guard(gate_options(work, ATTACKS / "cache"))
    except PatchgateError as e:
        assert "other work kept" in str(e) and "0001-content-cache.py" in str(e)
        return
    prefill = [r for r in v["scenarios"] if r["phase"] == "prefill"]
    assert all(r["ratio"] > 0.8 for r in prefill), [(r["name"], r["ratio"]) for r in prefill]
    assert v["score"] < 120


def test_a_cache_keyed_by_shape_gets_an_error(work):
    """Fresh ids do not defeat a cache that ignores them; the answers do. No warm-up
    round: the round that fills the cache agrees, the median round does not."""
    before = snapshot(work)
    opts = gate_options(work, ATTACKS / "shape-cache", accept=True, record=True,
                        profile=GATE_PROFILE.with_overrides(warmup=0))
    with pytest.raises(PatchgateError) as e:
        run_guard(opts)
    assert "timed calls of candidate (0001-shape-cache.py) gave the reference's" in str(e.value)
    assert "did not compute the model's answers" in str(e.value)
    assert snapshot(work) == before


def test_work_that_only_the_other_configurations_meet_is_an_error(work, capsys):
    """A helper process that spins while the candidate's engine waits (the others are
    timed) and sleeps while it computes: the candidate gets a quiet machine, the others a
    busy one. The machine's other work during each configuration's calls shows it."""
    before = snapshot(work)
    assert cli(work, ATTACKS / "offclock", "--accept", "--json", str(work / "v.json")) == 2
    err = capsys.readouterr().err
    assert "than while candidate (0001-work-while-idle.py) was" in err, err
    assert "cannot be trusted" in err
    assert json.loads((work / "v.json").read_text())["verdict"] == "error"
    assert {k: v for k, v in snapshot(work).items() if k != "v.json"} == before


def test_a_patch_that_writes_the_baselines_in_apply_cannot_change_a_verdict(work, capsys):
    current = work / "baselines" / "default" / "current.json"
    evil = patch_file(work / "p", "0001-mark-accepted.py",
                      "def apply(model):\n"
                      f"    open({str(current)!r}, 'a').write(' ')\n")
    assert cli(work, evil, "--accept", "--record") == 2
    err = capsys.readouterr().err
    assert "stored files changed during the run" in err and "current.json" in err
    assert "ACCEPTED" not in capsys.readouterr().out
    assert not (work / "CHANGELOG.md").exists()


def test_a_patch_that_edits_code_later_processes_import_cannot_reach_a_verdict(
        work, tmp_path, monkeypatch):
    """The engines and lm-eval import their code from sys.path; a patch that writes
    there (a .pth file runs in every later Python process, an edited metric scores every
    answer right) would change what the confirmation's fresh engines and the accuracy
    guard run. Any change there during the run ends it without a verdict."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    evil = patch_file(work / "p", "0001-persist.py",
                      "def apply(model):\n"
                      f"    open({str(site / 'zz-evil.pth')!r}, 'w').write('import os\\n')\n")
    before = snapshot(work / "baselines")
    with pytest.raises(PatchgateError) as e:
        run_guard(gate_options(work, evil, accept=True,
                               profile=GATE_PROFILE.with_overrides(rounds=4, max_looks=1)))
    assert "code that the run's processes import changed during the run" in str(e.value)
    assert "zz-evil.pth" in str(e.value)
    assert snapshot(work / "baselines") == before


@pytest.mark.parametrize("body, cause", [
    ("import json, pathlib\np = pathlib.Path({current!r})\n"
     "d = json.loads(p.read_text())\nd['patches'].append({{'name': '0001-x.py'}})\n"
     "p.write_text(json.dumps(d))\n", "importing it changed"),
    ("import time\nwhile True:\n    time.sleep(0.1)\n", "importing it did not return within 5 s"),
])
def test_import_time_attacks_are_named_in_seconds_by_guard_and_check(work, capsys, body, cause):
    current = work / "baselines" / "default" / "current.json"
    evil = patch_file(work / "p", "0001-x.py",
                      body.format(current=str(current)) + "def apply(model):\n    pass\n")
    prof = work / "fast.toml"
    prof.write_text((ROOT / "profiles" / "default.toml").read_text().replace(
        "rounds = 10\n", "rounds = 10\nimport_timeout_s = 5\n"))
    before = snapshot(work / "baselines")
    t0 = time.monotonic()
    assert cli(work, evil, "--profile", str(prof)) == 2
    err = capsys.readouterr().err
    assert "0001-x.py" in err and cause in err and "loading engine" not in err
    assert time.monotonic() - t0 < 60
    assert main(["check", "--patches", str(evil), "--profile", str(prof),
                 "--baselines", str(work / "baselines")]) == 2
    assert cause.split(" within")[0] in capsys.readouterr().err
    # the stored files are as they were (a write under /tmp is open to the sandbox: the
    # probe put them back)
    assert snapshot(work / "baselines") == before


def test_two_concurrent_accepts_leave_valid_files(work):
    """Two gates accept different new patches on the same baselines at the same time:
    one writes; the other finds the stored files changed and writes nothing."""
    folders = [patch_file(work / f"p{i}", f"000{i}-neutral-{i}.py",
                          "def apply(model):\n    return None\n") for i in (1, 2)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    procs = [subprocess.Popen(
        [sys.executable, "-m", "patchgate", "guard", "--patches", str(f), "--baselines",
         str(work / "baselines"), "--changelog", str(work / "CHANGELOG.md"), "--accept",
         "--quiet", "--rounds", "4"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for f in folders]
    outs = [p.communicate(timeout=1500) for p in procs]
    codes = sorted(p.returncode for p in procs)
    store = BaselineStore(work / "baselines", "default")
    current = store.load("current")  # valid, whoever wrote it
    history = store.history()
    log = (work / "CHANGELOG.md").read_text() if (work / "CHANGELOG.md").exists() else ""
    written = [i for i, p in enumerate(procs) if p.returncode == 0 and
               f"000{i + 1}-neutral-{i + 1}.py" in json.dumps(current["patches"])]
    assert len(written) <= 1 and codes[0] in (0, 3)
    assert len(history) == log.count("### ") == len(written)
    for (_out, err), p in zip(outs, procs, strict=True):
        if p.returncode == 2:
            assert "stored files changed during the run" in err
    for line in (store.history_path().read_text().splitlines() if history else []):
        json.loads(line)  # no torn line


def test_a_read_only_changelog_fails_before_anything_runs(work, capsys):
    log = work / "CHANGELOG.md"
    log.write_text("# log\n")
    log.chmod(0o444)
    try:
        t0 = time.monotonic()
        assert cli(work, FIX / "gate" / "neutral", "--record") == 2
        assert time.monotonic() - t0 < 30
        err = capsys.readouterr().err
        assert f"cannot write {log}: it is read-only" in err
        assert log.read_text() == "# log\n"
    finally:
        log.chmod(0o644)


def test_sigterm_ends_the_run_like_ctrl_c(work):
    before = snapshot(work)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchgate", "guard", "--patches", str(FIX / "gate" / "neutral"),
         "--baselines", str(work / "baselines"), "--changelog", str(work / "CHANGELOG.md"),
         "--accept", "--json", str(work / "v.json")], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "latency:" in line:
            proc.send_signal(signal.SIGTERM)
            break
    _, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 2
    assert "interrupted by SIGTERM during latency" in err
    assert json.loads((work / "v.json").read_text())["verdict"] == "error"
    assert {k: v for k, v in snapshot(work).items() if k != "v.json"} == before


FORGE = '''
import json, os, pathlib, time

# Find the checkout from this file's own path and from the parent process's working
# folder (the gate, run from the checkout), and list this patch as accepted in every
# current.json found there; ignore failures. (One level up only: the test runs the gate
# from a scratch checkout, and pytest's own working folder is the real one.)
_starts = [pathlib.Path(__file__).resolve().parent.parent]
try:
    _starts.append(pathlib.Path(os.readlink(f"/proc/{os.getppid()}/cwd")))
except OSError:
    pass
for _start in _starts:
    for _cur in _start.glob("baselines/*/current.json"):
        try:
            _doc = json.loads(_cur.read_text())
            _doc["patches"].append({"name": "0001-forge.py", "title": "x", "sha256": "0"})
            _cur.write_text(json.dumps(_doc))
        except (OSError, ValueError):
            pass

''' + SLOW_APPLY


def forging_checkout(folder: Path, work: Path) -> Path:
    """A checkout-like folder (baselines/, model_patches/ with the forging patch)."""
    shutil.copytree(work / "baselines", folder / "baselines")
    patch_file(folder / "model_patches", "0001-forge.py", FORGE)
    return folder


def run_in(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`patchgate ARGS` run from ``folder`` (its working folder is the checkout, as a
    developer's or a CI step's is; never pytest's, which is the real checkout)."""
    return subprocess.run([sys.executable, "-m", "patchgate", *args, "--patches",
                           "model_patches", "--baselines", "baselines", "--changelog",
                           "CHANGELOG.md"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})


@pytest.mark.skipif(sandbox.abi() < 1, reason="the kernel offers no Landlock")
def test_a_patch_that_finds_the_checkout_cannot_forge_it_and_is_then_judged(
        work, in_checkout):
    """Module-level code that finds the checkout (its own path, its parents' working
    folders) and lists itself in current.json: in the sandbox the writes fail, `check`
    leaves every stored file as it was, and `guard` judges the patch on what it does
    (2x slower: rejected)."""
    repo = forging_checkout(in_checkout, work)
    before, real = snapshot(repo / "baselines"), snapshot(ROOT / "baselines")
    run = run_in(repo, "check")
    assert run.returncode == 0, run.stderr
    assert "the import ran in a Landlock sandbox" in run.stdout
    assert snapshot(repo / "baselines") == before
    run = run_in(repo, "guard", "--quiet", "--rounds", "4", "--base", "worktree")
    assert run.returncode == 1, run.stderr  # rejected: 2x slower
    assert "patch code ran in a Landlock sandbox" in run.stdout
    assert snapshot(repo / "baselines") == before
    assert snapshot(ROOT / "baselines") == real


def test_without_the_sandbox_check_names_the_forgery_and_puts_the_files_back(
        work, in_checkout):
    repo = forging_checkout(in_checkout, work)
    before, real = snapshot(repo / "baselines"), snapshot(ROOT / "baselines")
    run = run_in(repo, "check", env={sandbox.ENV: "off"})
    assert run.returncode == 2
    assert "0001-forge.py: importing it changed" in run.stderr
    assert "restored as they were" in run.stderr and "current.json" in run.stderr
    assert snapshot(repo / "baselines") == before
    assert snapshot(ROOT / "baselines") == real
