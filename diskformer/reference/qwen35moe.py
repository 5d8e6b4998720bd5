"""qwen35moe (Qwen3.5 / Qwen3.6-35B-A3B) math, after llama.cpp src/models/qwen35moe.cpp and delta-net-base.cpp.

Per layer: h = x + mixer(rms_norm(x)); out = h + ffn(rms_norm(h)) with the post_attention_norm. The mixer is Gated
DeltaNet (linear attention) on recurrent layers and gated full attention on the others; the ffn is routed experts
plus a shared expert scaled by sigmoid(w . x). Norm weights are stored with the +1 already added.
"""
from __future__ import annotations

import math

import numpy as np

from .cache import DeltaNetState, KVCache
from .layers import (Params, SparseMoE, causal_attention, causal_conv1d, gated_delta_rule, l2_norm, rms_norm,
                     rope_neox, sigmoid, silu, softplus, swiglu)


def text_rope_pairs(sections, n_rot):
    """Which rotary pairs turn with the token position for text input under llama.cpp's interleaved multi-section
    rope (ggml_rope_multi, IMROPE): pair i is in section t/h/w (position = token position) when
    i % 3 == s and i < 3 * sections[s]; otherwise in section e, which text tokens set to position 0."""
    half = n_rot // 2
    if not sections or not any(sections):
        return np.ones(half)
    total = sum(sections)
    mask = np.zeros(half)
    for i in range(half):
        sector = i % total
        s = sector % 3
        mask[i] = 1.0 if sector < 3 * sections[s] else 0.0
    return mask


class GatedAttention:
    """Full attention whose q projection carries, per head, [query (D) | gate (D)]; output *= sigmoid(gate)."""

    def __init__(self, params: Params, prefix: str, cfg):
        self.wq = params.linear(f"{prefix}.attn_q.weight")
        self.wk = params.linear(f"{prefix}.attn_k.weight")
        self.wv = params.linear(f"{prefix}.attn_v.weight")
        self.wo = params.linear(f"{prefix}.attn_output.weight")
        self.q_norm = params.vector(f"{prefix}.attn_q_norm.weight")
        self.k_norm = params.vector(f"{prefix}.attn_k_norm.weight")
        self.cfg = cfg
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        self.rope_base = cfg.rope_base * params.options.rope_base_scale
        self.rope_pairs = text_rope_pairs(cfg.rope_sections, cfg.n_rot)
        self.output_gate = params.options.attention_output_gate

    def __call__(self, x, cache: KVCache, positions):
        c = self.cfg
        n, d = x.shape[0], c.head_dim
        q_full = self.wq(x).reshape(n, c.n_head, 2 * d)
        q, gate = q_full[..., :d], q_full[..., d:]
        q = rms_norm(q, self.q_norm, self.eps)
        k = rms_norm(self.wk(x).reshape(n, c.n_head_kv, d), self.k_norm, self.eps)
        v = self.wv(x).reshape(n, c.n_head_kv, c.head_dim)
        q = rope_neox(q, positions, c.n_rot, self.rope_base, self.rope_pairs)
        k = rope_neox(k, positions, c.n_rot, self.rope_base, self.rope_pairs)
        first_pos = cache.length
        k_all, v_all = cache.append(k, v)
        out = causal_attention(q, k_all, v_all, first_pos, 1.0 / math.sqrt(d))
        if self.output_gate:
            out = out * sigmoid(gate)
        return self.wo(out.reshape(n, c.n_head * c.head_dim))


