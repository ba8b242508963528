"""Rotary embedding without fp32 round trips.

MiniCPM casts q and k to fp32, rotates them, and casts them back: two extra copies
of q and k per layer and step. The rotation now runs in the activations' dtype;
the cos/sin tables stay fp32 (SGLang's ``cos_sin_cache``) and are cast per use. On
an fp32 model the casts were already no-ops, so this changes the bf16 (GPU) path.
"""

import sys
import types


def _hf_rotary(rotate_half):
    def apply_rotary_pos_emb(q, k, cos, sin):
        cos = cos.unsqueeze(1).to(q.dtype)
        sin = sin.unsqueeze(1).to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    return apply_rotary_pos_emb


def _sgl_attention_forward(self, positions, hidden_states, forward_batch, **kwargs):
    qkv, _ = self.qkv_proj(hidden_states)
    q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
    q, k = self.rotary_emb(positions, q, k)
    output, _ = self.o_proj(self.attn(q, k, v, forward_batch))
    return output


def apply(model):
    layers = model.model.layers
    if any(c.__module__.startswith("sglang.") for c in type(model).__mro__):
        for layer in layers:
            attn = layer.self_attn
            attn.forward = types.MethodType(_sgl_attention_forward, attn)
        return
    modeling = sys.modules[type(layers[0].self_attn).__module__]
    modeling.apply_rotary_pos_emb = _hf_rotary(modeling.rotate_half)
