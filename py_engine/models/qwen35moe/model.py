"""The qwen35moe model the engine loads: its config, tensors (weights.py), work buffers and recurrent state, and
the per-token and per-chunk plans (decode.py, prefill.py)."""
from ...gpu.fused_kernels import route_layout
from ...gpu.qwen35_kernels import gdn_sq_parts
from ..blocks import moe_act_values, output_buffers
from . import decode, prefill, weights
from .config import Qwen35MoeConfig


def rope_pairs_all_rotate(sections, n_rot: int) -> bool:
    """Whether every rotary pair turns with the token position for text under llama.cpp's interleaved
    multi-section RoPE: pair i belongs to section s = (i % Σsections) % 3 when (i % Σsections) < 3·sections[s]
    (text positions are equal in the t/h/w sections), else to section e, which text holds at position 0."""
    if not sections or not any(sections):
        return True
    total = sum(sections)
    for i in range(n_rot // 2):
        sector = i % total
        if sector >= 3 * sections[sector % 3]:
            return False
    return True


class Qwen35Moe:
    arch = "qwen35moe"

    def __init__(self, cfg: Qwen35MoeConfig):
        n_rot = cfg.n_rot
        if not rope_pairs_all_rotate(cfg.rope_sections, n_rot):
            raise ValueError(f"rope sections {list(cfg.rope_sections)} leave some of the {n_rot} rotary dims "
                             "unrotated for text; the engine's RoPE kernel rotates all of them")
        self.cfg = cfg
        self.layers = []  # per layer: {short GGUF name: GPU tensor}
        # only full-attention layers own a KV cache: layer -> its index among them
        self.kv_index = {i: n for n, i in enumerate(i for i, r in enumerate(cfg.recurrent) if not r)}

    @property
    def n_kv_layers(self) -> int:
        return self.cfg.n_kv_layers

    def work_buffers(self):
        """(name, f32 values) of the activations one token needs, and each recurrent layer's state (conv window of
        the last kernel - 1 inputs, delta-rule state n_v × d_k × d_v), kept across tokens. The decode step fuses
        gate/up away and writes each mixer's input projections into one buffer (attn_in: qg | k | v; dn_in:
        beta | alpha | qkv | z), where the prefill's GEMMs write qg, kv, ssm_gates, qkv and z; the chunked
        prefill sizes its buffers from this list."""
        c = self.cfg
        hd, e, k = c.head_dim, c.n_embd, c.n_expert_used
        bufs = [("h", e), ("xn", e), ("qg", 2 * c.n_head * hd), ("q", c.n_head * hd),
                ("attn_in", 2 * (c.n_head + c.n_head_kv) * hd),
                ("dn_in", 2 * c.ssm_dt_rank + c.conv_channels + c.ssm_d_inner),
                ("kv", 2 * c.n_head_kv * hd), ("attn", c.n_head * hd),
                ("qkv", c.conv_channels), ("qkv_conv", c.conv_channels), ("z", c.ssm_d_inner),
                ("ssm_gates", 2 * c.ssm_dt_rank), ("delta_out", c.ssm_d_inner), ("delta_normed", c.ssm_d_inner),
                ("delta_sq", c.ssm_dt_rank * gdn_sq_parts(c.head_v_dim)),
                ("router", c.n_expert), ("route_ids", k), ("route_w", k), ("route", route_layout(c.n_expert, k)[2]),
                ("gate", k * c.n_ff_exp),
                ("up", k * c.n_ff_exp), ("act", moe_act_values(c, c.n_ff_shexp)), ("down", k * e),
                ("shexp_gate", c.n_ff_shexp), ("shexp_up", c.n_ff_shexp), ("shexp_act", c.n_ff_shexp),
                ("shexp_out", e)] + output_buffers(c)
        for i, rec in enumerate(c.recurrent):
            if rec:
                bufs += [(f"conv_window.{i}", c.ssm_conv_kernel * c.conv_channels),  # a ring: gdn_conv_step.wgsl
                         (f"ssm_state.{i}", c.ssm_dt_rank * c.ssm_d_state * c.head_v_dim)]
        return bufs

    def chunk_work_buffers(self):
        """(name, f32 values per chunk row) the prefill needs beyond work_buffers': the q/k scales per key head of
        the DeltaNet layers (gdn_qk_scales.wgsl)."""
        return [("gdn_qk", 4 * self.cfg.ssm_n_group)] if any(self.cfg.recurrent) else []

    def chunk_row_cols(self) -> int:
        return prefill.quantised_row_cols(self.cfg)

    def load(self, loader):
        weights.load(self, loader)

    def record_token(self, kern, dl, acts, cache, slot_map):
        decode.record_token(self, kern, dl, acts, cache, slot_map)

    def record_chunk(self, ck, dl, b, acts, cache, slot_map, pool=None) -> list:
        return prefill.record_chunk(self, ck, dl, b, acts, cache, slot_map, pool)
