"""The stored state a run is judged against comes from the base commit (patchgate.store.base):
a change's own edits to baselines/ and CHANGELOG.md are named and ignored."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import snapshot
from fakes import SLOW_APPLY

from patchgate.cli import main
from patchgate.errors import PatchgateError
from patchgate.patches import discover
from patchgate.store import base


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def repository(folder: Path, baselines: Path | None = None) -> Path:
    """A git repository holding ``baselines`` (or one small file) and a CHANGELOG.md,
    committed once."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    git(folder, "config", "user.email", "t@example.com")
    git(folder, "config", "user.name", "t")
    if baselines is not None:
        shutil.copytree(baselines, folder / "baselines")
    else:
        (folder / "baselines" / "default").mkdir(parents=True)
        (folder / "baselines" / "default" / "history.jsonl").write_text("")
    (folder / "CHANGELOG.md").write_text("# Changes\n")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "base")
    return folder


def test_the_base_commit_is_read_and_the_working_tree_edit_is_named(tmp_path):
    repo = repository(tmp_path / "r")
    (repo / "baselines" / "default" / "history.jsonl").write_text("not json\n")
    (repo / "CHANGELOG.md").write_text("# Changes\n- accepted: my own patch\n")
    state = base.read(repo / "baselines", repo / "CHANGELOG.md", "default")
    assert state.history == []  # HEAD's empty history, not the broken edit
    assert state.base["ref"] == "HEAD" and state.base["commit"] == git(repo, "rev-parse", "HEAD")
    assert state.base["differs"] == ["baselines/default/history.jsonl", "CHANGELOG.md"]
    assert "the change is ignored" in state.base["note"]


def test_a_file_only_the_change_adds_is_named_too(tmp_path):
    repo = repository(tmp_path / "r")
    (repo / "baselines" / "default" / "current.json").write_text("{}")
    with base.resolve(repo / "baselines", repo / "CHANGELOG.md", "default") as b:
        assert b.differs == ["baselines/default/current.json"]
        assert not (b.baselines_dir / "default" / "current.json").exists()
        scratch = b.baselines_dir
    assert not scratch.exists()


def test_a_broken_file_at_the_base_is_named_as_the_base_holds_it(tmp_path):
    repo = repository(tmp_path / "r")
    (repo / "baselines" / "default" / "current.json").write_text("{broken")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "broken")
    with pytest.raises(PatchgateError) as e:
        base.read(repo / "baselines", repo / "CHANGELOG.md", "default")
    assert "HEAD:baselines/default/current.json" in e.value.message
    assert "patchgate-base-" not in e.value.message


def test_without_git_or_outside_the_repository_the_working_tree_is_read_and_said(tmp_path):
    (tmp_path / "bl" / "default").mkdir(parents=True)
    state = base.read(tmp_path / "bl", tmp_path / "CHANGELOG.md", "default")
    assert state.base["ref"] is None and "working tree" in state.base["note"]
    assert "no git repository" in state.base["note"]
    with pytest.raises(PatchgateError, match="not in a git repository"):
        base.read(tmp_path / "bl", tmp_path / "CHANGELOG.md", "default", "HEAD")
    repo = repository(tmp_path / "r")
    state = base.read(repo / "baselines", repo / "CHANGELOG.md", "default", base.WORKTREE)
    assert state.base["commit"] is None and "--base worktree" in state.base["note"]


def test_an_unknown_base_is_an_error_with_the_next_step(tmp_path):
    repo = repository(tmp_path / "r")
    with pytest.raises(PatchgateError) as e:
        base.read(repo / "baselines", repo / "CHANGELOG.md", "default", "no-such-branch")
    assert "not a commit" in e.value.message and "git fetch" in e.value.hint


SLOW = '"""Attack: twice as slow, listed by the pull request as already accepted."""\n\n' \
    "import time\n\n\n" + SLOW_APPLY


@pytest.mark.slow
def test_a_pull_request_that_lists_its_own_slow_patch_in_current_json_is_rejected(
        work, capsys):
    """The pull request adds a patch 2x slower and one line in current.json listing it
    with its sha256. Read from the working tree, the gate compared it with itself and
    accepted it; judged against the base commit it is new, and rejected."""
    repo = repository(work / "repo", work / "baselines")
    patches = repo / "model_patches"
    patches.mkdir()
    (patches / "0001-slow.py").write_text(SLOW)
    current = repo / "baselines" / "default" / "current.json"
    doc = json.loads(current.read_text())
    doc["patches"].append(discover(patches)[0].record())
    current.write_text(json.dumps(doc))
    before = snapshot(repo / "baselines")
    out = work / "v.json"
    assert main(["guard", "--patches", str(patches), "--baselines", str(repo / "baselines"),
                 "--changelog", str(repo / "CHANGELOG.md"), "--quiet", "--rounds", "4",
                 "--json", str(out)]) == 1
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "rejected" and verdict["new_patches"] == ["0001-slow.py"]
    assert verdict["base"]["differs"] == ["baselines/default/current.json"]
    text = capsys.readouterr().out
    assert "the working tree changes baselines/default/current.json" in text
    assert snapshot(repo / "baselines") == before
