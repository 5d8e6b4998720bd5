"""Hyper-parameters of a gemma4 GGUF (Gemma 4 26B-A4B), read from its `gemma4.*` keys (field names follow the keys).

Layers are of two kinds, after llama.cpp's gemma4 hparams: sliding-window layers (`attention.sliding_window_pattern`
true) use `key_length_swa` heads, `rope.freq_base_swa` and `rope.dimension_count_swa`; global layers use
`key_length`, `rope.freq_base` and `rope.dimension_count` with `rope_freqs` (proportional rope). The KV head count
is per layer (`attention.head_count_kv` is an array). Per-layer input embeddings and shared KV layers (the small
Gemma 4 models) are not part of the 26B-A4B model and are refused.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Gemma4Config:
    arch: str
    n_vocab: int
    block_count: int
    embedding_length: int
    feed_forward_length: int
    head_count: int
    head_count_kv: tuple  # per layer
    key_length: int  # global layers
    value_length: int
    key_length_swa: int  # sliding-window layers
    value_length_swa: int
    sliding_window: int
    sliding_window_pattern: tuple  # per layer, True = sliding window
    rope_freq_base: float
    rope_freq_base_swa: float
    rope_dimension_count: int
    rope_dimension_count_swa: int
    rms_eps: float
    expert_count: int
    expert_used_count: int
    expert_feed_forward_length: int
    final_logit_softcapping: float
    embedding_scale: float  # sqrt(hidden) as a float32, as llama.cpp scales the input embedding

    def is_sliding(self, layer: int) -> bool:
        return bool(self.sliding_window_pattern[layer])

    def is_recurrent(self, layer: int) -> bool:
        return False

    def head_dim(self, layer: int) -> int:
        return self.key_length_swa if self.is_sliding(layer) else self.key_length

    def rope_base(self, layer: int) -> float:
        return self.rope_freq_base_swa if self.is_sliding(layer) else self.rope_freq_base

    def n_rot(self, layer: int) -> int:
        return self.rope_dimension_count_swa if self.is_sliding(layer) else self.rope_dimension_count


def _per_layer(value, n_layers: int, name: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) < n_layers:
            raise ValueError(f"gemma4.{name} has {len(value)} entries, need one per layer ({n_layers})")
        return tuple(value[:n_layers])
    return (value,) * n_layers


def read_gemma4_config(w) -> Gemma4Config:
    """`w` is a weights.GGUFWeights of a gemma4 file."""
    k = w.arch_key
    n_layers = int(k("block_count"))
    for key in ("attention.shared_kv_layers", "embedding_length_per_layer_input"):
        if int(k(key, 0)):
            raise ValueError(f"{w.path.name}: gemma4.{key} = {k(key)} (the small Gemma 4 models' per-layer inputs "
                             "or shared KV layers) is not supported; only the 26B-A4B layout is")
    head_count = _per_layer(k("attention.head_count"), n_layers, "attention.head_count")
    if len(set(head_count)) != 1:
        raise ValueError(f"{w.path.name}: gemma4.attention.head_count varies by layer ({head_count}); not supported")
    hidden = int(k("embedding_length"))
    key_length = int(k("attention.key_length"))
    key_length_swa = int(k("attention.key_length_swa", key_length))
    pattern = _per_layer(k("attention.sliding_window_pattern"), n_layers, "attention.sliding_window_pattern")
    return Gemma4Config(
        arch=w.arch,
        n_vocab=int(w.raw("token_embd.weight").shape[0]),
        block_count=n_layers,
        embedding_length=hidden,
        feed_forward_length=int(k("feed_forward_length")),
        head_count=int(head_count[0]),
        head_count_kv=tuple(int(x) for x in _per_layer(k("attention.head_count_kv"), n_layers,
                                                        "attention.head_count_kv")),
        key_length=key_length,
        value_length=int(k("attention.value_length", key_length)),
        key_length_swa=key_length_swa,
        value_length_swa=int(k("attention.value_length_swa", key_length_swa)),
        sliding_window=int(k("attention.sliding_window")),
        sliding_window_pattern=tuple(bool(x) for x in pattern),
        rope_freq_base=float(k("rope.freq_base")),
        rope_freq_base_swa=float(k("rope.freq_base_swa", k("rope.freq_base"))),
        rope_dimension_count=int(k("rope.dimension_count", key_length)),
        rope_dimension_count_swa=int(k("rope.dimension_count_swa", key_length_swa)),
        rms_eps=float(k("attention.layer_norm_rms_epsilon")),
        expert_count=int(k("expert_count")),
        expert_used_count=int(k("expert_used_count")),
        expert_feed_forward_length=int(k("expert_feed_forward_length")),
        final_logit_softcapping=float(k("final_logit_softcapping", 0.0)),
        embedding_scale=float(np.sqrt(np.float32(hidden))),
    )