class GatedDeltaNet:
    """Linear attention: qkv -> causal conv -> SiLU -> split q|k|v -> L2-normalise q, k -> delta rule per value
    head (value head h reads key head h % n_k, llama.cpp's tiled repeat) -> RMSNorm(o) * ssm_norm * SiLU(z) ->
    ssm_out. Decay g = softplus(alpha x + dt_bias) * ssm_a (ssm_a = -exp(A_log)); beta = sigmoid(beta x)."""

    def __init__(self, params: Params, prefix: str, cfg):
        self.w_qkv = params.linear(f"{prefix}.attn_qkv.weight")
        self.w_z = params.linear(f"{prefix}.attn_gate.weight")
        self.w_beta = params.linear(f"{prefix}.ssm_beta.weight")
        self.w_alpha = params.linear(f"{prefix}.ssm_alpha.weight")
        self.conv_kernel = params.matrix(f"{prefix}.ssm_conv1d.weight")  # (channels, K)
        self.dt_bias = params.vector(f"{prefix}.ssm_dt.bias")
        self.a = params.vector(f"{prefix}.ssm_a")
        self.norm = params.vector(f"{prefix}.ssm_norm.weight")
        self.w_out = params.linear(f"{prefix}.ssm_out.weight")
        self.cfg = cfg
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        nk, nv = cfg.ssm_n_group, cfg.ssm_dt_rank
        if nv % nk:
            raise ValueError(f"value heads ({nv}) must be a multiple of key heads ({nk})")
        heads = np.arange(nv)
        self.key_head_of = heads % nk if params.options.gdn_tiled_heads else heads // (nv // nk)

    def __call__(self, x, state: DeltaNetState, positions):
        c = self.cfg
        n = x.shape[0]
        nk, nv, dk, dv = c.ssm_n_group, c.ssm_dt_rank, c.ssm_d_state, c.head_v_dim
        key_dim = nk * dk
        mixed, state.conv = causal_conv1d(self.w_qkv(x), state.conv, self.conv_kernel)
        mixed = silu(mixed)
        q = l2_norm(mixed[:, :key_dim].reshape(n, nk, dk), self.eps)
        k = l2_norm(mixed[:, key_dim:2 * key_dim].reshape(n, nk, dk), self.eps)
        v = mixed[:, 2 * key_dim:].reshape(n, nv, dv)
        q = q[:, self.key_head_of] / math.sqrt(dk)
        k = k[:, self.key_head_of]
        beta = sigmoid(self.w_beta(x))
        g = softplus(self.w_alpha(x) + self.dt_bias) * self.a
        o = gated_delta_rule(q, k, v, g, beta, state.ssm)
        z = self.w_z(x).reshape(n, nv, dv)
        o = rms_norm(o, self.norm, self.eps) * silu(z)
        return self.w_out(o.reshape(n, nv * dv))


class MoEWithSharedExpert:
    def __init__(self, params: Params, prefix: str, cfg):
        self.routed = SparseMoE(params, prefix, cfg.n_expert_used)
        self.gate = params.linear(f"{prefix}.ffn_gate_shexp.weight")
        self.up = params.linear(f"{prefix}.ffn_up_shexp.weight")
        self.down = params.linear(f"{prefix}.ffn_down_shexp.weight")
        self.shared_gate = params.vector(f"{prefix}.ffn_gate_inp_shexp.weight")  # (hidden,), F32

    def __call__(self, x):
        shared = swiglu(x, self.gate, self.up, self.down) * sigmoid(x @ self.shared_gate)[:, None]
        return self.routed(x) + shared


class Block:
    def __init__(self, params: Params, cfg, layer: int):
        p = f"blk.{layer}"
        self.recurrent = cfg.is_recurrent(layer)
        self.attn_norm = params.vector(f"{p}.attn_norm.weight")
        self.post_attention_norm = params.vector(f"{p}.post_attention_norm.weight")
        self.mixer = GatedDeltaNet(params, p, cfg) if self.recurrent else GatedAttention(params, p, cfg)
        self.ffn = MoEWithSharedExpert(params, p, cfg)
        self.cfg = cfg
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        self.dtype = params.options.dtype
        self.kv_f16 = params.options.kv_f16

    def new_state(self):
        c = self.cfg
        if self.recurrent:
            return DeltaNetState(c.ssm_conv_kernel, c.conv_channels, c.ssm_dt_rank, c.ssm_d_state,
                                 c.head_v_dim, self.dtype)
        return KVCache(c.n_head_kv, c.head_dim, c.head_dim, self.dtype, self.kv_f16)

    def __call__(self, x, state, positions):
        h = x + self.mixer(rms_norm(x, self.attn_norm, self.eps), state, positions)
        return h + self.ffn(rms_norm(h, self.post_attention_norm, self.eps))
