"""qwen35moe in PyTorch, for training the demo model: the same math as llama.cpp (src/models/qwen35moe.cpp,
delta-net-base.cpp) and as the numpy reference (diskformer/reference/qwen35moe.py), with parameters named and
shaped like the GGUF tensors they become (numpy order, i.e. GGUF `ne` reversed), so export is a plain copy.

Training-only choices that do not change the function the model computes:
* `ssm_a` is kept as A_log (exported as -exp(A_log)), so the decay stays negative whatever the optimiser does;
* the Gated DeltaNet recurrence is evaluated in chunks (the WY / triangular-solve form of the delta rule), which
  equals the token-by-token recurrence (`delta_rule_sequential`, used to check it) up to rounding;
* the router gets a load-balancing loss (Switch-Transformer style) so that the experts are all used.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    n_vocab: int = 3261
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    rope_dims: int = 16
    rope_base: float = 1e7
    experts: int = 8
    top_k: int = 2
    expert_ffn: int = 128
    shared_ffn: int = 128
    lin_k_heads: int = 2
    lin_v_heads: int = 4
    lin_head_dim: int = 32
    conv_kernel: int = 4
    full_attn_interval: int = 4
    ctx: int = 1024
    eps: float = 1e-6

    def is_recurrent(self, layer: int) -> bool:
        return (layer + 1) % self.full_attn_interval != 0

    def rope_sections(self) -> list:
        """rope.dimension_sections as the real converter writes them (text uses the first three sections)."""
        half = self.rope_dims // 2
        s0 = round(half * 11 / 32)
        return [s0, s0, half - 2 * s0, 0]

    def to_dict(self) -> dict:
        return asdict(self)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def l2_norm(x, eps):
    """ggml_l2_norm: x / max(||x||, eps)."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def rope_pair_mask(sections, n_rot):
    """Which rotary pairs turn with the position for text under llama.cpp's multi-section (IMROPE) rope: pair i is in
    section i % 3 when i < 3 * sections[i % 3]; other pairs belong to section e, position 0 for text."""
    half = n_rot // 2
    total = sum(sections)
    return torch.tensor([1.0 if (i % total) < 3 * sections[(i % total) % 3] else 0.0 for i in range(half)])


def rope_neox(x, positions, n_rot, base, pair_mask):
    """x: (B, T, heads, D). NeoX pairs (i, i + n_rot/2) over the first n_rot dims; the rest passes through."""
    half = n_rot // 2
    inv_freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / n_rot)
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :] * pair_mask.to(torch.float64)[None, :]
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:n_rot], x[..., n_rot:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)


def delta_rule_sequential(q, k, v, g, beta, state):
    """Token by token, as llama.cpp's autoregressive path. q, k: (B, T, H, Dk) (q already scaled); v: (B, T, H, Dv);
    g, beta: (B, T, H); state: (B, H, Dv, Dk). Per token: S *= exp(g); d = beta (v - S k); S += d k^T; o = S q."""
    outs = []
    for t in range(q.shape[1]):
        state = state * torch.exp(g[:, t])[..., None, None]
        sk = torch.einsum("bhji,bhi->bhj", state, k[:, t])
        d = (v[:, t] - sk) * beta[:, t][..., None]
        state = state + d[..., :, None] * k[:, t][..., None, :]
        outs.append(torch.einsum("bhji,bhi->bhj", state, q[:, t]))
    return torch.stack(outs, dim=1), state


