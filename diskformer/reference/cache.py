"""Per-layer decoding state: a KV cache for attention layers, conv window + delta-rule state for Gated DeltaNet."""
from __future__ import annotations

import numpy as np


class KVCache:
    """Keys (after RoPE) and values of every position so far, (T, n_kv_heads, head_dim) each."""

    def __init__(self, n_kv_heads, key_dim, value_dim, dtype, f16=False):
        self.k = np.zeros((0, n_kv_heads, key_dim), dtype=dtype)
        self.v = np.zeros((0, n_kv_heads, value_dim), dtype=dtype)
        self.f16 = f16

    def append(self, k, v):
        """Add the new positions and return all keys and values."""
        if self.f16:  # an f16 cache stores rounded values; attention reads them back as floats
            k = k.astype(np.float16).astype(k.dtype)
            v = v.astype(np.float16).astype(v.dtype)
        self.k = np.concatenate([self.k, k], axis=0)
        self.v = np.concatenate([self.v, v], axis=0)
        return self.k, self.v

    @property
    def length(self):
        return self.k.shape[0]


class DeltaNetState:
    """Gated DeltaNet state: the last (kernel - 1) inputs of the causal conv, and per value head a
    (value_dim x key_dim) matrix S (llama.cpp's s[ne1 = value index][ne0 = key index])."""

    def __init__(self, conv_kernel, conv_channels, n_v_heads, head_k_dim, head_v_dim, dtype):
        self.conv = np.zeros((conv_kernel - 1, conv_channels), dtype=dtype)
        self.ssm = np.zeros((n_v_heads, head_v_dim, head_k_dim), dtype=dtype)
