"""The gemma4 model the engine loads: its config, tensors (weights.py), work buffers, per-layer KV caches and the
per-token plan (decode.py). No batched prefill plan yet: the decoder feeds its prompts token by token."""
from ..cache import LayerKVCache
from . import decode, weights
from .config import Gemma4Config


class Gemma4:
    arch = "gemma4"

    def __init__(self, cfg: Gemma4Config):
        self.cfg = cfg
        self.layers = []  # per layer: {short GGUF name: GPU tensor}
        self.kv_index = {i: i for i in range(cfg.n_layer)}  # every layer owns a KV cache
        self.rope_freqs = None

    @property
    def n_kv_layers(self) -> int:
        return self.cfg.n_kv_layers

    def kv_cache_shapes(self, n_ctx: int) -> list:
        """(rows, KV heads, head dim) of each layer's K and V caches: a sliding-window layer keeps a ring of its
        window's rows (llama.cpp's iSWA cache holds the same), a global layer n_ctx."""
        c = self.cfg
        return [(min(n_ctx, c.n_swa) if c.is_swa(i) else n_ctx, c.n_head_kv[i], c.layer_head_dim(i))
                for i in range(c.n_layer)]

    def kv_cache(self, gpu, n_ctx: int, kv_format: str) -> LayerKVCache:
        return LayerKVCache(gpu, self.kv_cache_shapes(n_ctx), n_ctx, kv_format)

    def work_buffers(self):
        """(name, f32 values) of the activations one token needs."""
        c = self.cfg
        e, k = c.n_embd, c.n_expert_used
        heads = c.n_head * max(c.head_dim, c.head_dim_swa)
        attn_in = max((c.n_head + 2 * c.n_head_kv[i]) * c.layer_head_dim(i) for i in range(c.n_layer))
        return [("h", e), ("xn", e), ("xr", e), ("xe", e), ("attn_in", attn_in), ("q", heads), ("attn", heads),
                ("attn_out", e), ("ffn_gu", 2 * c.n_ff), ("ffn_act", c.n_ff), ("ffn_out", e), ("ffn", e),
                ("router", c.n_expert), ("route_ids", k), ("route_w", k), ("moe_gu", 2 * k * c.n_ff_exp),
                ("moe_act", k * c.n_ff_exp), ("moe_down", k * e), ("moe_out", e), ("logits", c.n_vocab),
                ("argmax", 2)]

    def load(self, loader):
        weights.load(self, loader)

    def record_token(self, kern, dl, acts, cache, slot_map):
        decode.record_token(self, kern, dl, acts, cache, slot_map)
