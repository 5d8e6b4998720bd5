"""qwen3moe's per-token plan (the decode step), after llama.cpp src/models/qwen3moe.cpp: every layer is the
standard GQA attention (blocks.build_attn) then the routed MoE (blocks.build_moe_ffn)."""
from ..blocks import build_attn, build_moe_ffn, build_output


def build_layer_attn(kern, dl, acts, w, i, cfg, cache):
    """h += attn_output(attention(rope(norm(q)), rope(norm(k)), v)) of attn_norm(h)."""
    build_attn(kern, dl, acts, w, i, cache, cfg)


def build_layer_ffn(kern, dl, acts, w, i, cfg, slot_map):
    """h += moe(ffn_norm(h)): top-k of the softmaxed router, weights renormalised, no shared expert."""
    build_moe_ffn(kern, dl, acts, w, i, slot_map, i * cfg.n_expert, cfg)


def record_token(model, kern, dl, acts, cache, slot_map):
    """One token from step.token to logits (and their argmax)."""
    c = model.cfg
    kern.embed(dl, model.token_embd, acts["h"], label="inp_embd")
    for i, w in enumerate(model.layers):
        build_layer_attn(kern, dl, acts, w, i, c, cache)
        build_layer_ffn(kern, dl, acts, w, i, c, slot_map)
    build_output(kern, dl, acts, model.output_norm, model.output, c)