def delta_rule_chunked(q, k, v, g, beta, state, chunk: int = 64):
    """The same recurrence, a chunk at a time. Within a chunk with cumulative log-decay G_t and start state S0, the
    written values u_t = d_t solve the unit lower-triangular system
        u_t + beta_t sum_{s<t} e^{G_t-G_s} (k_t.k_s) u_s = beta_t (v_t - e^{G_t} S0 k_t),
    then o_t = e^{G_t} S0 q_t + sum_{s<=t} e^{G_t-G_s} (q_t.k_s) u_s and S_end = e^{G_C} S0 + sum_s e^{G_C-G_s} u_s k_s^T.
    """
    B, T, H, Dk = k.shape
    outs = []
    for c0 in range(0, T, chunk):
        qc, kc, vc = (x[:, c0:c0 + chunk].transpose(1, 2) for x in (q, k, v))  # (B, H, C, D)
        gc, bc = g[:, c0:c0 + chunk].transpose(1, 2), beta[:, c0:c0 + chunk].transpose(1, 2)  # (B, H, C)
        C = qc.shape[2]
        G = torch.cumsum(gc, dim=-1)
        diff = G[..., :, None] - G[..., None, :]  # G_t - G_s
        lower = torch.tril(torch.ones(C, C, dtype=torch.bool, device=q.device))
        decay = torch.exp(diff.masked_fill(~lower, float("-inf")))  # e^{G_t-G_s} for s <= t, else 0
        strict = decay.masked_fill(torch.eye(C, dtype=torch.bool, device=q.device), 0.0)
        A = bc[..., None] * strict * (kc @ kc.transpose(-1, -2))
        eG = torch.exp(G)[..., None]
        rhs = bc[..., None] * (vc - eG * (kc @ state.transpose(-1, -2)))
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        u = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        o = eG * (qc @ state.transpose(-1, -2)) + (decay * (qc @ kc.transpose(-1, -2))) @ u
        tail = torch.exp(G[..., -1:] - G)[..., None]  # e^{G_C - G_s}
        state = torch.exp(G[..., -1])[..., None, None] * state + (u * tail).transpose(-1, -2) @ kc
        outs.append(o.transpose(1, 2))
    return torch.cat(outs, dim=1), state


