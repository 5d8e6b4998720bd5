"""qwen3moe (Qwen3-30B-A3B): hyper-parameters from the GGUF, the tensors by their GGUF names, the per-token plan.

After llama.cpp src/models/qwen3moe.cpp:
    x = token_embd[token]
    per layer: h = x + attn(attn_norm(x)); x = h + moe(ffn_norm(h))      (attn: q/k RMSNorm per head, NeoX RoPE)
    logits = output(output_norm(x))
No shared expert; top-k weights are always renormalised.
"""
from dataclasses import dataclass

from ..gpu.fused_kernels import route_layout
from .common import (arch_value, load_projections, moe_act_values, output_buffers, record_attention, record_output,
                     record_routed_moe)


@dataclass(frozen=True)
class Qwen3MoeConfig:
    n_vocab: int
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rope_base: float
    rms_eps: float
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ctx_train: int

    @classmethod
    def from_header(cls, header):
        if header.architecture != "qwen3moe":
            raise ValueError(f"not a qwen3moe model: general.architecture = {header.architecture!r}")
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


class Qwen3Moe:
    arch = "qwen3moe"

    def __init__(self, cfg: Qwen3MoeConfig):
        self.cfg = cfg
        self.layers = []  # per layer: {short GGUF name: GPU tensor}

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

    def load(self, loader):
        """Upload the dense trunk and (for now) every layer's experts as that layer's pool."""
        c = self.cfg
        hd, e = c.head_dim, c.n_embd
        self.token_embd = loader.matrix("token_embd.weight", (c.n_vocab, e))
        self.output_norm = loader.vector("output_norm.weight", e)
        # tied embeddings: no output.weight, the head is token_embd
        self.output = loader.matrix("output.weight", (c.n_vocab, e)) if loader.has("output.weight") else self.token_embd
        for i in range(c.n_layer):
            p = f"blk.{i}."
            w = load_projections(loader, "attn_in", p + "attn_in", [
                ("attn_q", p + "attn_q.weight", (c.n_head * hd, e)),
                ("attn_k", p + "attn_k.weight", (c.n_head_kv * hd, e)),
                ("attn_v", p + "attn_v.weight", (c.n_head_kv * hd, e))])
            self.layers.append({
                **w,
                "attn_norm": loader.vector(p + "attn_norm.weight", e),
                "attn_output": loader.matrix(p + "attn_output.weight", (e, c.n_head * hd)),
                "attn_q_norm": loader.vector(p + "attn_q_norm.weight", hd),
                "attn_k_norm": loader.vector(p + "attn_k_norm.weight", hd),
                "ffn_norm": loader.vector(p + "ffn_norm.weight", e),
                "ffn_gate_inp": loader.matrix(p + "ffn_gate_inp.weight", (c.n_expert, e)),
                "ffn_gate_exps": loader.matrix(p + "ffn_gate_exps.weight", (c.n_expert, c.n_ff_exp, e), True),
                "ffn_up_exps": loader.matrix(p + "ffn_up_exps.weight", (c.n_expert, c.n_ff_exp, e), True),
                "ffn_down_exps": loader.matrix(p + "ffn_down_exps.weight", (c.n_expert, e, c.n_ff_exp), True),
            })

    def record_token(self, kern, dl, acts, cache, slot_map):
        """One token from step.token to logits (and their argmax)."""
        c = self.cfg
        kern.embed(dl, self.token_embd, acts["h"], label="inp_embd")
        for i, w in enumerate(self.layers):
            record_attention(kern, dl, acts, w, i, cache, c)
            record_routed_moe(kern, dl, acts, w, i, slot_map, i * c.n_expert, c)
        record_output(kern, dl, acts, self.output_norm, self.output, c)
