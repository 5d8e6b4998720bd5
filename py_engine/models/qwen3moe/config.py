"""qwen3moe hyper-parameters from the GGUF's `qwen3moe.*` keys (llama.cpp llama_model_qwen3moe::load_arch_hparams).
Field names are llama.cpp's llama_hparams names; the numpy reference reads the same class."""
from dataclasses import dataclass
from typing import ClassVar

from ..hparams import arch_value, check_architecture


@dataclass(frozen=True)
class Qwen3MoeConfig:
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

    @property
    def recurrent(self) -> tuple:
        return (False,) * self.n_layer  # every layer attends

    def is_recurrent(self, layer: int) -> bool:
        return False

    @property
    def n_kv_layers(self) -> int:
        return self.n_layer

    @classmethod
    def from_header(cls, header):
        check_architecture(header, cls.arch)
        v = lambda key, default=None, kind=int: arch_value(header, key, default, kind)  # noqa: E731
        head_dim = v("attention.key_length")
        if v("attention.value_length", head_dim) != head_dim:
            raise ValueError("qwen3moe with value_length != key_length is not supported")
        return cls(
            n_vocab=header.tensor("token_embd.weight").shape[0],
            n_layer=v("block_count"),
            n_embd=v("embedding_length"),
            n_head=v("attention.head_count"),
            n_head_kv=v("attention.head_count_kv"),
            head_dim=head_dim,
            n_rot=v("rope.dimension_count", head_dim),
            rope_base=v("rope.freq_base", kind=float),
            rms_eps=v("attention.layer_norm_rms_epsilon", kind=float),
            n_expert=v("expert_count"),
            n_expert_used=v("expert_used_count"),
            n_ff_exp=v("expert_feed_forward_length"),
            n_ctx_train=v("context_length", 0),
        )
