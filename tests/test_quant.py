"""patchgate.quant: which layers a real-kernel patch quantizes inside SGLang (the
kernels themselves need a GPU and torchao; docs/gpu-runs has their runs)."""

import pytest
import torch

from patchgate.patches.quant import projection_layers


class UnquantizedLinearMethod:  # the name SGLang gives a bf16 linear layer's method
    pass


class Fp8LinearMethod:
    pass


class Proj(torch.nn.Linear):
    def __init__(self, method=UnquantizedLinearMethod):
        super().__init__(4, 4, bias=False)
        self.quant_method = method()


class Layer(torch.nn.Module):
    def __init__(self, method=UnquantizedLinearMethod):
        super().__init__()
        self.self_attn = torch.nn.Module()
        self.self_attn.qkv_proj, self.self_attn.o_proj = Proj(method), Proj(method)
        self.mlp = torch.nn.Module()
        self.mlp.gate_up_proj, self.mlp.down_proj = Proj(method), Proj(method)
        self.input_layernorm = torch.nn.LayerNorm(4)


def model(layers=2, method=UnquantizedLinearMethod):
    m = torch.nn.Module()
    m.model = torch.nn.Module()
    m.model.layers = torch.nn.ModuleList(Layer(method) for _ in range(layers))
    m.lm_head = torch.nn.Linear(4, 8)
    return m


def test_every_decoder_projection_and_nothing_else():
    names = projection_layers(model())
    assert len(names) == 8
    assert "model.layers.1.mlp.down_proj" in names
    assert not any("lm_head" in n or "layernorm" in n for n in names)


def test_kept_layers_are_left_out():
    keep = ("model.layers.0.self_attn.qkv_proj", "model.layers.1.mlp.gate_up_proj")
    names = projection_layers(model(), keep)
    assert len(names) == 6 and not set(keep) & set(names)


def test_a_kept_name_that_is_not_in_the_model_is_an_error():
    with pytest.raises(RuntimeError, match="not in the model.*layers.7"):
        projection_layers(model(), ["model.layers.7.self_attn.qkv_proj"])


def test_layers_already_quantized_by_sglang_are_an_error():
    with pytest.raises(RuntimeError, match="already quantized by SGLang .Fp8LinearMethod."):
        projection_layers(model(method=Fp8LinearMethod))


def test_a_model_without_projections_is_an_error():
    with pytest.raises(RuntimeError, match="no layer named"):
        projection_layers(torch.nn.Sequential(torch.nn.Linear(2, 2)))
