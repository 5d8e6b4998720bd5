"""qwen3moe hyper-parameters from the GGUF's `qwen3moe.*` keys (llama.cpp llama_model_qwen3moe::load_arch_hparams).
Field names are llama.cpp's llama_hparams names; the numpy reference reads the same class."""
from dataclasses import dataclass
from typing import ClassVar

from ..hparams import AttentionOnly, arch_value, check_architecture, moe_attention_fields


@dataclass(frozen=True)
class Qwen3MoeConfig(AttentionOnly):
    arch: ClassVar[str] = "qwen3moe"
    n_vocab: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int  # key and value head dim (llama.cpp asserts they are equal for this architecture)
    n_rot: int
    rope_base: float
    rms_eps: float
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ctx_train: int

    @classmethod
    def from_header(cls, header):
        check_architecture(header, cls.arch)
        return cls(**moe_attention_fields(header, arch_value(header, "block_count")))
