"""gemma4's tensors by their GGUF names (llama.cpp llama_model_gemma4::load_arch_tensors), uploaded through the
engine's loader (engine/gpu_weights.py for a GGUF)."""
import struct

from ..blocks import load_projections


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def load(model, loader) -> None:
    """The dense trunk and each layer's tensors into model.layers; the experts as each layer's pool."""
    c = model.cfg
    e = c.n_embd
    model.token_embd = loader.matrix("token_embd.weight", (c.n_vocab, e))
    model.output_norm = loader.vector("output_norm.weight", e)
    # tied embeddings: no output.weight, the head is token_embd
    model.output = loader.matrix("output.weight", (c.n_vocab, e)) if loader.has("output.weight") else model.token_embd
    # proportional RoPE of the global layers: each pair's angle divided by its rope_freqs value
    model.rope_freqs = loader.vector("rope_freqs.weight", c.head_dim // 2) if loader.has("rope_freqs.weight") else None
    # the router's input is rmsnorm(h) / sqrt(n_embd) * ffn_gate_inp.scale: one norm weight (f32, as llama.cpp
    # holds 1/sqrt(n_embd))
    router_factor = _f32(_f32(1.0) / _f32(e ** 0.5))
    for i in range(c.n_layer):
        model.layers.append(_load_layer(loader, c, i, router_factor))


def _load_layer(loader, c, i: int, router_factor: float) -> dict:
    p = f"blk.{i}."
    e, hd, n_kv = c.n_embd, c.layer_head_dim(i), c.n_head_kv[i]
    attn = [("attn_q", p + "attn_q.weight", (c.n_head * hd, e)), ("attn_k", p + "attn_k.weight", (n_kv * hd, e))]
    if loader.has(p + "attn_v.weight"):  # global layers have none: V is the K projection
        attn.append(("attn_v", p + "attn_v.weight", (n_kv * hd, e)))
    w = load_projections(loader, "attn_in", p + "attn_in", attn)
    w.update(load_projections(loader, "ffn_in", p + "ffn_in", [
        ("ffn_gate", p + "ffn_gate.weight", (c.n_ff, e)), ("ffn_up", p + "ffn_up.weight", (c.n_ff, e))]))
    vec = lambda name, n=e: loader.vector(p + name + ".weight", n)  # noqa: E731
    w.update({
        "attn_norm": vec("attn_norm"),
        "attn_q_norm": vec("attn_q_norm", hd),
        "attn_k_norm": vec("attn_k_norm", hd),
        "attn_output": loader.matrix(p + "attn_output.weight", (e, c.n_head * hd)),
        "post_attention_norm": vec("post_attention_norm"),
        "ffn_norm": vec("ffn_norm"),
        "ffn_down": loader.matrix(p + "ffn_down.weight", (e, c.n_ff)),
        "post_ffw_norm": vec("post_ffw_norm"),
    })
    if loader.has(p + "layer_output_scale.weight"):
        w["layer_output_scale"] = vec("layer_output_scale", 1)
    if loader.has(p + "ffn_gate_inp.weight"):  # llama.cpp: a layer with a router is a MoE layer
        n, f = c.n_expert, c.n_ff_exp
        w.update({
            "ffn_gate_inp": loader.matrix(p + "ffn_gate_inp.weight", (n, e)),
            "router_norm": loader.scaled_vector(p + "ffn_gate_inp.scale", e, router_factor),
            "ffn_gate_up_exps": loader.matrix(p + "ffn_gate_up_exps.weight", (n, 2 * f, e), True),
            "ffn_down_exps": loader.matrix(p + "ffn_down_exps.weight", (n, e, f), True),
            "ffn_down_exps_scale": loader.vector(p + "ffn_down_exps.scale", n),
            "pre_ffw_norm_2": vec("pre_ffw_norm_2"),
            "post_ffw_norm_1": vec("post_ffw_norm_1"),
            "post_ffw_norm_2": vec("post_ffw_norm_2"),
        })
    return w
