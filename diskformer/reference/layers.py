"""Building blocks shared by both architectures, each following the llama.cpp / ggml op it names.

Shapes: activations are (n_tokens, features); per-head tensors are (n_tokens, heads, head_dim).
"""
from __future__ import annotations

import math

import numpy as np

from .options import Options
from .weights import QK8_0, GGUFWeights


# --- elementwise ------------------------------------------------------------------------------------------------
def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    # ggml_softplus: log(1 + exp(x)), which logaddexp computes without overflow
    return np.logaddexp(0.0, x)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # a Python float, so float32 inputs stay float32


def gelu_tanh(x):
    """ggml_gelu_f32, the tanh form: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))."""
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)))


def gelu_fp16_table(x):
    """ggml-cpu's GELU (GGML_GELU_FP16): 0 at or below -10, x at or above 10, otherwise the input rounded to fp16
    looks up fp16(gelu_tanh in f32) in a 65536-entry table."""
    h = x.astype(np.float16).astype(np.float32)
    table = gelu_tanh(h).astype(np.float32).astype(np.float16).astype(x.dtype)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, table)).astype(x.dtype)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# --- norms ------------------------------------------------------------------------------------------------------
def rms_norm(x, weight, eps):
    """ggml_rms_norm then multiply: x / sqrt(mean(x^2) + eps) * weight (eps inside the root)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def l2_norm(x, eps):
    """ggml_l2_norm: x / max(||x||, eps) (eps is a floor on the norm, not a term under the root)."""
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


# --- rotary position embedding ----------------------------------------------------------------------------------
def rope_neox(x, positions, n_rot, base, pair_uses_position=None):
    """NeoX RoPE on the first n_rot dims of each head: pairs (i, i + n_rot/2), angle pos * base^(-2i/n_rot).

    x: (n, heads, head_dim); positions: (n,). Dims from n_rot on pass through (qwen35moe's partial rope).
    pair_uses_position: optional bool (n_rot/2,) mask; a pair where it is False gets position 0, i.e. no rotation
    (the 4th "e" section of llama.cpp's multi-section rope, which text tokens fill with 0).
    """
    half = n_rot // 2
    inv_freq = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    if pair_uses_position is not None:
        angles = angles * pair_uses_position[None, :]
    cos = np.cos(angles).astype(x.dtype)[:, None, :]
    sin = np.sin(angles).astype(x.dtype)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:n_rot]
    out = x.copy()
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:n_rot] = x1 * sin + x2 * cos
    return out


# --- attention --------------------------------------------------------------------------------------------------
def causal_attention(q, k_all, v_all, first_pos, scale, window=None):
    """Softmax attention of new queries over all cached keys, causal, GQA.

    q: (n, H, D) for positions first_pos .. first_pos+n-1; k_all/v_all: (T, KV, D) for positions 0 .. T-1.
    Query head h reads KV head h // (H / KV) (ggml_mul_mat broadcasting: consecutive query heads share one KV head).
    window: a sliding window; a key is masked when pos_q - pos_k >= window (llama.cpp LLAMA_SWA_TYPE_STANDARD).
    Returns (n, H, Dv).
    """
    n, n_head, d = q.shape
    t, n_kv, dv = v_all.shape
    group = n_head // n_kv
    qg = q.reshape(n, n_kv, group, d)
    scores = np.einsum("nkgd,tkd->kgnt", qg, k_all) * scale
    q_pos = first_pos + np.arange(n)
    future = np.arange(t)[None, :] > q_pos[:, None]  # (n, t)
    if window is not None:
        future |= q_pos[:, None] - np.arange(t)[None, :] >= window
    scores = np.where(future, -np.inf, scores)
    probs = softmax(scores, axis=-1)
    out = np.einsum("kgnt,tkd->nkgd", probs, v_all)
    return out.reshape(n, n_head, dv)


# --- Q8_0 activation quantisation (emulation of llama.cpp's CPU backend) -----------------------------------------
def fake_quantize_q8_0(x):
    """Round x to what ggml's quantize_row_q8_0 stores, then back to x.dtype.

    Per 32 values: amax = max|x|, d = fp16(amax / 127), q = round-half-even(x * (127 / amax)) in f32 (the AVX path
    uses _mm256_round_ps nearest-even with id = 127/amax, not 1/d). The Q8_0 x Q8_0 dot product then equals
    sum_blocks d_w * d_x * sum(q_w * q_x), i.e. the ordinary product of the dequantised weight with d_x * q_x.
    """
    codes, d = quantize_q8_0(x)
    return (codes.astype(x.dtype) * d[..., None].astype(x.dtype)).reshape(x.shape)


def quantize_q8_0(x):
    """What ggml's quantize_row_q8_0 stores for x (fake_quantize_q8_0's rounding): the int8 codes, shape
    (..., blocks, 32), and the block scales d as f32 (f16 values), shape (..., blocks)."""
    shape = x.shape
    if shape[-1] % QK8_0:
        raise ValueError(f"Q8_0 activation quantisation needs a multiple of {QK8_0} inputs, got {shape[-1]}")
    blocks = x.astype(np.float32).reshape(*shape[:-1], shape[-1] // QK8_0, QK8_0)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
    codes = np.rint(blocks * inv).astype(np.int8)
    d = (amax[..., 0] / np.float32(127.0)).astype(np.float16).astype(np.float32)
    return codes, d


QK_K = 256  # values per Q8_K block


def fake_quantize_q8_k(x):
    """Round x to what ggml's quantize_row_q8_K stores (the activations of a Q6_K product), then back to x.dtype.

    Per 256 values: m = the value of largest magnitude (the first one), iscale = -127/m, q = min(127,
    round-half-even(iscale * x)), d = 1/iscale, all in f32 (ggml quantize_row_q8_K_ref); the value is d * q.
    """
    shape = x.shape
    if shape[-1] % QK_K:
        raise ValueError(f"Q8_K activation quantisation needs a multiple of {QK_K} inputs, got {shape[-1]}")
    blocks = x.astype(np.float32).reshape(*shape[:-1], shape[-1] // QK_K, QK_K)
    first_max = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], axis=-1)
    with np.errstate(divide="ignore"):
        iscale = np.where(first_max != 0, np.float32(-127.0) / first_max, np.float32(0.0)).astype(np.float32)
        d = np.where(iscale != 0, np.float32(1.0) / iscale, np.float32(0.0)).astype(np.float32)
    codes = np.minimum(np.rint(blocks * iscale), np.float32(127.0))
    return (codes * d).astype(x.dtype).reshape(shape)


# --- weights as operators ---------------------------------------------------------------------------------------
class Linear:
    """y = x @ W.T for a GGUF matrix with ne (in, out), i.e. numpy W of shape (out, in).
    quantize_input: None, or the activation rounding of llama.cpp's CPU backend for this weight type."""

    def __init__(self, weight, quantize_input=None):
        self.weight = weight
        self.quantize_input = quantize_input

    def __call__(self, x):
        if self.quantize_input:
            x = self.quantize_input(x)
        return x @ self.weight.T


class Experts:
    """Stacked expert matrices, GGUF ne (in, out, n_expert) -> numpy (n_expert, out, in)."""

    def __init__(self, weight, quantize_input=None):
        self.weight = weight
        self.quantize_input = quantize_input

    def apply(self, expert, x):
        if self.quantize_input:
            x = self.quantize_input(x)
        return x @ self.weight[expert].T


# the activation format ggml-cpu quantises a product's input to, by weight type (the type's vec_dot_type)
ACTIVATION_ROUNDING = {"Q8_0": fake_quantize_q8_0, "Q4_0": fake_quantize_q8_0, "Q6_K": fake_quantize_q8_k}


class Params:
    """Loads one model's tensors by GGUF name as the operators above, in the precision the options ask for."""

    def __init__(self, weights: GGUFWeights, options: Options):
        self.weights = weights
        self.options = options

    def _quantize_input(self, name):
        if not self.options.q8_activations:
            return None
        return ACTIVATION_ROUNDING.get(self.weights.type_name(name))

    def has(self, name):
        return self.weights.has(name)

    def vector(self, name):
        return self.weights.tensor(name, self.options.dtype)

    def matrix(self, name):
        return self.weights.tensor(name, self.options.dtype)

    def linear(self, name):
        return Linear(self.matrix(name), self._quantize_input(name))

    def experts(self, name):
        return Experts(self.matrix(name), self._quantize_input(name))


# --- feed-forward -----------------------------------------------------------------------------------------------
def swiglu(x, gate: Linear, up: Linear, down: Linear):
    """down(silu(gate x) * up x): llama.cpp build_ffn with LLM_FFN_SILU, LLM_FFN_PAR."""
    return down(silu(gate(x)) * up(x))


class SparseMoE:
    """Routed experts, llama.cpp build_moe_ffn with softmax gating and norm_w = true.

    Softmax over all router logits -> top-k (ties to the lower index) -> renormalise the k weights ->
    sum over the chosen experts of weight * down(silu(gate x) * up x).
    """

    def __init__(self, params: Params, prefix: str, n_used: int):
        self.router = params.matrix(f"{prefix}.ffn_gate_inp.weight")  # F32 in every file: never quantised
        self.gate = params.experts(f"{prefix}.ffn_gate_exps.weight")
        self.up = params.experts(f"{prefix}.ffn_up_exps.weight")
        self.down = params.experts(f"{prefix}.ffn_down_exps.weight")
        self.n_used = n_used
        self.renormalize = params.options.renormalize_experts

    def route(self, x):
        """(expert ids (n, k), weights (n, k)) per token."""
        probs = softmax(x @ self.router.T, axis=-1)
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, : self.n_used]  # stable: ties to the lower id
        w = np.take_along_axis(probs, chosen, axis=-1)
        if self.renormalize:
            w = w / w.sum(axis=-1, keepdims=True)
        return chosen, w

    def __call__(self, x):
        chosen, w = self.route(x)
        out = np.zeros_like(x)
        for expert in np.unique(chosen):
            rows, slots = np.nonzero(chosen == expert)  # each token picks an expert at most once
            xe = x[rows]
            h = silu(self.gate.apply(expert, xe)) * self.up.apply(expert, xe)
            out[rows] += w[rows, slots][:, None] * self.down.apply(expert, h)
        return out


