"""gemma4's per-chunk plan (the batched prefill): decode.py's layers with every token row of a chunk going through
each layer together (tiled GEMMs, row-wise norms, causal attention over cache + chunk, the routed experts as GEMMs
over each expert's picks: py_engine/gpu/chunk_kernels.py). A sliding-window layer's ring holds the window plus a
chunk less one row, so that the chunk's first row still sees its whole window once every row is appended."""
from ...gpu.chunk_shapes import AttentionShape, ExpertGemmShape, ExpertRouting, GemmRows
from ...gpu.gemma4_kernels import (ChunkRows, HeadPrepShape, gelu_mul, head_norms_rope_append, moe_combine_scaled,
                                   rmsnorm_add)
from ..chunk_blocks import neighbour_gemms


def ring_rows(cfg, n_ctx: int, chunk: int) -> int:
    """Rows of a sliding-window layer's K/V ring for prompts fed in chunks of `chunk` tokens."""
    return min(n_ctx, cfg.n_swa + max(chunk, 1) - 1)


def qkv_width(cfg, layer: int, has_v: bool) -> int:
    hd = cfg.layer_head_dim(layer)
    return (cfg.n_head + (2 if has_v else 1) * cfg.n_head_kv[layer]) * hd


def build_layer_attn(ck, dl, b, w, cfg, cache, i, rope_freqs):
    """h += post_attention_norm(attn_output(attention)) over the chunk's rows: q | k | v products into b["qkv"],
    per-head norms and RoPE with K/V appended (the caches' rows pos % ring rows), causal attention (windowed on a
    sliding-window layer)."""
    c, kern = cfg, ck.kern
    e, eps, T = c.n_embd, c.rms_eps, ck.T
    hd, n_kv = c.layer_head_dim(i), c.n_head_kv[i]
    has_v = "attn_v" in w
    width, q_width, k_base = qkv_width(c, i, has_v), c.n_head * hd, c.n_head * hd
    ck.rmsnorm(dl, b["h"], w["attn_norm"], b["xn"], e, eps, label=f"attn_norm-{i}")
    ck.gemm(dl, w["attn_q"], b["xn"], b["qkv"], GemmRows(e, width), label=f"Qcur-{i}")
    if has_v:
        neighbour_gemms(ck, dl, w["attn_k"], w["attn_v"], b["xn"], b["qkv"], GemmRows(e, width, y_base=k_base),
                        (f"Kcur-{i}", f"Vcur-{i}", f"KVcur-{i}"), None)
    else:
        ck.gemm(dl, w["attn_k"], b["xn"], b["qkv"], GemmRows(e, width, y_base=k_base), label=f"Kcur-{i}")
    rows = cache.rows[i]
    if c.is_swa(i) and rows < ring_rows(c, cache.n_ctx, T):
        raise ValueError(f"layer {i}: its K/V ring of {rows} rows cannot take chunks of {T} tokens (it needs "
                         f"{ring_rows(c, cache.n_ctx, T)}); open the decoder with this prefill chunk")
    shape = HeadPrepShape(c.n_head, n_kv, hd, c.layer_n_rot(i), eps, c.layer_rope_base(i), k_base,
                          k_base + n_kv * hd if has_v else k_base, rows)
    head_norms_rope_append(kern, dl, b["qkv"], b["q"], (w["attn_q_norm"], w["attn_k_norm"]),
                           (cache.k[i], cache.v[i]), shape, None if c.is_swa(i) else rope_freqs,
                           label=f"Qcur_Kcur_Vcur-{i}", chunk=ChunkRows(ck.chunk, T, width, q_width))
    ck.attention(dl, b["q"], cache.k[i], cache.v[i], b["attn"], AttentionShape(c.n_head, n_kv, hd, 1.0, q_width,
                 q_width), label=f"kqv_out-{i}", window=(c.n_swa, rows) if c.is_swa(i) else None)
    ck.gemm(dl, w["attn_output"], b["attn"], b["attn_out"], GemmRows(q_width, e), label=f"attn_out-{i}")
    rmsnorm_add(kern, dl, b["attn_out"], w["post_attention_norm"], b["h"], e, eps, label=f"attn_post_norm-{i}",
                rows=T)


