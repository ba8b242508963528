"""The optimizations in model_patches/: valid, and exact where they claim to be."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models import synthtasks as st
from patchgate.patches import discover
from patchgate.patches.apply import apply_patches

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "default"
EXACT = {"0001-fused-add-rmsnorm.py": 1e-4, "0002-rotary-no-fp32-roundtrip.py": 1e-5}


def load():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(MODEL, trust_remote_code=True,
                                                dtype=torch.float32).eval()


def prompts():
    vocab = {w: i for i, w in enumerate(st.vocabulary())}
    return [torch.tensor([[vocab[w] for w in st.make_eval_items(t, 2)[1]["prompt"].split()]])
            for t in st.TASKS]


def test_every_patch_validates_and_names_itself():
    patches = discover(ROOT / "model_patches")
    assert [p.order for p in patches] == sorted(p.order for p in patches)
    assert all(p.title and p.description for p in patches)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_patch_is_numerically_equivalent(name):
    """Run in a subprocess-free way: each patch gets a fresh model; module-level
    changes are undone by reloading the modeling module afterwards."""
    import importlib
    import sys

    (patch,) = [p for p in discover(ROOT / "model_patches") if p.name == name]
    base = load()
    xs = prompts()
    with torch.no_grad():
        ref = [base(x).logits for x in xs]
        patched = apply_patches(load(), [patch], "transformers")
        out = [patched(x).logits for x in xs]
    module = sys.modules[type(base).__module__]
    importlib.reload(module)  # undo module-level replacements for the next tests
    worst = max((a - b).abs().max().item() for a, b in zip(ref, out, strict=True))
    assert worst <= EXACT[name]


def test_rejected_int4_patch_leaves_16_levels_per_group():
    (patch,) = discover(ROOT / "docs" / "rejected_patches")
    model = apply_patches(load(), [patch], "transformers")
    w = model.model.layers[0].mlp.up_proj.weight.detach()
    groups = w.reshape(w.shape[0], -1, 32)
    levels = max(len(torch.unique(g)) for g in groups[:8].reshape(-1, 32))
    assert levels <= 16


def test_mixed_precision_patch_quantizes_as_the_sensitivity_tool_does():
    """0005 stores int8 (per channel) weights in its INT8_LAYERS and int4 (groups of
    32) everywhere else, exactly what models/quantize.py computes."""
    from models.quantize import rtn_quantize
    from patchgate.patches.apply import load_module

    (patch,) = [p for p in discover(ROOT / "model_patches") if p.name.startswith("0005")]
    int8 = load_module(patch).INT8_LAYERS
    base = load()
    original = {n: m.weight.detach().clone() for n, m in base.named_modules()
                if isinstance(m, torch.nn.Linear)}
    assert set(int8) <= set(original)
    model = apply_patches(base, [patch], "transformers")
    mods = dict(model.named_modules())
    for name, w in original.items():
        want = rtn_quantize(w, 8, None) if name in int8 else rtn_quantize(w, 4, 32)
        assert torch.equal(mods[name].weight, want), name


def test_sensitivity_ranks_layers_and_wins_back_nll():
    """The layer choice of 0005 comes from models.sensitivity.choose; on a small
    calibration sample it still ranks every layer and meets its own rule."""
    from models import sensitivity

    res = sensitivity.choose(load(), sensitivity.calibration_batches(n=4), target=0.995)
    assert len(res["layers"]) == len(sensitivity.linear_names(load()))
    assert set(res["int8_layers"]) <= {r["layer"] for r in res["layers"]}
    if res["all_int4"]["nll_increase"] > 0 and len(res["int8_layers"]) < len(res["layers"]):
        assert res["mixed_nll_increase"] <= 0.5 * res["all_int4"]["nll_increase"] + 1e-9
