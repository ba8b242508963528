"""The model/task fingerprint that decides whether a stored accuracy is still valid."""

from __future__ import annotations

import shutil
from pathlib import Path

from patchgate.store import workload

ROOT = Path(__file__).resolve().parent.parent


def copy_model(tmp_path: Path) -> Path:
    dst = tmp_path / "model"
    shutil.copytree(ROOT / "models" / "default", dst)
    return dst


def test_fingerprint_follows_weights_and_tasks_not_docs(tmp_path):
    model = copy_model(tmp_path)
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "guards" / "tasks", tasks, ignore=shutil.ignore_patterns("__pycache__"))
    base = workload.fingerprint(model, tasks)
    assert len(base["model"]) == 64 and len(base["tasks"]) == 64
    assert workload.fingerprint(model, tasks) == base  # deterministic
    (model / "README.md").write_text("another model card\n")
    (model / "train_log.json").write_text("{}\n")
    assert workload.fingerprint(model, tasks) == base  # documentation does not count
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    changed = workload.fingerprint(model, tasks)
    assert changed["model"] != base["model"] and changed["tasks"] == base["tasks"]
    with (tasks / "needle.jsonl").open("a") as f:
        f.write("\n")
    assert workload.fingerprint(model, tasks)["tasks"] != base["tasks"]
    assert [d.split(":")[0] for d in workload.differences(base, changed)] == ["model"]


def test_large_files_are_hashed_by_size_and_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(workload, "FULL_HASH_LIMIT", 3 * 2**20)
    big = tmp_path / "m"
    big.mkdir()
    blob = bytearray(4 * 2**20)
    (big / "w.bin").write_bytes(bytes(blob))
    base = workload.fingerprint(big, None)
    assert base["tasks"] is None
    blob[-1] = 1  # the last MiB is read
    (big / "w.bin").write_bytes(bytes(blob))
    assert workload.fingerprint(big, None)["model"] != base["model"]
    blob.append(0)  # so is the size
    (big / "w.bin").write_bytes(bytes(blob))
    assert workload.fingerprint(big, None)["model"] != base["model"]


def test_a_model_that_is_not_a_folder_is_recorded_by_name(tmp_path):
    fp = workload.fingerprint("openbmb/MiniCPM4-8B", None)
    assert fp == {"model": "name:openbmb/MiniCPM4-8B", "tasks": None}
    assert workload.differences(None, fp) == [
        "model: stored none recorded, here name:openbmb/MiniCPM4-8B"]


def test_engine_settings_join_the_fingerprint_only_when_the_profile_sets_any(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    plain = workload.fingerprint(model, None)
    assert workload.fingerprint(model, None, engine_args={}) == plain  # stored ones stay
    graphs = workload.fingerprint(model, None, engine_args={"cuda_graph_bs_prefill": [8]})
    assert graphs["model"] == plain["model"]
    assert graphs != workload.fingerprint(model, None,
                                          engine_args={"cuda_graph_bs_prefill": [8, 16]})
    # a stored reference without settings is not reused by a profile with some
    assert workload.differences(plain, graphs) == \
        ["engine_args: stored none recorded, here " + graphs["engine_args"][:12] + "..."]