# --- Gated DeltaNet pieces --------------------------------------------------------------------------------------
def causal_conv1d(x, window, kernel):
    """ggml_ssm_conv over [previous inputs; x]: out[t, c] = sum_j inp[t + j, c] * kernel[c, j] (no bias).

    x: (n, C); window: (K-1, C) previous inputs; kernel: (C, K) (GGUF ne (K, C)). Returns (out (n, C), new window).
    """
    k = kernel.shape[1]
    inp = np.concatenate([window, x], axis=0)  # (K-1+n, C)
    n = x.shape[0]
    out = np.zeros_like(x)
    for j in range(k):
        out += inp[j:j + n] * kernel[:, j]
    return out, inp[n:]


def gated_delta_rule(q, k, v, g, beta, state):
    """The delta rule, one token at a time (llama.cpp build_delta_net_autoregressive; its chunked prefill is the
    same recurrence). q, k: (n, H, Dk) with q already scaled by 1/sqrt(Dk); v: (n, H, Dv); g, beta: (n, H);
    state: (H, Dv, Dk), updated in place. Per token: S *= exp(g); d = beta * (v - S k); S += d k^T; o = S q.
    """
    out = np.empty_like(v)
    decay = np.exp(g)
    for t in range(q.shape[0]):
        state *= decay[t][:, None, None]
        sk = np.einsum("hji,hi->hj", state, k[t])
        d = (v[t] - sk) * beta[t][:, None]
        state += d[:, :, None] * k[t][:, None, :]
        out[t] = np.einsum("hji,hi->hj", state, q[t])
    return out
