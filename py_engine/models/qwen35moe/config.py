"""qwen35moe hyper-parameters from the GGUF's `qwen35moe.*` keys (llama.cpp llama_model_qwen35moe::load_arch_hparams).
Field names are llama.cpp's llama_hparams names; the numpy reference reads the same class.

Recurrent layers: `attention.recurrent_layers` when present, else (i + 1) % full_attention_interval != 0 (interval
4 when that key is missing too). MTP blocks (`nextn_predict_layers`) are not run in the main pass.
"""
from dataclasses import dataclass
from typing import ClassVar

from ..hparams import arch_value, check_architecture, moe_attention_fields


def layer_pattern(header, n_layer: int) -> tuple:
    """True for each recurrent (Gated DeltaNet) layer."""
    key = f"{header.architecture}.attention.recurrent_layers"
    if key in header.metadata:
        flags = [bool(v) for v in header.metadata[key]]
        if len(flags) < n_layer:
            raise ValueError(f"{key} has {len(flags)} entries for {n_layer} layers")
        return tuple(flags[:n_layer])
    interval = arch_value(header, "full_attention_interval", 4)
    return tuple((i + 1) % interval != 0 for i in range(n_layer))


@dataclass(frozen=True)
class Qwen35MoeConfig:
    arch: ClassVar[str] = "qwen35moe"
    n_vocab: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int  # key and value head dim of the full attention (llama.cpp asserts they are equal)
    n_rot: int
    rope_base: float
    rms_eps: float
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ff_shexp: int
    n_ctx_train: int
    ssm_conv_kernel: int
    ssm_d_state: int  # key (and value) head dim of the linear attention
    ssm_n_group: int  # key heads
    ssm_dt_rank: int  # value heads
    ssm_d_inner: int  # value heads * value head dim
    recurrent: tuple  # per layer: Gated DeltaNet (True) or full attention (False)
    rope_sections: tuple = ()  # multi-section RoPE (t, h, w, e) sizes in rotary pairs

    @property
    def head_v_dim(self) -> int:
        return self.ssm_d_inner // self.ssm_dt_rank

    @property
    def conv_channels(self) -> int:
        return 2 * self.ssm_n_group * self.ssm_d_state + self.ssm_d_inner

    def is_recurrent(self, layer: int) -> bool:
        return self.recurrent[layer]

    @property
    def n_kv_layers(self) -> int:
        """Layers that own a KV cache: the full-attention ones."""
        return sum(1 for r in self.recurrent if not r)

    @classmethod
    def from_header(cls, header):
        check_architecture(header, cls.arch)
        v = lambda key, default=None, kind=int: arch_value(header, key, default, kind)  # noqa: E731
        n_layer = v("block_count") - v("nextn_predict_layers", 0)  # MTP blocks are not run in the main pass
        cfg = cls(
            **moe_attention_fields(header, n_layer),
            # older conversions lack the key: the shared expert's own shape says it
            n_ff_shexp=v("expert_shared_feed_forward_length", 0) or header.tensor("blk.0.ffn_up_shexp.weight").shape[0],
            ssm_conv_kernel=v("ssm.conv_kernel"),
            ssm_d_state=v("ssm.state_size"),
            ssm_n_group=v("ssm.group_count"),
            ssm_dt_rank=v("ssm.time_step_rank"),
            ssm_d_inner=v("ssm.inner_size"),
            recurrent=layer_pattern(header, n_layer),
            rope_sections=tuple(int(s) for s in header.metadata.get(f"{cls.arch}.rope.dimension_sections", [])),
        )
        if cfg.ssm_d_inner % cfg.ssm_dt_rank or cfg.ssm_dt_rank % cfg.ssm_n_group:
            raise ValueError(f"linear attention: {cfg.ssm_dt_rank} value heads, {cfg.ssm_n_group} key heads and "
                             f"inner size {cfg.ssm_d_inner} do not divide evenly")
        return cfg
