"""The prefill blocks the architectures share: the per-token blocks of blocks.py with every token row of a chunk
going through each layer together (shaders of py_engine/gpu/chunk_kernels.py). Each architecture's prefill.py
strings them into its layers (record_chunk). Row-major chunk buffers: row t of a buffer holding m values per token
starts at t·m.

An architecture's `record_chunk` returns the cut points the streamed pool needs: per MoE layer (layer, index after
its grouping dispatch = where the CPU reads the routed ids back, index after its expert products), so the list can
run whole (every expert resident) or layer by layer with the union of the chunk's experts paged in between.

In Q8_0-activation mode a GEMM over Q8_0 weights quantises its f32 input rows per 32-block while staging them
(shaders/gemm_tile_q8.wgsl), as the decode's int8 products and llama.cpp quantise them; F32 weights read the f32
rows; in that mode the chunk's norms also write their rows quantised (rmsnorm xq: the same codes), which the int8
GEMMs after them read as they are, the output products' inputs (attention, DeltaNet, shared expert down) are
quantised once into the same buffer before their GEMM (ChunkKernels.gemm_quantised: each reader of the norm's rows
has run by then), and with few picks per expert the fused routed gate/up writes the down product's input quantised
too. F32 products (the router) read the f32 rows.
"""
from ..gpu.chunk_shapes import AttentionShape, ExpertGemmShape, ExpertRouting, GemmRows


def neighbour_gemms(ck, dl, w1, w2, x, y, rows: GemmRows, labels, xq):
    """Y's rows W1·X then W2·X side by side from rows.y_base (W2's outputs w1.rows further): one GEMM where the two
    are neighbours in a stacked input matrix (GpuMatrix.joined: one dispatch and one slice sum fewer), else one
    each. labels: (W1's, W2's, the joined GEMM's)."""
    label1, label2, joined_label = labels
    both = w1.joined(w2, f"{w1.name}+{w2.name}")
    if both is not None:
        ck.gemm(dl, both, x, y, rows, label=joined_label, xq=xq)
        return
    ck.gemm(dl, w1, x, y, rows, label=label1, xq=xq)
    ck.gemm(dl, w2, x, y, GemmRows(rows.x_stride, rows.y_stride, rows.x_base, rows.y_base + w1.rows), label=label2,
            xq=xq)


def build_attn_kqv(ck, dl, b, w, cfg, cache_k, cache_v, i, xq=None):
    """From the queries in b["q"]: K/V products, q/k norm + RoPE, K/V appended to the cache, then causal GQA
    attention of the chunk's rows over cache + chunk into b["attn"] (llama.cpp build_attn)."""
    hd, nh, nkv, e = cfg.head_dim, cfg.n_head, cfg.n_head_kv, cfg.n_embd
    neighbour_gemms(ck, dl, w["attn_k"], w["attn_v"], b["xn"], b["kv"], GemmRows(e, 2 * nkv * hd),
                    (f"Kcur-{i}", f"Vcur-{i}", f"KVcur-{i}"), xq)
    ck.qk_norm_rope(dl, b["q"], w.get("attn_q_norm"), nh, hd, cfg.n_rot, cfg.rms_eps, cfg.rope_base, nh * hd,
                    label=f"Qcur_rope-{i}")
    ck.qk_norm_rope(dl, b["kv"], w.get("attn_k_norm"), nkv, hd, cfg.n_rot, cfg.rms_eps, cfg.rope_base, 2 * nkv * hd,
                    label=f"Kcur_rope-{i}")
    ck.kv_append(dl, b["kv"], cache_k, cache_v, nkv * hd, 0, nkv * hd, 2 * nkv * hd, label=f"kv_store-{i}")
    ck.attention(dl, b["q"], cache_k, cache_v, b["attn"], AttentionShape.of(cfg), label=f"kqv_out-{i}")


def build_attn(ck, dl, b, w, cfg, cache_k, cache_v, i, xq=None):
    """Causal GQA attention of the chunk's rows (q/k norm + RoPE, K/V appended first); h += attn_output(...)."""
    ck.gemm(dl, w["attn_q"], b["xn"], b["q"], GemmRows(cfg.n_embd, cfg.n_head * cfg.head_dim), label=f"Qcur-{i}",
            xq=xq)
    build_attn_kqv(ck, dl, b, w, cfg, cache_k, cache_v, i, xq)
    ck.gemm_quantised(dl, w["attn_output"], b["attn"], xq, b["h"], cfg.n_embd, accumulate=True,
                      label=f"attn_out-{i}")


