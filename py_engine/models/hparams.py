"""Reading an architecture's hyper-parameters from its GGUF header (the `{arch}.*` keys). Pure Python: the
numpy reference (diskformer/reference) reads its config through the same classes."""


def arch_value(header, suffix: str, default=None, kind=int):
    """metadata[f"{arch}.{suffix}"] converted by `kind`; `default` when absent (None: required)."""
    key = f"{header.architecture}.{suffix}"
    if key in header.metadata:
        return kind(header.metadata[key])
    if default is None:
        raise ValueError(f"the GGUF has no {key!r} key")
    return default


def check_architecture(header, arch: str) -> None:
    if header.architecture != arch:
        raise ValueError(f"not a {arch} model: general.architecture = {header.architecture!r}")


def moe_attention_fields(header, n_layer: int) -> dict:
    """The config fields the Qwen MoE architectures read alike (llama.cpp's hparams names): vocabulary, widths,
    heads, RoPE, norm epsilon and the routed experts. Keys and values of one head share a length."""
    def v(key, default=None, kind=int):
        return arch_value(header, key, default, kind)

    head_dim = v("attention.key_length")
    if v("attention.value_length", head_dim) != head_dim:
        raise ValueError(f"{header.architecture} with value_length != key_length is not supported")
    return dict(
        n_vocab=header.tensor("token_embd.weight").shape[0],
        n_layer=n_layer,
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


class AttentionOnly:
    """The layer facts of a model whose every layer attends (no recurrent state): qwen3moe's and gemma4's configs."""

    @property
    def recurrent(self) -> tuple:
        return (False,) * self.n_layer

    def is_recurrent(self, layer: int) -> bool:
        return False

    @property
    def n_kv_layers(self) -> int:
        return self.n_layer
