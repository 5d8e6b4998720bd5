"""gemma4 (Gemma 4 26B-A4B) math, after llama.cpp src/models/gemma4-iswa.cpp.

Per layer (every norm is RMSNorm with the stored weight as is, no +1):

    h   = x + post_attention_norm(attn(attn_norm(x)))
    mlp = post_ffw_norm_1(ffn_down(gelu(ffn_gate(ffn_norm(h))) * ffn_up(ffn_norm(h))))      dense branch
    moe = post_ffw_norm_2(experts(pre_ffw_norm_2(h)))                                       routed branch
    out = (h + post_ffw_norm(mlp + moe)) * layer_output_scale

Attention: q = q_norm(Wq x) per head, k = k_norm(Wk x) per head, v = rms(Wv x) per head without a weight (global
layers have no Wv: v = rms(Wk x), the raw K projection); NeoX RoPE on q and k; scale 1.0 (the norms replace
1/sqrt(d)). Sliding-window layers: head_dim_swa, rope base rope_base_swa on their whole head, a key is masked
when pos_q - pos_k >= n_swa. Global layers: head_dim, rope over the whole head with
each pair's angle divided by rope_freqs (1 for the rotated pairs, 1e30 for the rest: "proportional" rope).

Router: logits = ffn_gate_inp(rms(h) / sqrt(hidden) * ffn_gate_inp.scale) -> softmax -> top-k -> renormalised
weights; expert e: ffn_down_exps[e](gelu(gate) * up) * ffn_down_exps.scale[e], where ffn_gate_up_exps[e] holds the
gate rows, then the up rows. GELU is the tanh form, computed exactly unless options.gelu_fp16_table asks for
ggml-cpu's fp16 table.
"""
from __future__ import annotations

import numpy as np

from py_engine.models.gemma4.config import Gemma4Config

from .cache import KVCache
from .layers import Params, causal_attention, gelu_fp16_table, gelu_tanh, rms_norm, rope_neox, softmax


class Attention:
    def __init__(self, params: Params, prefix: str, cfg: Gemma4Config, layer: int):
        self.wq = params.linear(f"{prefix}.attn_q.weight")
        self.wk = params.linear(f"{prefix}.attn_k.weight")
        self.wv = params.linear(f"{prefix}.attn_v.weight") if params.has(f"{prefix}.attn_v.weight") else None
        self.wo = params.linear(f"{prefix}.attn_output.weight")
        self.q_norm = params.vector(f"{prefix}.attn_q_norm.weight")
        self.k_norm = params.vector(f"{prefix}.attn_k_norm.weight")
        self.n_head, self.n_kv, self.head_dim = cfg.n_head, cfg.n_head_kv[layer], cfg.layer_head_dim(layer)
        self.n_rot = cfg.layer_n_rot(layer)
        self.rope_base = cfg.layer_rope_base(layer) * params.options.rope_base_scale
        self.window = cfg.n_swa if cfg.is_swa(layer) else None
        # proportional rope: the angle of pair i is divided by rope_freqs[i]; as a multiplier on the angles
        self.pair_scale = None if cfg.is_swa(layer) else 1.0 / params.vector("rope_freqs.weight")
        self.eps = cfg.rms_eps * params.options.rms_eps_scale

    def __call__(self, x, cache: KVCache, positions):
        n, d = x.shape[0], self.head_dim
        q = rms_norm(self.wq(x).reshape(n, self.n_head, d), self.q_norm, self.eps)
        k_proj = self.wk(x).reshape(n, self.n_kv, d)
        v_proj = self.wv(x).reshape(n, self.n_kv, d) if self.wv is not None else k_proj
        k = rms_norm(k_proj, self.k_norm, self.eps)
        v = rms_norm(v_proj, 1.0, self.eps)
        q = rope_neox(q, positions, self.n_rot, self.rope_base, self.pair_scale)
        k = rope_neox(k, positions, self.n_rot, self.rope_base, self.pair_scale)
        first_pos = cache.length
        k_all, v_all = cache.append(k, v)
        out = causal_attention(q, k_all, v_all, first_pos, 1.0, self.window)
        return self.wo(out.reshape(n, self.n_head * d))


