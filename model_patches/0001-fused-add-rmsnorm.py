"""Fuse the residual add into RMSNorm.

MiniCPM adds each block's output to the residual as ``residual + h * scale_depth /
sqrt(num_layers)``, then normalizes in a separate pass. The scale is folded into the
weights of ``o_proj`` and ``down_proj`` once (exact up to rounding), so the add and
the next norm become one op: SGLang's fused add-RMSNorm kernel
(``RMSNorm(x, residual)``), or on transformers ``torch.add`` plus the native
``F.rms_norm`` instead of six elementwise ops in fp32.
"""

import math
import types

import torch
import torch.nn.functional as F


def _fold_scale(model, layers):
    scale = model.config.scale_depth / math.sqrt(model.config.num_hidden_layers)
    with torch.no_grad():
        for layer in layers:
            layer.self_attn.o_proj.weight.mul_(scale)
            layer.mlp.down_proj.weight.mul_(scale)


def _hf_layer_forward(self, hidden_states, cos, sin, attn_mask, past_key_values):
    ln1, ln2 = self.input_layernorm, self.post_attention_layernorm
    h = self.self_attn(F.rms_norm(hidden_states, ln1.weight.shape, ln1.weight,
                                  ln1.variance_epsilon), cos, sin, attn_mask, past_key_values)
    hidden_states = torch.add(hidden_states, h)
    h = self.mlp(F.rms_norm(hidden_states, ln2.weight.shape, ln2.weight, ln2.variance_epsilon))
    return torch.add(hidden_states, h)


def _sgl_layer_forward(self, positions, hidden_states, forward_batch, residual):
    if residual is None:
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
    else:
        hidden_states, residual = self.input_layernorm(hidden_states, residual)
    hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states,
                                   forward_batch=forward_batch)
    hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
    return self.mlp(hidden_states), residual


def _sgl_model_forward(self, input_ids, positions, forward_batch, input_embeds=None):
    if input_embeds is None:
        hidden_states = self.embed_tokens(input_ids) * self.config.scale_emb
    else:
        hidden_states = input_embeds
    residual = None
    for layer in self.layers:
        hidden_states, residual = layer(positions, hidden_states, forward_batch, residual)
    hidden_states, _ = self.norm(hidden_states, residual)
    return hidden_states


def apply(model):
    layers = model.model.layers
    _fold_scale(model, layers)
    sglang = any(c.__module__.startswith("sglang.") for c in type(model).__mro__)
    for layer in layers:
        layer.forward = types.MethodType(_sgl_layer_forward if sglang else _hf_layer_forward,
                                         layer)
    if sglang:
        model.model.forward = types.MethodType(_sgl_model_forward, model.model)
