"""Growth of the default model to a larger shape (patchgate.grow, patchgate.grow_build).

The reduced shape T (hidden 768, 8 layers, 6 heads of 128, 2 KV heads, FFN 1024,
MiniCPM4-8B's scale_emb 12 and dim_model_base 256) exercises every rule with
non-power-of-2 factors: head size 64 -> 128 (rotary placement, q scale), 2 -> 3
query heads per KV head, hidden x3 (norm weights and eps), layers x2 (depth scale,
near-identity layers), the muP rescalings. Fast tests take 2 items per task of the
default suite; the slow one takes 30 per task.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from models import grow_check as gc
from patchgate import cli
from patchgate.errors import PatchgateError
from patchgate.profile import get_profile, grow
from patchgate.profile import grown as grow_build

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "models" / "default"
T = grow.Shape(hidden_size=768, num_hidden_layers=8, num_attention_heads=6,
               num_key_value_heads=2, intermediate_size=1024, scale_emb=12.0,
               dim_model_base=256)


@pytest.fixture(scope="module")
def small():
    torch.set_num_threads(1)
    return gc.load_small()


@pytest.fixture(scope="module")
def grown(small):
    return gc.grown_model(small[0], T)


@pytest.fixture
def shape_t(monkeypatch):
    monkeypatch.setitem(grow.SHAPES, "test-t", T)
    return "test-t"


def _source_state():
    return load_file(SOURCE / "model.safetensors"), json.loads((SOURCE / "config.json")
                                                                 .read_text())


def _compare(a, b, tok, items):
    worst, diverged = 0.0, []
    for task, prompt, n in items:
        ids = tok(prompt)["input_ids"]
        la, ta = gc.greedy(a, ids, n)
        lb, tb = gc.greedy(b, ids, n)
        worst = max(worst, float((la - lb).abs().max()))
        if ta != tb:
            diverged.append((task, prompt[:40], ta, tb))
    return worst, diverged


def test_grown_fp32_answers_as_the_default_model(small, grown):
    model, tok = small
    worst, diverged = _compare(model, grown, tok, gc.suite_items(2))
    assert worst < 1e-2
    assert diverged == []


@pytest.mark.slow
def test_grown_fp32_greedy_identical_on_30_items_per_task(small, grown):
    model, tok = small
    worst, diverged = _compare(model, grown, tok, gc.suite_items(30))
    assert worst < 1e-2
    assert diverged == []


def test_a_wrong_rotary_placement_is_caught(small, monkeypatch):
    """The comparison above can fail: dims placed i -> i (not i -> 2i) break positions."""
    real = grow._index

    def contiguous(src, dst):
        q_rows, kv_rows = real(src, dst)
        d, D = src.head_dim, dst.head_dim
        return ((q_rows // D) * D + torch.arange(d).repeat(len(q_rows) // d),
                (kv_rows // D) * D + torch.arange(d).repeat(len(kv_rows) // d))

    monkeypatch.setattr(grow, "_index", contiguous)
    model, tok = small
    worst, _ = _compare(model, gc.grown_model(model, T), tok, gc.suite_items(1))
    assert worst > 0.5


def test_more_kv_heads_keep_each_query_head_in_its_group(small):
    """KV heads 2 -> 4 and 2 -> 4 query heads per KV head (head size kept at 64)."""
    model, _ = small
    wide = grow.Shape(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, intermediate_size=768)
    big = gc.grown_model(model, wide)
    ids = torch.randint(3, 448, (1, 96), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert float((model(ids).logits - big(ids).logits).abs().max()) < 1e-2


def test_noise_fills_every_row_and_changes_no_greedy_token(small, grown):
    state, cfg = _source_state()
    new_cfg, new = grow.grow(state, cfg, T)
    for name, t in new.items():
        rows = t.abs().reshape(-1, t.shape[-1]).amax(-1)
        assert bool((rows > 0).all()), name
    pad = new["lm_head.weight"][:, cfg["hidden_size"]:]
    assert 0 < float(pad.abs().max()) <= grow.NOISE
    added = new["model.layers.7.self_attn.o_proj.weight"]  # a near-identity layer
    assert float(added.abs().max()) <= grow.NOISE
    model, tok = small
    _, diverged = _compare(grown, gc.grown_model(model, T, scale=0.0), tok, gc.suite_items(2))
    assert diverged == []


def test_noise_is_seeded_and_distinct_per_tensor_and_row():
    a = grow.noise("x.weight", (64, 32), torch.float32)
    assert torch.equal(a, grow.noise("x.weight", (64, 32), torch.float32))
    assert not torch.equal(a, grow.noise("y.weight", (64, 32), torch.float32))
    assert not torch.equal(a, grow.noise("x.weight", (64, 32), torch.float32, seed=1))
    assert len({tuple(r.tolist()) for r in a}) == 64


def test_grown_config_is_minicpm4_8b_but_vocabulary_and_eps():
    cfg = json.loads((SOURCE / "config.json").read_text())
    dummy = json.loads((ROOT / "models" / "minicpm4-8b-dummy" / "config.json").read_text())
    new = grow.grown_config(cfg, grow.SHAPES["minicpm4-8b"])
    differ = {k for k in dummy if new.get(k) != dummy[k]}
    assert differ == {"vocab_size", "rms_norm_eps", "auto_map"}
    assert new["vocab_size"] == 448
    assert new["rms_norm_eps"] == pytest.approx(cfg["rms_norm_eps"] * 256 / 4096)
    params = sum(torch.Size(s).numel() for _, s in grow.tensor_plan(new))
    assert params == 7_587_237_888  # 8,185M of MiniCPM4-8B less its 73,448-token head/embedding


@pytest.mark.parametrize("shape, words", [
    (grow.Shape(128, 8, 2, 2, 1024), "hidden_size 256 does not fit the shape's 128"),
    (grow.Shape(768, 2, 6, 2, 1024), "num_hidden_layers 4"),
    (grow.Shape(512, 8, 2, 2, 1024), "num_attention_heads 4 does not fit the shape's 2"),
    (grow.Shape(768, 8, 6, 1, 1024), "num_key_value_heads 2 does not fit the shape's 1"),
    (grow.Shape(960, 8, 10, 2, 1024), "head size 64 / KV heads 2 do not divide"),
])
def test_a_shape_that_cannot_hold_the_source_is_named(shape, words):
    state, cfg = _source_state()
    with pytest.raises(PatchgateError, match=words) as e:
        grow.grow(state, cfg, shape)
    assert e.value.hint


def _broken_source(tmp_path, drop=None, extra=None, config=None) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src)
    state = load_file(src / "model.safetensors")
    if drop:
        del state[drop]
    if extra:
        state[extra] = torch.zeros(3)
    save_file(state, src / "model.safetensors", metadata={"format": "pt"})
    if config:
        cfg = json.loads((src / "config.json").read_text())
        (src / "config.json").write_text(json.dumps({**cfg, **config}))
    return src


@pytest.mark.parametrize("broken, words", [
    ({"drop": "model.layers.2.mlp.up_proj.weight"},
     "tensor model.layers.2.mlp.up_proj.weight is missing"),
    ({"extra": "model.layers.0.self_attn.q_proj.bias"},
     "tensor model.layers.0.self_attn.q_proj.bias is not part of a plain MiniCPM"),
    ({"config": {"rope_scaling": {"type": "linear", "factor": 2.0}}}, "rope_scaling"),
    ({"config": {"intermediate_size": 512}},
     r"tensor model.layers.0.mlp.gate_proj.weight has shape \(768, 256\)"),
])
def test_a_broken_source_is_an_error_and_leaves_no_folder(tmp_path, shape_t, broken, words):
    src = _broken_source(tmp_path, **broken)
    cache = tmp_path / "cache"
    with pytest.raises(PatchgateError, match=words):
        grow_build.build(src, shape_t, cache)
    left = [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] \
        if cache.exists() else []
    assert left == []


def test_a_missing_weights_file_and_an_unknown_shape_are_named(tmp_path, shape_t):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(PatchgateError, match="no model.safetensors"):
        grow_build.build(tmp_path, shape_t, tmp_path / "c")
    with pytest.raises(PatchgateError, match="unknown shape 'minicpm-9000'"):
        grow_build.build(SOURCE, "minicpm-9000", tmp_path / "c")


def test_build_writes_a_bf16_checkpoint_transformers_loads(tmp_path, shape_t, small):
    from transformers import AutoModelForCausalLM

    path = grow_build.build(SOURCE, shape_t, tmp_path)
    with safe_open(path / "model.safetensors", "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    cfg = json.loads((path / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["torch_dtype"]) == \
        (768, 8, "bfloat16")
    info = json.loads((path / "grown.json").read_text())
    assert info["layers_near_identity"] == [4, 5, 6, 7] and info["shape"] == shape_t
    for name in ("tokenizer.json", "modeling_minicpm.py", "configuration_minicpm.py"):
        assert (path / name).read_bytes() == (SOURCE / name).read_bytes()
    big = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True,
                                               dtype=torch.float32).eval()
    model, tok = small
    _, diverged = _compare(model, big, tok, gc.suite_items(1))
    assert len(diverged) <= 1  # bf16 weights: the small model's own bf16 rounding


def test_the_cache_is_keyed_and_a_second_call_finds_it(tmp_path, shape_t):
    first = grow_build.ensure(SOURCE, shape_t, tmp_path)
    again = grow_build.ensure(SOURCE, shape_t, tmp_path)
    assert first.built and not again.built and again.path == first.path
    assert again.path.name.startswith("test-t-")
    changed = tmp_path / "changed"
    shutil.copytree(SOURCE, changed)
    (changed / "tokenizer_config.json").write_text(
        (SOURCE / "tokenizer_config.json").read_text() + "\n")
    other = grow_build.ensure(changed, shape_t, tmp_path)
    assert other.built and other.path != first.path


def test_leftover_temp_and_damaged_folders_are_never_used(tmp_path, shape_t):
    first = grow_build.ensure(SOURCE, shape_t, tmp_path).path
    shutil.rmtree(first)
    host = socket.gethostname()
    leftover = tmp_path / f".{first.name}.tmp-{host}-999999999"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    first.mkdir()  # a final folder without its marker
    (first / "model.safetensors").write_bytes(b"cut")
    again = grow_build.ensure(SOURCE, shape_t, tmp_path)
    assert again.built and again.path == first
    assert not leftover.exists()
    assert (first / "model.safetensors").stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{first.name}.lock", first.name]


def test_cache_root_argument_environment_and_default(tmp_path, monkeypatch):
    monkeypatch.delenv(grow_build.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert grow_build.cache_root() == tmp_path / "xdg" / "patchgate" / "grown"
    monkeypatch.setenv(grow_build.ENV, str(tmp_path / "env"))
    assert grow_build.cache_root() == tmp_path / "env"
    assert grow_build.cache_root(tmp_path / "arg") == tmp_path / "arg"


def test_the_profile_loads_the_grown_folder(tmp_path, shape_t, monkeypatch):
    monkeypatch.setenv(grow_build.ENV, str(tmp_path))
    prof = get_profile("h200-minicpm8b")
    assert (prof.grow, prof.engine, prof.dtype, prof.guard, prof.tasks) == \
        ("minicpm4-8b", "sglang", "bfloat16", "lm_eval", ("default_suite",))
    assert prof.lengths == get_profile("h200-minicpm8b-dummy").lengths
    path = prof.with_overrides(grow=shape_t).model_path()
    assert path.parent == tmp_path and (path / "grown.json").exists()
    assert get_profile("h200-default").model_path() == SOURCE


def test_cli_prints_the_folder_and_whether_it_was_built(tmp_path, shape_t, capsys):
    argv = ["model", "grow", "--shape", shape_t, "--cache", str(tmp_path)]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert Path(out.strip()).parent == tmp_path and "test-t: built in" in err
    assert cli.main(argv) == 0
    out2, err2 = capsys.readouterr()
    assert out2 == out and "found in the cache" in err2
    assert cli.main(["model", "grow", "--shape", "nope", "--cache", str(tmp_path)]) == 2
    assert "ERROR unknown shape 'nope'" in capsys.readouterr().err


def test_the_workload_fingerprint_of_a_build_is_the_same_everywhere(tmp_path, shape_t):
    from patchgate.store import workload

    a = grow_build.build(SOURCE, shape_t, tmp_path / "a")
    b = grow_build.build(SOURCE, shape_t, tmp_path / "b")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert workload.fingerprint(a, None) == workload.fingerprint(b, None)
    changed = tmp_path / "changed"
    shutil.copytree(SOURCE, changed)
    (changed / "config.json").write_text((SOURCE / "config.json").read_text() + "\n")
    c = grow_build.build(changed, shape_t, tmp_path / "a")
    assert workload.fingerprint(c, None) != workload.fingerprint(a, None)
