"""qwen3moe's tensors by their GGUF names (llama.cpp llama_model_qwen3moe::load_arch_tensors), uploaded through the
engine's loader (engine/gpu_weights.py for a GGUF, engine/store_weights.py for a store)."""
from ..blocks import load_projections


def load(model, loader) -> None:
    """The dense trunk and each layer's tensors into model.layers; the experts as each layer's pool (a streaming
    loader hands pool parts instead)."""
    c = model.cfg
    hd, e = c.head_dim, c.n_embd
    model.token_embd = loader.matrix("token_embd.weight", (c.n_vocab, e))
    model.output_norm = loader.vector("output_norm.weight", e)
    # tied embeddings: no output.weight, the head is token_embd
    model.output = loader.matrix("output.weight", (c.n_vocab, e)) if loader.has("output.weight") else model.token_embd
    for i in range(c.n_layer):
        p = f"blk.{i}."
        w = load_projections(loader, "attn_in", p + "attn_in", [
            ("attn_q", p + "attn_q.weight", (c.n_head * hd, e)),
            ("attn_k", p + "attn_k.weight", (c.n_head_kv * hd, e)),
            ("attn_v", p + "attn_v.weight", (c.n_head_kv * hd, e))])
        model.layers.append({
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
