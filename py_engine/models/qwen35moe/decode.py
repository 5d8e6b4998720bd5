"""qwen35moe's per-token plan (the decode step), after llama.cpp src/models/qwen35moe.cpp: per layer the mixer
(build_layer_attn_linear on recurrent layers, build_layer_attn on the others), then build_layer_ffn."""
from ...gpu.kernels import NormedInput
from ...gpu.qwen35_kernels import (GdnShape, GdnWeights, gated_norm_product, gated_output_product,
                                   gdn_conv_recurrent, pregated_norm_fits, pregated_norm_product)
from ..blocks import build_moe_ffn, build_output, decode_attention_shape, record_products


def build_layer_attn(kern, dl, acts, w, i, cfg, cache, kv):
    """h += attn_output(attention(rope(norm(q)), rope(norm(k)), v) · sigmoid(gate)) of attn_norm(h) (fused into
    the first input product), into the layer's KV cache `kv`. Three dispatches after the products: the attention,
    which norms and rotates q and k and appends K/V itself (attention_appending), its combine, the output product
    with the gate fused into its staging."""
    c = cfg
    qkv = acts["attn_in"]  # qg | k | v: the queries and the output gate are read from qg's heads
    record_products(kern, dl, w["attn_in"], acts["h"], qkv, i,
                    norm=NormedInput(w["attn_norm"], c.rms_eps, xn_out=acts["xn"]))
    kern.attention_appending(dl, qkv, w["attn_q_norm"], w["attn_k_norm"], cache.k[kv], cache.v[kv], acts["attn"],
                             decode_attention_shape(c, 2 * c.head_dim), label=f"attn_pregate-{i}")
    gated_output_product(kern, dl, w["attn_output"], acts["attn"], qkv, c.n_head, c.head_dim, acts["h"],
                         label=f"attn_output-{i}")


def build_layer_attn_linear(kern, dl, acts, w, i, cfg):
    """h += ssm_out(RMSNorm(delta_rule(l2norm(q), l2norm(k), v)) · ssm_norm · silu(z)) with q|k|v =
    silu(conv(attn_qkv · x)), z = attn_gate · x; beta and the decay from ssm_beta / ssm_alpha · x."""
    c = cfg
    dn = acts["dn_in"]  # beta | alpha | qkv | z
    record_products(kern, dl, w["dn_in"], acts["h"], dn, i,
                    norm=NormedInput(w["attn_norm"], c.rms_eps, xn_out=acts["xn"]))
    shape = decode_gdn_shape(c)
    # the gated norm's per-value factors and sums in the recurrence where the output product can finish it
    pre = pregated_norm_fits(kern, w["ssm_out"], c.head_v_dim)
    gdn_conv_recurrent(kern, dl, dn, GdnWeights(w["ssm_conv1d"], w["ssm_dt"], w["ssm_a"], w["ssm_norm"]),
                       acts[f"conv_window.{i}"], acts[f"ssm_state.{i}"], acts["delta_out"], shape,
                       label=f"attn_output-{i}", sq_parts=acts["delta_sq"] if pre else None)
    if pre:
        pregated_norm_product(kern, dl, w["ssm_out"], acts["delta_out"], acts["delta_sq"], c.head_v_dim,
                              c.rms_eps, acts["h"], label=f"linear_attn_out-{i}")
    else:
        gated_norm_product(kern, dl, w["ssm_out"], acts["delta_out"], w["ssm_norm"], dn, acts["delta_normed"],
                           acts["h"], shape, label=f"linear_attn_out-{i}")


def decode_gdn_shape(cfg) -> GdnShape:
    """The DeltaNet layers' shape from the model's config: the input products leave beta | alpha (ssm_dt_rank
    each), then q | k | v (conv_channels), then z."""
    nv = cfg.ssm_dt_rank
    return GdnShape(cfg.ssm_n_group, nv, cfg.ssm_d_state, cfg.head_v_dim, cfg.rms_eps, cfg.ssm_conv_kernel,
                    x_base=2 * nv, z_base=2 * nv + cfg.conv_channels)


def build_layer_ffn(kern, dl, acts, w, i, cfg, slot_map):
    """h += moe(xn) + sigmoid(ffn_gate_inp_shexp · xn) · shared(xn), xn = post_attention_norm(h)."""
    build_moe_ffn(kern, dl, acts, w, i, slot_map, i * cfg.n_expert, cfg, shared=True)


def record_token(model, kern, dl, acts, cache, slot_map):
    """One token from step.token to logits (and their argmax)."""
    c = model.cfg
    kern.embed(dl, model.token_embd, acts["h"], label="inp_embd")
    for i, w in enumerate(model.layers):
        if c.recurrent[i]:
            build_layer_attn_linear(kern, dl, acts, w, i, c)
        else:
            build_layer_attn(kern, dl, acts, w, i, c, cache, model.kv_index[i])
        build_layer_ffn(kern, dl, acts, w, i, c, slot_map)
    build_output(kern, dl, acts, model.output_norm, model.output, c)