def build_layer_ffn(ck, dl, b, w, cfg, i, slot_map, pool=None):
    """The dense GELU MLP and the routed experts over the chunk's rows, their post-norms, the residual and the
    layer's scale. Returns the cut points (after the grouping, after the expert products) of a MoE layer, else
    None."""
    c, kern = cfg, ck.kern
    e, eps, T, f_dense = c.n_embd, c.rms_eps, ck.T, c.n_ff
    ck.rmsnorm(dl, b["h"], w["ffn_norm"], b["xn"], e, eps, label=f"ffn_norm-{i}")
    neighbour_gemms(ck, dl, w["ffn_gate"], w["ffn_up"], b["xn"], b["ffn_gu"], GemmRows(e, 2 * f_dense),
                    (f"ffn_gate-{i}", f"ffn_up-{i}", f"ffn_gate_up-{i}"), None)
    gelu_mul(kern, dl, b["ffn_gu"], b["ffn_act"], f_dense, groups=T, label=f"ffn_geglu-{i}")
    ck.gemm(dl, w["ffn_down"], b["ffn_act"], b["ffn_out"], GemmRows(f_dense, e), label=f"ffn_mlp-{i}")
    out_scale = w.get("layer_output_scale")
    if "ffn_gate_inp" not in w:
        rmsnorm_add(kern, dl, b["ffn_out"], w["post_ffw_norm"], b["h"], e, eps, out_scale, label=f"l_out-{i}", rows=T)
        return None
    n, k, f = c.n_expert, c.n_expert_used, c.n_ff_exp
    ck.rmsnorm(dl, b["ffn_out"], w["post_ffw_norm_1"], b["ffn"], e, eps, label=f"ffn_mlp_normed-{i}")
    ck.rmsnorm(dl, b["h"], w["router_norm"], b["xr"], e, eps, label=f"ffn_moe_router_in-{i}")
    ck.gemm(dl, w["ffn_gate_inp"], b["xr"], b["router"], GemmRows(e, n), label=f"ffn_moe_logits-{i}")
    ck.router_topk(dl, b["router"], b["route_ids"], b["route_w"], n, k, label=f"ffn_moe_topk-{i}")
    ck.moe_group(dl, b["route_ids"], b["grouped"], k, n, label=f"ffn_moe_group-{i}")
    after_group = dl.count
    ck.rmsnorm(dl, b["h"], w["pre_ffw_norm_2"], b["xe"], e, eps, label=f"ffn_moe_in-{i}")
    streamed = (pool.buffers, pool.layout) if pool is not None else (None, None)
    route = ExpertRouting(k, n, b["grouped"], slot_map, i * n, b["mask"], *streamed)
    ck.expert_gemm(dl, w["ffn_gate_up_exps"], b["xe"], b["moe_gu"], route, ExpertGemmShape(2 * f, e, k),
                   label=f"ffn_moe_gate_up-{i}")
    gelu_mul(kern, dl, b["moe_gu"], b["moe_act"], f, groups=T * k, label=f"ffn_moe_geglu-{i}")
    ck.expert_gemm(dl, w["ffn_down_exps"], b["moe_act"], b["moe_down"], route, ExpertGemmShape(e, f, 1),
                   label=f"ffn_moe_down-{i}")
    after_experts = dl.count
    moe_combine_scaled(kern, dl, (b["route_ids"], b["route_w"]), w["ffn_down_exps_scale"], b["moe_down"],
                       b["moe_out"], e, k, label=f"ffn_moe_out-{i}", rows=T)
    rmsnorm_add(kern, dl, b["moe_out"], w["post_ffw_norm_2"], b["ffn"], e, eps, label=f"ffn_moe_normed-{i}", rows=T)
    rmsnorm_add(kern, dl, b["ffn"], w["post_ffw_norm"], b["h"], e, eps, out_scale, label=f"l_out-{i}", rows=T)
    return after_group, after_experts


def record_chunk(model, ck, dl, b, acts, cache, slot_map, pool=None) -> list:
    """The whole chunk from the token ids to every layer's output rows in b["h"]. Returns [(layer, after_group,
    after_experts)] of the MoE layers."""
    c = model.cfg
    ck.embed(dl, model.token_embd, b["ids"], b["h"], scale=c.embd_scale)
    cuts = []
    for i, w in enumerate(model.layers):
        build_layer_attn(ck, dl, b, w, c, cache, i, model.rope_freqs)
        cut = build_layer_ffn(ck, dl, b, w, c, i, slot_map, pool)
        if cut is not None:
            cuts.append((i, *cut))
    return cuts
