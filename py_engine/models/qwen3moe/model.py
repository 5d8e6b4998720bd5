"""The qwen3moe model the engine loads: its config, tensors (weights.py), work buffers, and the per-token and
per-chunk plans (decode.py, prefill.py)."""
from ...gpu.fused_kernels import route_layout
from ..blocks import moe_act_values, output_buffers
from . import decode, prefill, weights
from .config import Qwen3MoeConfig


class Qwen3Moe:
    arch = "qwen3moe"

    def __init__(self, cfg: Qwen3MoeConfig):
        self.cfg = cfg
        self.layers = []  # per layer: {short GGUF name: GPU tensor}
        self.kv_index = {i: i for i in range(cfg.n_layer)}  # every layer owns a KV cache

    @property
    def n_kv_layers(self) -> int:
        return self.cfg.n_kv_layers

    def work_buffers(self):
        """(name, f32 values) of the activations one token needs (gate / up: the chunked prefill's, which sizes
        its buffers from this list; the decode step fuses them away)."""
        c = self.cfg
        # attn_in: the decode's q | k | v (one stacked product); the prefill's GEMMs write q and kv
        return [("h", c.n_embd), ("xn", c.n_embd), ("q", c.n_head * c.head_dim), ("kv", 2 * c.n_head_kv * c.head_dim),
                ("attn_in", (c.n_head + 2 * c.n_head_kv) * c.head_dim),
                ("attn", c.n_head * c.head_dim), ("router", c.n_expert), ("route_ids", c.n_expert_used),
                ("route_w", c.n_expert_used), ("route", route_layout(c.n_expert, c.n_expert_used)[2]),
                ("gate", c.n_expert_used * c.n_ff_exp),
                ("up", c.n_expert_used * c.n_ff_exp), ("act", moe_act_values(c)),
                ("down", c.n_expert_used * c.n_embd)] + output_buffers(c)

    def chunk_work_buffers(self):
        """(name, f32 values per chunk row) the prefill needs beyond work_buffers'."""
        return []

    def chunk_row_cols(self) -> int:
        return prefill.quantised_row_cols(self.cfg)

    def load(self, loader):
        weights.load(self, loader)

    def record_token(self, kern, dl, acts, cache, slot_map):
        decode.record_token(self, kern, dl, acts, cache, slot_map)

    def record_chunk(self, ck, dl, b, acts, cache, slot_map, pool=None) -> list:
        return prefill.record_chunk(self, ck, dl, b, acts, cache, slot_map, pool)
