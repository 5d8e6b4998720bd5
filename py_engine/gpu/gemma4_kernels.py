"""Launchers for the kernels gemma4 adds beside the shared ones (llama.cpp src/models/gemma4-iswa.cpp): the
attention inputs with V normalised and proportional RoPE, the GEGLU, the post-norm residual adds, the routed sum
with per-expert scales and the logits' soft-capping. Each records into a DispatchList through a `Kernels` instance
(its pipelines, step uniform and parameter buffers), like kernels.py's launchers.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class HeadPrepShape:
    """One gemma4 attention layer's decode inputs: heads and head dim, RMSNorm eps, NeoX RoPE over n_rot dims with
    rope_base; in the q/k/v product q head h at h * head_dim, the K heads from k_base, the V heads from v_base
    (= k_base on a global layer: V is the raw K projection); cache_rows: the rows of the layer's K/V caches (a ring
    of the window on a sliding-window layer)."""
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    eps: float
    rope_base: float
    k_base: int
    v_base: int
    cache_rows: int


@dataclass(frozen=True)
class ChunkRows:
    """A prefill chunk's rows for the row-wise launchers: its uniform (shaders/common/chunk.wgsl), the recorded rows
    T, and the values per row of the input and of the output."""
    uniform: object
    T: int
    x_stride: int
    y_stride: int


def head_norms_rope_append(kern, dl, x, q, norms, caches, shape: HeadPrepShape, freqs=None,
                           label="head_norms_rope_append", chunk: "ChunkRows | None" = None):
    """q = rope(rmsnorm(q heads) * q_norm); the caches' row step.pos % cache_rows = rope(rmsnorm(k heads) * k_norm)
    and rmsnorm(v heads) (shaders/rope/head_norms_rope_append.wgsl); norms = (q_norm, k_norm), caches = (k_cache,
    v_cache). freqs: rope_freqs (each pair's angle divided by its value), or None. chunk: the same for each row of
    a prefill chunk (positions pos0 + t)."""
    s = shape
    (q_norm, k_norm), (k_cache, v_cache) = norms, caches
    if s.head_dim > 512 or s.head_dim % 2 or s.n_rot > s.head_dim or s.n_rot % 2 or s.n_head % s.n_head_kv:
        raise ValueError(f"{label}: head dim {s.head_dim}, {s.n_rot} rotary dims, {s.n_head}/{s.n_head_kv} heads "
                         "(head dim even and at most 512, q heads a multiple of the KV heads)")
    params = {"hd": s.head_dim, "n_rot": s.n_rot, "eps": s.eps, "base": s.rope_base, "n_head": s.n_head,
              "n_kv": s.n_head_kv, "k_base": s.k_base, "v_base": s.v_base, "rows": s.cache_rows,
              "use_freqs": int(freqs is not None), "chunked": int(chunk is not None),
              "x_stride": chunk.x_stride if chunk else 0, "q_stride": chunk.y_stride if chunk else 0}
    binds = {1: chunk.uniform if chunk else kern.step, 2: q_norm, 3: k_norm, 4: x, 5: q, 6: k_cache, 7: v_cache,
             8: freqs if freqs is not None else kern.placeholder()}
    kern.record(dl, "head_norms_rope_append.wgsl", {"KV": kern.kv_format}, binds,
                (s.n_head + s.n_head_kv, chunk.T if chunk else 1), label, params)


def gelu_mul(kern, dl, x, y, n: int, groups: int = 1, stride: int = 0, label="gelu_mul"):
    """y[g * n + i] = gelu(x[g * stride + i]) * x[g * stride + n + i] for g < groups: each group's gate values then
    its up values (a routed expert's fused gate_up rows; the dense MLP's two products side by side)."""
    kern.record(dl, "gelu_mul.wgsl", {}, {1: x, 2: y}, ((n + 255) // 256, groups), label,
                {"n": n, "stride": stride or 2 * n, "up": n, "x_base": 0, "y_base": 0})


def rmsnorm_add(kern, dl, x, w, y, n: int, eps: float, scale=None, label="rmsnorm_add", rows: int = 1):
    """y = (y + rmsnorm(x) * w) * scale[0] (scale None: no factor), per row of n values."""
    binds = {1: x, 2: w, 3: y, 4: scale if scale is not None else kern.placeholder()}
    kern.record(dl, "rmsnorm_add.wgsl", {}, binds, (rows, 1), label,
                {"n": n, "eps": eps, "scaled": int(scale is not None)})


def moe_combine_scaled(kern, dl, route, scale, down, y, n: int, k: int, label="moe_combine_scaled", rows: int = 1):
    """y = Σ_j route_w[j] * scale[route_ids[j]] * down[j * n ..] over the k routed experts, per row (of k picks);
    route = (route_ids, route_w)."""
    route_ids, route_w = route
    kern.record(dl, "moe_combine_scaled.wgsl", {}, {1: route_w, 2: route_ids, 3: scale, 4: down, 5: y},
                ((n + 255) // 256, rows), label, {"n": n, "k": k})


def softcap(kern, dl, y, n: int, cap: float, argmax, label="softcap"):
    """y = cap * tanh(y / cap) over n values, and the same for the logit of the output head's argmax (argmax[1])."""
    kern.record(dl, "softcap.wgsl", {}, {1: y, 2: argmax}, (n + 255) // 256, label, {"n": n, "cap": cap})
