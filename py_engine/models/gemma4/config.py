"""gemma4 hyper-parameters from the GGUF's `gemma4.*` keys (llama.cpp llama_model_gemma4::load_arch_hparams).
Field names are llama.cpp's llama_hparams names; the numpy reference reads the same class.

Two kinds of layer: sliding-window ones (`attention.sliding_window_pattern` true, llama.cpp's swa_layers) attend
over the last n_swa positions with their own head dim (`key_length_swa`), RoPE base (`rope.freq_base_swa`) and
rotated dims (`rope.dimension_count_swa`); global ones use `key_length`, `rope.freq_base`, `rope.dimension_count`
and the `rope_freqs` tensor (proportional RoPE). `attention.head_count_kv` is per layer. Per-layer input
embeddings and shared KV layers (the small Gemma 4 models) are refused: only the 26B-A4B layout is run.
"""
import math
import struct
from dataclasses import dataclass
from typing import ClassVar

from ..hparams import AttentionOnly, arch_value, check_architecture


def _per_layer(header, suffix: str, n_layer: int, kind) -> tuple:
    """A key that is either one value for every layer or an array with one entry per layer."""
    key = f"{header.architecture}.{suffix}"
    if key not in header.metadata:
        raise ValueError(f"the GGUF has no {key!r} key")
    value = header.metadata[key]
    if not isinstance(value, (list, tuple)):
        return (kind(value),) * n_layer
    if len(value) < n_layer:
        raise ValueError(f"{key} has {len(value)} entries for {n_layer} layers")
    return tuple(kind(v) for v in value[:n_layer])


def _float32(x: float) -> float:
    """x rounded to float32, as llama.cpp's f32 scalars hold it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class Gemma4Config(AttentionOnly):
    arch: ClassVar[str] = "gemma4"
    n_vocab: int
    n_layer: int
    n_embd: int
    n_ff: int  # the dense MLP branch beside the experts
    n_head: int
    n_head_kv: tuple  # per layer
    head_dim: int  # global layers: key and value head dim
    head_dim_swa: int  # sliding-window layers
    n_rot: int  # global layers (pairs past rope_freqs' rotated ones barely turn: proportional RoPE)
    n_rot_swa: int
    rope_base: float
    rope_base_swa: float
    rms_eps: float
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ctx_train: int
    n_swa: int  # the sliding window: a key is seen while pos_q - pos_k < n_swa
    swa_layers: tuple  # per layer: sliding-window (True) or global (False) attention
    f_final_logit_softcapping: float  # logits = c * tanh(logits / c); 0: none
    embd_scale: float  # the input embedding's factor, sqrt(n_embd) in float32

    def is_swa(self, layer: int) -> bool:
        return self.swa_layers[layer]

    def layer_head_dim(self, layer: int) -> int:
        return self.head_dim_swa if self.is_swa(layer) else self.head_dim

    def layer_n_rot(self, layer: int) -> int:
        return self.n_rot_swa if self.is_swa(layer) else self.n_rot

    def layer_rope_base(self, layer: int) -> float:
        return self.rope_base_swa if self.is_swa(layer) else self.rope_base

    @classmethod
    def from_header(cls, header):
        check_architecture(header, cls.arch)
        v = lambda key, default=None, kind=int: arch_value(header, key, default, kind)  # noqa: E731
        for key in ("attention.shared_kv_layers", "embedding_length_per_layer_input"):
            if v(key, 0):
                raise ValueError(f"gemma4.{key} = {v(key)}: the small Gemma 4 models' shared KV layers and "
                                 "per-layer inputs are not supported; only the 26B-A4B layout is")
        n_layer = v("block_count")
        n_head = _per_layer(header, "attention.head_count", n_layer, int)
        if len(set(n_head)) != 1:
            raise ValueError(f"gemma4.attention.head_count varies by layer ({list(n_head)}); not supported")
        head_dim = v("attention.key_length")
        head_dim_swa = v("attention.key_length_swa", head_dim)
        if (v("attention.value_length", head_dim), v("attention.value_length_swa", head_dim_swa)) != \
                (head_dim, head_dim_swa):
            raise ValueError("gemma4 with value_length != key_length is not supported")
        n_embd = v("embedding_length")
        rope_base = v("rope.freq_base", kind=float)
        cfg = cls(
            n_vocab=header.tensor("token_embd.weight").shape[0],
            n_layer=n_layer,
            n_embd=n_embd,
            n_ff=v("feed_forward_length"),
            n_head=n_head[0],
            n_head_kv=_per_layer(header, "attention.head_count_kv", n_layer, int),
            head_dim=head_dim,
            head_dim_swa=head_dim_swa,
            n_rot=v("rope.dimension_count", head_dim),
            n_rot_swa=v("rope.dimension_count_swa", head_dim_swa),
            rope_base=rope_base,
            rope_base_swa=v("rope.freq_base_swa", rope_base, kind=float),
            rms_eps=v("attention.layer_norm_rms_epsilon", kind=float),
            n_expert=v("expert_count"),
            n_expert_used=v("expert_used_count"),
            n_ff_exp=v("expert_feed_forward_length"),
            n_ctx_train=v("context_length", 0),
            n_swa=v("attention.sliding_window"),
            swa_layers=_per_layer(header, "attention.sliding_window_pattern", n_layer, bool),
            f_final_logit_softcapping=v("final_logit_softcapping", 0.0, kind=float),
            embd_scale=_float32(math.sqrt(n_embd)),
        )
        for layer, n_kv in enumerate(cfg.n_head_kv):
            if n_kv < 1 or cfg.n_head % n_kv:
                raise ValueError(f"gemma4 layer {layer}: {cfg.n_head} query heads are not a multiple of its "
                                 f"{n_kv} KV heads")
        if cfg.n_expert_used > cfg.n_expert:
            raise ValueError(f"gemma4.expert_used_count is {cfg.n_expert_used}, more than expert_count "
                             f"{cfg.n_expert}")
        return cfg
