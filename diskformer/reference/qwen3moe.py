"""qwen3moe (Qwen3-30B-A3B) math, after llama.cpp src/models/qwen3moe.cpp.

Per layer: h = x + attn(rms_norm(x)); out = h + moe(rms_norm(h)). Attention: q/k/v projections, RMSNorm of each
q and k head (attn_q_norm / attn_k_norm), NeoX RoPE on the whole head, softmax(q k^T / sqrt(head_dim)) v with GQA,
attn_output. No shared expert.
"""
from __future__ import annotations

import math

import numpy as np

from .cache import KVCache
from .layers import Params, SparseMoE, causal_attention, rms_norm, rope_neox


class Attention:
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

    def __call__(self, x, cache: KVCache, positions):
        c = self.cfg
        n = x.shape[0]
        q = rms_norm(self.wq(x).reshape(n, c.n_head, c.head_dim), self.q_norm, self.eps)
        k = rms_norm(self.wk(x).reshape(n, c.n_head_kv, c.head_dim), self.k_norm, self.eps)
        v = self.wv(x).reshape(n, c.n_head_kv, c.head_dim)
        q = rope_neox(q, positions, c.n_rot, self.rope_base)
        k = rope_neox(k, positions, c.n_rot, self.rope_base)
        first_pos = cache.length
        k_all, v_all = cache.append(k, v)
        out = causal_attention(q, k_all, v_all, first_pos, 1.0 / math.sqrt(c.head_dim))
        return self.wo(out.reshape(n, c.n_head * c.head_dim))


class Block:
    def __init__(self, params: Params, cfg, layer: int):
        p = f"blk.{layer}"
        self.attn_norm = params.vector(f"{p}.attn_norm.weight")
        self.ffn_norm = params.vector(f"{p}.ffn_norm.weight")
        self.attn = Attention(params, p, cfg)
        self.moe = SparseMoE(params, p, cfg.n_expert_used)
        self.cfg = cfg
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        self.dtype = params.options.dtype
        self.kv_f16 = params.options.kv_f16

    def new_state(self):
        c = self.cfg
        return KVCache(c.n_head_kv, c.head_dim, c.head_dim, self.dtype, self.kv_f16)

    def __call__(self, x, state, positions):
        h = x + self.attn(rms_norm(x, self.attn_norm, self.eps), state, positions)
        return h + self.moe(rms_norm(h, self.ffn_norm, self.eps))
