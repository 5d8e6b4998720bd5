"""Hyper-parameters of a qwen3moe / qwen35moe GGUF, read from its `{arch}.*` keys (field names follow the keys);
gemma4 files get their own config (gemma4_config.py), which read_config returns for them.

The layer pattern of qwen35moe follows llama.cpp's `llama_model_qwen35moe::load_arch_hparams`: the boolean array
`attention.recurrent_layers` when present, else layer i is recurrent (Gated DeltaNet) when
(i + 1) % full_attention_interval != 0 (interval 4 when that key is missing too).
"""
from __future__ import annotations

from dataclasses import dataclass, field

SUPPORTED_ARCHS = ("qwen3moe", "qwen35moe", "gemma4")


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_vocab: int
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: int
    key_length: int
    value_length: int
    rope_freq_base: float
    rope_dimension_count: int
    rms_eps: float
    expert_count: int
    expert_used_count: int
    expert_feed_forward_length: int
    expert_shared_feed_forward_length: int = 0
    rope_dimension_sections: tuple = ()
    # Gated DeltaNet (qwen35moe only)
    ssm_conv_kernel: int = 0
    ssm_state_size: int = 0  # head dim of keys and values
    ssm_group_count: int = 0  # key heads
    ssm_time_step_rank: int = 0  # value heads
    ssm_inner_size: int = 0  # value heads * value head dim
    recurrent_layers: tuple = field(default_factory=tuple)

    def is_recurrent(self, layer: int) -> bool:
        return bool(self.recurrent_layers) and bool(self.recurrent_layers[layer])

    @property
    def ssm_head_v_dim(self) -> int:
        return self.ssm_inner_size // self.ssm_time_step_rank


def _layer_pattern(w, n_layers: int) -> tuple:
    if w.has_key(f"{w.arch}.attention.recurrent_layers"):
        flags = [bool(x) for x in w.arch_key("attention.recurrent_layers")]
        if len(flags) < n_layers:
            raise ValueError(f"{w.path.name}: attention.recurrent_layers has {len(flags)} entries, need {n_layers}")
        return tuple(flags[:n_layers])
    interval = int(w.arch_key("full_attention_interval", 4))
    return tuple((i + 1) % interval != 0 for i in range(n_layers))


def read_config(w) -> ModelConfig:
    """`w` is a weights.GGUFWeights."""
    if w.arch not in SUPPORTED_ARCHS:
        raise ValueError(f"{w.path.name}: architecture {w.arch!r} is not supported (only {', '.join(SUPPORTED_ARCHS)})")
    if w.arch == "gemma4":  # per-layer head sizes and rope: its own config (gemma4_config.py)
        from .gemma4_config import read_gemma4_config
        return read_gemma4_config(w)
    k = w.arch_key
    n_layers = int(k("block_count"))
    if w.has_key(f"{w.arch}.nextn_predict_layers"):
        n_layers -= int(k("nextn_predict_layers"))  # MTP blocks are loaded but not run in the main pass
    head_dim = int(k("attention.key_length"))
    common = dict(
        arch=w.arch,
        n_vocab=int(w.raw("token_embd.weight").shape[0]),  # rows of the embedding = vocabulary incl. padding
        block_count=n_layers,
        embedding_length=int(k("embedding_length")),
        head_count=int(k("attention.head_count")),
        head_count_kv=int(k("attention.head_count_kv")),
        key_length=head_dim,
        value_length=int(k("attention.value_length", head_dim)),
        rope_freq_base=float(k("rope.freq_base")),
        rope_dimension_count=int(k("rope.dimension_count", head_dim)),
        rms_eps=float(k("attention.layer_norm_rms_epsilon")),
        expert_count=int(k("expert_count")),
        expert_used_count=int(k("expert_used_count")),
        expert_feed_forward_length=int(k("expert_feed_forward_length")),
    )
    if w.arch == "qwen3moe":
        return ModelConfig(**common)
    return ModelConfig(
        **common,
        expert_shared_feed_forward_length=int(k("expert_shared_feed_forward_length", 0)),
        rope_dimension_sections=tuple(int(x) for x in k("rope.dimension_sections", [])),
        ssm_conv_kernel=int(k("ssm.conv_kernel")),
        ssm_state_size=int(k("ssm.state_size")),
        ssm_group_count=int(k("ssm.group_count")),
        ssm_time_step_rank=int(k("ssm.time_step_rank")),
        ssm_inner_size=int(k("ssm.inner_size")),
        recurrent_layers=_layer_pattern(w, n_layers),
    )