def _moe_route(ck, dl, b, w, cfg, i, xq=None):
    """xn = ffn_norm(h); router logits; top-k per row; the picks grouped by expert (read back here when paging).
    xn stays in b["xn"] for the experts' and the shared expert's gate/up GEMMs (and quantised in xq, when given, for
    the int8 ones among them: the shared expert's, the fused routed gate/up)."""
    e = cfg.n_embd
    ck.rmsnorm(dl, b["h"], w["ffn_norm"], b["xn"], e, cfg.rms_eps, label=f"ffn_norm-{i}", xq=xq)
    ck.gemm(dl, w["ffn_gate_inp"], b["xn"], b["router"], GemmRows(e, cfg.n_expert), label=f"ffn_moe_logits-{i}")
    ck.router_topk(dl, b["router"], b["route_ids"], b["route_w"], cfg.n_expert, cfg.n_expert_used,
                   label=f"ffn_moe_topk-{i}")
    ck.moe_group(dl, b["route_ids"], b["grouped"], cfg.n_expert_used, cfg.n_expert, label=f"ffn_moe_group-{i}")


def _fused_ffn(ck, w, cfg) -> bool:
    """The routed FFN of this layer runs fused for few picks per expert (ChunkKernels.fused_gate_up)."""
    return ck.fused_gate_up(w["ffn_gate_exps"], w["ffn_up_exps"], w["ffn_down_exps"], cfg.n_expert_used,
                            cfg.n_expert)


def _moe_experts(ck, dl, b, w, cfg, i, slot_map, pool):
    """gate/up over each expert's picks (from the pick's token row of xn), SiLU·up, down (from the pick's own row of
    act). With few picks per expert (ChunkKernels.fused_gate_up) gate, up and SiLU·up are one dispatch that leaves
    act quantised for the down product (its Q8_0 codes and scales: 9/32 of the f32 rows' size, in b["act"])."""
    e, k, ffn = cfg.n_embd, cfg.n_expert_used, cfg.n_ff_exp
    streamed = (pool.buffers, pool.layout) if pool is not None else (None, None)
    route = ExpertRouting(k, cfg.n_expert, b["grouped"], slot_map, i * cfg.n_expert, b["mask"], *streamed)
    gate_up_shape = ExpertGemmShape(rows=ffn, x_stride=e, x_div=k)  # a pick reads its token's row of xn
    down_shape = ExpertGemmShape(rows=e, x_stride=ffn, x_div=1)  # a pick reads its own row of act
    gate, up, down = w["ffn_gate_exps"], w["ffn_up_exps"], w["ffn_down_exps"]
    if _fused_ffn(ck, w, cfg):  # xn quantised by the norm into b["xq"] (_moe_route)
        ck.expert_gate_up(dl, gate, up, b["xq"], b["act"], route, gate_up_shape, label=f"ffn_moe_gate_up-{i}")
        ck.expert_gemm(dl, down, b["act"], b["down"], route, down_shape, x_q8=True, label=f"ffn_moe_down-{i}")
        return
    for name, out in (("ffn_gate_exps", "gate"), ("ffn_up_exps", "up")):
        ck.expert_gemm(dl, w[name], b["xn"], b[out], route, gate_up_shape, label=f"ffn_moe_{out}-{i}")
    ck.kern.silu_mul(dl, b["gate"], b["up"], b["act"], ck.T * k * ffn, label=f"ffn_moe_swiglu-{i}")
    ck.expert_gemm(dl, down, b["act"], b["down"], route, down_shape, label=f"ffn_moe_down-{i}")


def build_moe_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=None) -> tuple:
    """h += the routed experts' sums over the chunk's rows (llama.cpp build_moe_ffn). Returns the dispatch indices
    (after the grouping, after the expert products) where a streamed pool cuts the list (Prefill.run_streamed)."""
    _moe_route(ck, dl, b, w, cfg, i, xq=xq)  # the fused routed FFN (_fused_ffn) reads it too
    after_group = dl.count
    _moe_experts(ck, dl, b, w, cfg, i, slot_map, pool)
    after_experts = dl.count
    ck.moe_combine(dl, b["route_w"], b["down"], b["h"], cfg.n_embd, cfg.n_expert_used, label=f"ffn_moe_out-{i}")
    return after_group, after_experts
