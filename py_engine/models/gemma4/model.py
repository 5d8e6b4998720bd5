"""The gemma4 model the engine loads: its config, tensors (weights.py), work buffers, per-layer KV caches, and the
per-token and per-chunk plans (decode.py, prefill.py)."""
from ..cache import LayerKVCache
from . import decode, prefill, weights
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

    @property
    def ring_layers(self) -> list:
        """The layers whose K/V caches are rings (sliding-window layers): their rows of old positions get
        overwritten, so a rewind needs a copy of them (engine/checkpoints.py), not just a smaller position."""
        return [i for i in range(self.cfg.n_layer) if self.cfg.is_swa(i)]

    def kv_cache_shapes(self, n_ctx: int, chunk: int = 1) -> list:
        """(rows, KV heads, head dim) of each layer's K and V caches: a sliding-window layer keeps a ring of its
        window's rows (llama.cpp's iSWA cache holds the window too), plus a prefill chunk's rows less one; a
        global layer n_ctx."""
        c = self.cfg
        return [(prefill.ring_rows(c, n_ctx, chunk) if c.is_swa(i) else n_ctx, c.n_head_kv[i], c.layer_head_dim(i))
                for i in range(c.n_layer)]

    def kv_cache(self, gpu, n_ctx: int, kv_format: str, chunk: int = 1) -> LayerKVCache:
        """The caches for prompts fed in chunks of `chunk` tokens (1: token by token)."""
        return LayerKVCache(gpu, self.kv_cache_shapes(n_ctx, chunk), n_ctx, kv_format)

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

    def chunk_work_buffers(self):
        """(name, f32 values per chunk row) the prefill needs beyond work_buffers': each row's q | k | v products
        (the decode's attn_in, which the prefill skips)."""
        c = self.cfg
        return [("qkv", max(prefill.qkv_width(c, i, True) for i in range(c.n_layer)))]

    def chunk_row_cols(self) -> int:
        return self.cfg.n_embd

    def load(self, loader):
        weights.load(self, loader)

    def record_token(self, kern, dl, acts, cache, slot_map):
        decode.record_token(self, kern, dl, acts, cache, slot_map)

    def record_chunk(self, ck, dl, b, acts, cache, slot_map, pool=None) -> list:
        return prefill.record_chunk(self, ck, dl, b, acts, cache, slot_map, pool)

    def record_output(self, kern, dl, acts):
        """The output head over acts["h"] (the decode's, and the prefill's after a prompt's last row)."""
        decode.build_output(kern, dl, acts, self)