class Qwen35MoE(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.shapes = self._shapes()
        self.p = nn.ParameterDict({self._key(n): nn.Parameter(torch.empty(s)) for n, s in self.shapes.items()})
        self.register_buffer("pair_mask", rope_pair_mask(cfg.rope_sections(), cfg.rope_dims), persistent=False)
        self.reset_parameters()

    # --- parameters -----------------------------------------------------------------------------------------------
    @staticmethod
    def _key(name: str) -> str:
        return name.replace(".", "__")

    def w(self, name: str) -> torch.Tensor:
        return self.p[self._key(name)]

    def _shapes(self) -> dict:
        c = self.cfg
        E, X, F_, S = c.hidden, c.experts, c.expert_ffn, c.shared_ffn
        s = {"token_embd.weight": (c.n_vocab, E)}
        for il in range(c.layers):
            p = f"blk.{il}"
            s[f"{p}.attn_norm.weight"] = (E,)
            s[f"{p}.post_attention_norm.weight"] = (E,)
            if c.is_recurrent(il):
                kd, vd = c.lin_k_heads * c.lin_head_dim, c.lin_v_heads * c.lin_head_dim
                s[f"{p}.attn_qkv.weight"] = (2 * kd + vd, E)
                s[f"{p}.attn_gate.weight"] = (vd, E)
                s[f"{p}.ssm_conv1d.weight"] = (2 * kd + vd, c.conv_kernel)
                s[f"{p}.ssm_dt.bias"] = (c.lin_v_heads,)
                s[f"{p}.ssm_a_log"] = (c.lin_v_heads,)  # exported as ssm_a = -exp(A_log)
                s[f"{p}.ssm_beta.weight"] = (c.lin_v_heads, E)
                s[f"{p}.ssm_alpha.weight"] = (c.lin_v_heads, E)
                s[f"{p}.ssm_norm.weight"] = (c.lin_head_dim,)
                s[f"{p}.ssm_out.weight"] = (E, vd)
            else:
                s[f"{p}.attn_q.weight"] = (c.heads * c.head_dim * 2, E)
                s[f"{p}.attn_k.weight"] = (c.kv_heads * c.head_dim, E)
                s[f"{p}.attn_v.weight"] = (c.kv_heads * c.head_dim, E)
                s[f"{p}.attn_output.weight"] = (E, c.heads * c.head_dim)
                s[f"{p}.attn_q_norm.weight"] = (c.head_dim,)
                s[f"{p}.attn_k_norm.weight"] = (c.head_dim,)
            s[f"{p}.ffn_gate_inp.weight"] = (X, E)
            s[f"{p}.ffn_gate_exps.weight"] = (X, F_, E)
            s[f"{p}.ffn_up_exps.weight"] = (X, F_, E)
            s[f"{p}.ffn_down_exps.weight"] = (X, E, F_)
            s[f"{p}.ffn_gate_inp_shexp.weight"] = (E,)
            s[f"{p}.ffn_gate_shexp.weight"] = (S, E)
            s[f"{p}.ffn_up_shexp.weight"] = (S, E)
            s[f"{p}.ffn_down_shexp.weight"] = (E, S)
        s["output_norm.weight"] = (E,)
        s["output.weight"] = (c.n_vocab, E)
        return s

    @torch.no_grad()
    def reset_parameters(self):
        c = self.cfg
        out_scale = 1.0 / math.sqrt(2 * c.layers)  # residual-branch outputs start small
        for name, shape in self.shapes.items():
            t = self.w(name)
            if name.endswith("norm.weight"):
                t.fill_(1.0)
            elif name.endswith("ssm_dt.bias"):
                dt = torch.exp(torch.empty(shape).uniform_(math.log(1e-3), math.log(1e-1)))
                t.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
            elif name.endswith("ssm_a_log"):
                t.copy_(torch.log(torch.empty(shape).uniform_(1.0, 16.0)))
            elif name.endswith("ssm_conv1d.weight"):
                t.uniform_(-1.0 / math.sqrt(c.conv_kernel), 1.0 / math.sqrt(c.conv_kernel))
            elif name.endswith("ffn_gate_inp_shexp.weight"):
                t.normal_(0.0, 1.0 / math.sqrt(shape[0]))
            elif name == "token_embd.weight":
                t.normal_(0.0, 1.0)
            else:
                fan_in = shape[-1]
                gain = out_scale if name.endswith(("attn_output.weight", "ssm_out.weight", "ffn_down_exps.weight",
                                                   "ffn_down_shexp.weight")) else 1.0
                t.normal_(0.0, gain / math.sqrt(fan_in))

    # --- layers ---------------------------------------------------------------------------------------------------
    def gated_attention(self, p, x, positions):
        c = self.cfg
        B, T, _ = x.shape
        D = c.head_dim
        qf = (x @ self.w(f"{p}.attn_q.weight").T).view(B, T, c.heads, 2 * D)
        q, gate = qf[..., :D], qf[..., D:]
        q = rms_norm(q, self.w(f"{p}.attn_q_norm.weight"), c.eps)
        k = rms_norm((x @ self.w(f"{p}.attn_k.weight").T).view(B, T, c.kv_heads, D), self.w(f"{p}.attn_k_norm.weight"),
                     c.eps)
        v = (x @ self.w(f"{p}.attn_v.weight").T).view(B, T, c.kv_heads, D)
        q = rope_neox(q, positions, c.rope_dims, c.rope_base, self.pair_mask)
        k = rope_neox(k, positions, c.rope_dims, c.rope_base, self.pair_mask)
        group = c.heads // c.kv_heads  # query head h reads kv head h // group
        k = k.repeat_interleave(group, dim=2)
        v = v.repeat_interleave(group, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                           scale=1.0 / math.sqrt(D)).transpose(1, 2)
        o = o * torch.sigmoid(gate)
        return o.reshape(B, T, c.heads * D) @ self.w(f"{p}.attn_output.weight").T

    def gated_delta_net(self, p, x, chunked=True):
        c = self.cfg
        B, T, _ = x.shape
        nk, nv, d = c.lin_k_heads, c.lin_v_heads, c.lin_head_dim
        kd = nk * d
        mixed = x @ self.w(f"{p}.attn_qkv.weight").T  # (B, T, C)
        kernel = self.w(f"{p}.ssm_conv1d.weight")  # (C, K): out[t] = sum_j in[t - K + 1 + j] * kernel[:, j]
        padded = F.pad(mixed.transpose(1, 2), (c.conv_kernel - 1, 0))
        mixed = F.silu(F.conv1d(padded, kernel[:, None, :], groups=kernel.shape[0]).transpose(1, 2))
        q = l2_norm(mixed[..., :kd].reshape(B, T, nk, d), c.eps)
        k = l2_norm(mixed[..., kd:2 * kd].reshape(B, T, nk, d), c.eps)
        v = mixed[..., 2 * kd:].reshape(B, T, nv, d)
        key_head = torch.arange(nv, device=x.device) % nk  # tiled: value head h reads key head h % n_k
        q = q[:, :, key_head] / math.sqrt(d)
        k = k[:, :, key_head]
        beta = torch.sigmoid(x @ self.w(f"{p}.ssm_beta.weight").T)
        a = -torch.exp(self.w(f"{p}.ssm_a_log"))
        g = F.softplus(x @ self.w(f"{p}.ssm_alpha.weight").T + self.w(f"{p}.ssm_dt.bias")) * a
        state = x.new_zeros(B, nv, d, d)
        rule = delta_rule_chunked if chunked else delta_rule_sequential
        o, _ = rule(q, k, v, g, beta, state)
        z = (x @ self.w(f"{p}.attn_gate.weight").T).view(B, T, nv, d)
        o = rms_norm(o, self.w(f"{p}.ssm_norm.weight"), c.eps) * F.silu(z)
        return o.reshape(B, T, nv * d) @ self.w(f"{p}.ssm_out.weight").T

    def moe(self, p, x):
        """Routed experts (softmax -> top-k -> renormalise) plus the shared expert scaled by sigmoid(w . x).
        Returns (output, load-balancing loss)."""
        c = self.cfg
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = torch.softmax(x @ self.w(f"{p}.ffn_gate_inp.weight").T, dim=-1)
        top_w, top_i = torch.topk(probs, c.top_k, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        wg, wu, wd = (self.w(f"{p}.ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
        for e in range(c.experts):
            rows, slot = torch.nonzero(top_i == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            xe = x[rows]
            h = F.silu(xe @ wg[e].T) * (xe @ wu[e].T)
            out.index_add_(0, rows, (h @ wd[e].T) * top_w[rows, slot][:, None])
        shared = (F.silu(x @ self.w(f"{p}.ffn_gate_shexp.weight").T) * (x @ self.w(f"{p}.ffn_up_shexp.weight").T)) \
            @ self.w(f"{p}.ffn_down_shexp.weight").T
        out = out + shared * torch.sigmoid(x @ self.w(f"{p}.ffn_gate_inp_shexp.weight"))[:, None]
        load = F.one_hot(top_i, c.experts).float().sum(1).mean(0) / c.top_k  # fraction of picks per expert
        balance = c.experts * (load * probs.mean(0)).sum()
        return out.reshape(shape), balance

    def forward(self, ids, chunked=True):
        """ids: (B, T) from position 0. Returns (logits (B, T, V), mean load-balancing loss)."""
        c = self.cfg
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.w("token_embd.weight")[ids]
        balance = 0.0
        for il in range(c.layers):
            p = f"blk.{il}"
            h = rms_norm(x, self.w(f"{p}.attn_norm.weight"), c.eps)
            h = self.gated_delta_net(p, h, chunked) if c.is_recurrent(il) else self.gated_attention(p, h, positions)
            x = x + h
            f, bal = self.moe(p, rms_norm(x, self.w(f"{p}.post_attention_norm.weight"), c.eps))
            x = x + f
            balance = balance + bal
        x = rms_norm(x, self.w("output_norm.weight"), c.eps)
        return x @ self.w("output.weight").T, balance / c.layers

    def gguf_tensors(self) -> dict:
        """GGUF name -> float32 numpy array in numpy order (ne reversed), with the stored conventions applied."""
        out = {}
        for name in self.shapes:
            t = self.w(name).detach().to(torch.float32).cpu().numpy()
            if name.endswith("ssm_a_log"):
                out[name[: -len("_log")]] = -torch.exp(self.w(name).detach()).to(torch.float32).numpy()
            else:
                out[name] = t
        return out
