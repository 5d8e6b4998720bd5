"""gemma4's per-token plan (the decode step), after llama.cpp src/models/gemma4-iswa.cpp:
    h = x + post_attention_norm(attn(attn_norm(x)))
    out = (h + post_ffw_norm(post_ffw_norm_1(mlp(ffn_norm(h))) + post_ffw_norm_2(moe(h)))) * layer_output_scale
Intermediate names follow llama.cpp's graph callbacks."""
from ...gpu.gemma4_kernels import (HeadPrepShape, gelu_mul, head_norms_rope_append, moe_combine_scaled,
                                   rmsnorm_add, softcap)
from ...gpu.kernels import DecodeAttentionShape, MoeRoute, NormedInput
from ...gpu.q4_kernels import embed_scaled
from ..blocks import record_products


def build_layer_attn(kern, dl, acts, w, i, cfg, cache, rope_freqs):
    """h += post_attention_norm(attn_output(attention(q, k, v))) with q, k normed per head and rotated, v normed
    without a weight, over the layer's cache (a ring of the window on a sliding-window layer); scale 1. Global
    layers divide each rotary pair's angle by rope_freqs."""
    c = cfg
    hd, n_kv = c.layer_head_dim(i), c.n_head_kv[i]
    qkv = acts["attn_in"]  # q | k | v (global layers: q | k)
    record_products(kern, dl, w["attn_in"], acts["h"], qkv, i,
                    norm=NormedInput(w["attn_norm"], c.rms_eps, xn_out=acts["xn"]))
    k_base = c.n_head * hd
    rows = cache.rows[i]
    shape = HeadPrepShape(c.n_head, n_kv, hd, c.layer_n_rot(i), c.rms_eps, c.layer_rope_base(i), k_base,
                          k_base + n_kv * hd if "attn_v" in w else k_base, rows)
    head_norms_rope_append(kern, dl, qkv, acts["q"], (w["attn_q_norm"], w["attn_k_norm"]), (cache.k[i], cache.v[i]),
                           shape, freqs=None if c.is_swa(i) else rope_freqs, label=f"Qcur_Kcur_Vcur-{i}")
    kern.attention(dl, acts["q"], cache.k[i], cache.v[i], acts["attn"], DecodeAttentionShape(c.n_head, n_kv, hd, 1.0),
                   label=f"kqv_out-{i}", n_ctx=rows, window=(c.n_swa, rows) if c.is_swa(i) else None)
    kern.matvec(dl, w["attn_output"], acts["attn"], acts["attn_out"], label=f"attn_out-{i}")
    rmsnorm_add(kern, dl, acts["attn_out"], w["post_attention_norm"], acts["h"], c.n_embd, c.rms_eps,
                label=f"attn_post_norm-{i}")


def build_layer_ffn(kern, dl, acts, w, i, cfg, slot_map):
    """The dense GELU MLP and the routed experts beside it, their post-norms, the residual and the layer's scale."""
    c = cfg
    e, eps = c.n_embd, c.rms_eps
    record_products(kern, dl, w["ffn_in"], acts["h"], acts["ffn_gu"], i,
                    norm=NormedInput(w["ffn_norm"], eps, xn_out=acts["xn"]))
    gelu_mul(kern, dl, acts["ffn_gu"], acts["ffn_act"], c.n_ff, label=f"ffn_geglu-{i}")
    kern.matvec(dl, w["ffn_down"], acts["ffn_act"], acts["ffn_out"], label=f"ffn_mlp-{i}")
    out_scale = w.get("layer_output_scale")
    if "ffn_gate_inp" not in w:
        rmsnorm_add(kern, dl, acts["ffn_out"], w["post_ffw_norm"], acts["h"], e, eps, out_scale, label=f"l_out-{i}")
        return
    kern.rmsnorm(dl, acts["ffn_out"], w["post_ffw_norm_1"], acts["ffn"], e, eps, label=f"ffn_mlp_normed-{i}")
    n, k, f = c.n_expert, c.n_expert_used, c.n_ff_exp
    kern.matvec(dl, w["ffn_gate_inp"], acts["h"], acts["router"], label=f"ffn_moe_logits-{i}",
                prep=NormedInput(w["router_norm"], eps, xn_out=acts["xr"]))
    kern.router_topk(dl, acts["router"], acts["route_ids"], acts["route_w"], n, k, renorm=True,
                     label=f"ffn_moe_topk-{i}")
    kern.rmsnorm(dl, acts["h"], w["pre_ffw_norm_2"], acts["xe"], e, eps, label=f"ffn_moe_in-{i}")
    route = MoeRoute(acts["route_ids"], slot_map, i * n)
    kern.moe_matvec(dl, w["ffn_gate_up_exps"], 2 * f, k, acts["xe"], acts["moe_gu"], route,
                    label=f"ffn_moe_gate_up-{i}")
    gelu_mul(kern, dl, acts["moe_gu"], acts["moe_act"], f, groups=k, label=f"ffn_moe_geglu-{i}")
    kern.moe_matvec(dl, w["ffn_down_exps"], e, k, acts["moe_act"], acts["moe_down"], route, x_stride=f,
                    label=f"ffn_moe_down-{i}")
    moe_combine_scaled(kern, dl, (acts["route_ids"], acts["route_w"]), w["ffn_down_exps_scale"], acts["moe_down"],
                       acts["moe_out"], e, k, label=f"ffn_moe_out-{i}")
    after_combine = getattr(kern, "after_combine", None)
    if after_combine is not None:  # the CPU expert tier's share of the routed sum (engine/cpu_tier_path.py)
        after_combine(kern, dl, i)
    rmsnorm_add(kern, dl, acts["moe_out"], w["post_ffw_norm_2"], acts["ffn"], e, eps, label=f"ffn_moe_normed-{i}")
    rmsnorm_add(kern, dl, acts["ffn"], w["post_ffw_norm"], acts["h"], e, eps, out_scale, label=f"l_out-{i}")


def build_output(kern, dl, acts, model):
    """result_norm, the tied head over the token table (its argmax fused), the soft-capping."""
    c = model.cfg
    kern.rmsnorm(dl, acts["h"], model.output_norm, acts["xn"], c.n_embd, c.rms_eps, label="result_norm")
    kern.matvec(dl, model.output, acts["xn"], acts["logits"], label="result_output", argmax_out=acts["argmax"])
    if c.f_final_logit_softcapping:
        softcap(kern, dl, acts["logits"], c.n_vocab, c.f_final_logit_softcapping, acts["argmax"],
                label="result_output_capped")


def record_token(model, kern, dl, acts, cache, slot_map):
    """One token from step.token to logits (and their argmax)."""
    c = model.cfg
    embed_scaled(kern, dl, model.token_embd, acts["h"], c.embd_scale, label="inp_embd")
    for i, w in enumerate(model.layers):
        build_layer_attn(kern, dl, acts, w, i, c, cache, model.rope_freqs)
        build_layer_ffn(kern, dl, acts, w, i, c, slot_map)
    build_output(kern, dl, acts, model)