class RoutedExperts:
    """Softmax routing on the scaled router input, top-k renormalised, fused gate|up experts with a GELU."""

    def __init__(self, params: Params, prefix: str, cfg: Gemma4Config, gelu):
        self.router = params.matrix(f"{prefix}.ffn_gate_inp.weight")
        self.router_scale = params.vector(f"{prefix}.ffn_gate_inp.scale")
        self.gate_up = params.experts(f"{prefix}.ffn_gate_up_exps.weight")
        self.down = params.experts(f"{prefix}.ffn_down_exps.weight")
        self.down_scale = params.vector(f"{prefix}.ffn_down_exps.scale")
        self.n_used = cfg.n_expert_used
        self.n_ff = cfg.n_ff_exp
        self.input_scale = float(np.float32(1.0) / np.sqrt(np.float32(cfg.n_embd)))
        self.renormalize = params.options.renormalize_experts
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        self.gelu = gelu

    def route(self, h):
        """(expert ids (n, k), weights (n, k)) per token; ties to the lower expert id."""
        router_in = rms_norm(h, 1.0, self.eps) * self.input_scale * self.router_scale
        probs = softmax(router_in @ self.router.T, axis=-1)
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, : self.n_used]
        w = np.take_along_axis(probs, chosen, axis=-1)
        if self.renormalize:
            w = w / w.sum(axis=-1, keepdims=True)
        return chosen, w

    def __call__(self, x, h):
        """x: the experts' input (pre_ffw_norm_2(h)); h: the residual, which the router reads."""
        chosen, w = self.route(h)
        out = np.zeros_like(x)
        for expert in np.unique(chosen):
            rows, slots = np.nonzero(chosen == expert)
            gate_up = self.gate_up.apply(expert, x[rows])
            act = self.gelu(gate_up[:, : self.n_ff]) * gate_up[:, self.n_ff:]
            scale = w[rows, slots][:, None] * self.down_scale[expert]
            out[rows] += self.down.apply(expert, act) * scale
        return out


class Block:
    def __init__(self, params: Params, cfg: Gemma4Config, layer: int):
        p = f"blk.{layer}"
        self.gelu = gelu_fp16_table if params.options.gelu_fp16_table else gelu_tanh
        self.attn_norm = params.vector(f"{p}.attn_norm.weight")
        self.attn = Attention(params, p, cfg, layer)
        self.post_attention_norm = params.vector(f"{p}.post_attention_norm.weight")
        self.ffn_norm = params.vector(f"{p}.ffn_norm.weight")
        self.ffn_gate = params.linear(f"{p}.ffn_gate.weight")
        self.ffn_up = params.linear(f"{p}.ffn_up.weight")
        self.ffn_down = params.linear(f"{p}.ffn_down.weight")
        self.post_ffw_norm = params.vector(f"{p}.post_ffw_norm.weight")
        self.experts = None
        if params.has(f"{p}.ffn_gate_inp.weight"):  # llama.cpp: a layer with a router is a MoE layer
            self.experts = RoutedExperts(params, p, cfg, self.gelu)
            self.post_ffw_norm_1 = params.vector(f"{p}.post_ffw_norm_1.weight")
            self.pre_ffw_norm_2 = params.vector(f"{p}.pre_ffw_norm_2.weight")
            self.post_ffw_norm_2 = params.vector(f"{p}.post_ffw_norm_2.weight")
        name = f"{p}.layer_output_scale.weight"
        self.output_scale = params.vector(name) if params.has(name) else None
        self.cfg, self.layer = cfg, layer
        self.eps = cfg.rms_eps * params.options.rms_eps_scale
        self.dtype = params.options.dtype
        self.kv_f16 = params.options.kv_f16

    def new_state(self):
        d = self.cfg.layer_head_dim(self.layer)
        return KVCache(self.cfg.n_head_kv[self.layer], d, d, self.dtype, self.kv_f16)

    def _dense(self, x):
        return self.ffn_down(self.gelu(self.ffn_gate(x)) * self.ffn_up(x))

    def __call__(self, x, state, positions):
        eps = self.eps
        h = x + rms_norm(self.attn(rms_norm(x, self.attn_norm, eps), state, positions), self.post_attention_norm, eps)
        ffn = self._dense(rms_norm(h, self.ffn_norm, eps))
        if self.experts is not None:
            ffn = rms_norm(ffn, self.post_ffw_norm_1, eps)
            moe = self.experts(rms_norm(h, self.pre_ffw_norm_2, eps), h)
            ffn = ffn + rms_norm(moe, self.post_ffw_norm_2, eps)
        out = h + rms_norm(ffn, self.post_ffw_norm, eps)
        return out * self.output_scale if self.output_scale is not None else out
