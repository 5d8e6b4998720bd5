"""The per-token (decode) blocks the architectures share, recorded as kernel dispatches: stacked input
projections, the standard GQA attention with q/k norm + RoPE + KV cache (llama.cpp build_attn), the routed MoE over
a slot pool (build_moe_ffn) and the output head. Each architecture's decode.py strings them into its layers.

Intermediate names follow llama.cpp's graph callbacks (attn_norm, Qcur, Kcur, Vcur, kqv_out, ffn_moe_logits, ...).
"""
from ..gpu.kernels import (Q8_INPUT, DecodeAttentionShape, GpuMatrix, MoeRoute, NormedInput, q8_input_words,
                           xfmt)
from ..gpu.fused_kernels import (DecodeMoeShape, RoutedOutputs, can_down_combine, ffn_gate_up, moe_down_combine,
                                 moe_gate_up, moe_route_gate_up, route_layout, shexp_down_combine)


def load_projections(loader, key: str, name: str, parts) -> dict:
    """Matrices that multiply one input and whose outputs lie side by side in one activation buffer, in the order
    of `parts` ([(weight key, GGUF name, shape)]). Consecutive parts of one type are stacked into one matrix (one
    decode matvec for them all; loader.stacked) where they fit one binding, else loaded alone. Returns the weights
    by key (row views of the stack where stacked, for the prefill's GEMMs) and under `key` the decode's products:
    [(matrix, first value of its output in the buffer, label)]."""
    runs = []  # consecutive parts of one tensor type
    for part in parts:
        typ = loader.header.tensor(part[1]).type
        if runs and runs[-1][0] == typ:
            runs[-1][1].append(part)
        else:
            runs.append((typ, [part]))
    w, products, base = {}, [], 0
    for _, run in runs:
        stacked = None
        if len(run) > 1:
            try:
                stacked, views = loader.stacked(f"{name}.{run[0][0]}", [(n, shape) for _, n, shape in run])
            except ValueError:
                pass  # too large for one binding, or Q8_0 planes that cannot be joined: one product each
        if stacked is not None:
            w.update((k, views[n]) for k, n, _ in run)
            products.append((stacked, base, "+".join(k for k, _, _ in run)))
        for k, n, shape in run:
            if stacked is None:
                w[k] = loader.matrix(n, shape)
                products.append((w[k], base, k))
            base += shape[0]
    w[key] = products
    return w


def record_products(kern, dl, products, x, y, layer: int, norm: "NormedInput | None" = None):
    """The matvecs of a load_projections entry: y[base ..] = W·x for each (W, base, label). norm: multiply
    rmsnorm(x) · norm.weight instead, the norm fused into the first product (Kernels.matvec), which also leaves
    it in norm.xn_out for the others (first a product that can fuse it: Q8_0 weights with Q8_0 activations)."""
    fuser = next((i for i, (m, _, _) in enumerate(products) if xfmt(kern, m.fmt) == "q8"), 0)
    for i, (m, base, label) in sorted(enumerate(products), key=lambda e: e[0] != fuser):
        if norm is not None and i == fuser:
            kern.matvec(dl, m, x, y, y_base=base, label=f"{label}-{layer}", prep=norm)
        else:
            kern.matvec(dl, m, x if norm is None else norm.xn_out, y, y_base=base, label=f"{label}-{layer}")


def build_attn(kern, dl, acts, w: dict, layer: int, cache, cfg):
    """h += attn_output(attention(rope(norm(q)), rope(norm(k)), v)) of attn_norm(h) (llama.cpp build_attn, one
    token, cache appended first). `w` holds attn_norm, attn_output, attn_q_norm, attn_k_norm and "attn_in", the
    q | k | v products (load_projections) into acts["attn_in"]."""
    qkv = acts["attn_in"]  # q | k | v
    record_products(kern, dl, w["attn_in"], acts["h"], qkv, layer,
                    norm=NormedInput(w["attn_norm"], cfg.rms_eps, xn_out=acts["xn"]))
    kern.attention_appending(dl, qkv, w.get("attn_q_norm"), w.get("attn_k_norm"), cache.k[layer], cache.v[layer],
                             acts["attn"], decode_attention_shape(cfg, cfg.head_dim), label=f"kqv_out-{layer}")
    kern.matvec(dl, w["attn_output"], acts["attn"], acts["h"], accumulate=True, label=f"attn_out-{layer}")


def decode_attention_shape(cfg, q_stride: int) -> DecodeAttentionShape:
    """The decode attention's shape from the model's config: q heads at q_stride values (head_dim, or twice that
    where each head's query is followed by its output gate), then the k heads, then the v heads; q/k RMSNorm with
    the model's eps, scores scaled by 1/sqrt(head_dim)."""
    hd, nh, nkv = cfg.head_dim, cfg.n_head, cfg.n_head_kv
    k_base = nh * q_stride
    return DecodeAttentionShape(nh, nkv, hd, hd ** -0.5, n_rot=cfg.n_rot, eps=cfg.rms_eps, rope_base=cfg.rope_base,
                                q_stride=q_stride, k_base=k_base, v_base=k_base + nkv * hd)


def build_moe_ffn(kern, dl, acts, w: dict, layer: int, slot_map, map_base: int, cfg, shared: bool = False):
    """h += Σ_k w_k · down_k(silu(gate_k·x) ⊙ up_k·x) with x = ffn_norm(h): softmax over all experts, top-k (ties to
    the lower index), weights renormalised (llama.cpp build_moe_ffn with norm_w). Routing stays on the GPU: the
    expert kernels read the picked ids and map them to pool slots through `slot_map`. Gate, up and the SwiGLU are
    one dispatch (fused_kernels.moe_gate_up), which over resident pools also ranks the router's logits
    (moe_route_gate_up; streamed pools need the ids before their residency check: router_topk first).
    shared: the block also has a gated shared expert (qwen35moe), added in the same sums:
    h += sigmoid(ffn_gate_inp_shexp · x) · down_shexp(silu(gate_shexp · x) ⊙ up_shexp · x).
    Over resident pools the down products and the sums are one dispatch (moe_down_combine); where the loader stacked
    the shared expert into the pools as slot n_expert (w["ffn_*_pool"]) and its gate vector under the router
    (w["ffn_router"]), it runs in the same dispatches as one more expert. Otherwise the routed down, then the sums
    (shexp_down_combine after the shared expert's gate/up, else moe_combine)."""
    n, k, ffn = cfg.n_embd, cfg.n_expert_used, cfg.n_ff_exp
    pooled = shared and "ffn_gate_pool" in w
    if pooled:
        router, gate, up, down = w["ffn_router"], w["ffn_gate_pool"], w["ffn_up_pool"], w["ffn_down_pool"]
    else:
        router, gate, up, down = w["ffn_gate_inp"], w["ffn_gate_exps"], w["ffn_up_exps"], w["ffn_down_exps"]
    resident = isinstance(gate, GpuMatrix) and isinstance(up, GpuMatrix)
    # ffn_norm fused into the router's product, which leaves xn in acts["xn"] for the experts, and over resident
    # Q8_0 pools also quantised in acts["xq"]: the routed gate/up's workgroups copy its codes instead of each
    # quantising xn again
    x_q8 = resident and gate.fmt == up.fmt == "q8" and kern.takes_q8_input(gate) and n % 32 == 0
    kern.matvec(dl, router, acts["h"], acts["route" if resident else "router"],
                label=f"ffn_moe_logits-{layer}",
                prep=NormedInput(w["ffn_norm"], cfg.rms_eps, xn_out=acts["xn"],
                                 xq_out=acts["xq"] if x_q8 else None))
    shared_slot = cfg.n_expert if pooled else None
    shape = DecodeMoeShape(cfg.n_expert, k, ffn, shared_slot)
    if resident:
        ids, weights = moe_route_gate_up(kern, dl, gate, up, shape, acts["xq" if x_q8 else "xn"], acts["act"],
                                         MoeRoute(acts["route"], slot_map, map_base),
                                         label=f"ffn_moe_gate_up-{layer}", x_q8=x_q8)
    else:
        ids, weights = acts["route_ids"], acts["route_w"]
        kern.router_topk(dl, acts["router"], ids, weights, cfg.n_expert, k, renorm=True,
                         label=f"ffn_moe_topk-{layer}")
        moe_gate_up(kern, dl, gate, up, shape, acts["xn"], acts["act"], MoeRoute(ids, slot_map, map_base),
                    label=f"ffn_moe_gate_up-{layer}")
    if resident and (pooled or not shared) and can_down_combine(down, k, pooled):
        ids_base, w_base, _ = route_layout(cfg.n_expert, k)
        route = MoeRoute(acts["route"], slot_map, map_base, ids_base, w_base)
        moe_down_combine(kern, dl, down, n, k, acts["act"], route, acts["h"],
                         (shared_slot, cfg.n_expert) if pooled else None, label=f"ffn_moe_out-{layer}")
        return
    if pooled:
        raise ValueError(f"layer {layer}: the pools hold the shared expert but its block cannot be fused")
    kern.moe_matvec(dl, down, n, k, acts["act"], acts["down"], MoeRoute(ids, slot_map, map_base), x_stride=ffn,
                    label=f"ffn_moe_down-{layer}")
    if not shared:
        kern.moe_combine(dl, weights, acts["down"], acts["h"], n, k, label=f"ffn_moe_out-{layer}")
        return
    ffn_gate_up(kern, dl, w["ffn_gate_shexp"], w["ffn_up_shexp"], acts["xn"], acts["shexp_act"],
                label=f"ffn_shexp_gate_up-{layer}")
    shexp_down_combine(kern, dl, w["ffn_down_shexp"], acts["shexp_act"], RoutedOutputs(acts["down"], weights, k),
                       acts["xn"], w["ffn_gate_inp_shexp"], acts["h"], label=f"ffn_moe_shexp_out-{layer}")


def moe_act_values(cfg, shared_ffn: int = 0) -> int:
    """f32 values of acts["act"]: the k routed experts' SwiGLU outputs, then a shared expert's where the pools hold
    it, rounded up to a vec4 (moe_down_combine reads them as vec4s)."""
    return (cfg.n_expert_used * cfg.n_ff_exp + shared_ffn + 3) // 4 * 4


def output_buffers(cfg) -> list:
    """(name, f32 values) of the work buffers build_output uses beyond h and xn."""
    return [("xq", q8_input_words(cfg.n_embd)), ("logits", cfg.n_vocab), ("argmax", 2)]


def build_output(kern, dl, acts, output_norm, output: GpuMatrix, cfg):
    """The final norm, the output head and the logits' argmax. Where the head multiplies Q8_0 activations, the
    norm's dispatch also writes them quantised (acts["xq"]) and the head reads that as is: its ~15k workgroups
    (a 248k vocabulary) would otherwise each quantise the same 2048 values. The head's workgroups also leave the
    argmax's partials (one dispatch reduces them)."""
    xq = acts["xq"] if kern.takes_q8_input(output) else None
    kern.rmsnorm(dl, acts["h"], output_norm, acts["xn"], cfg.n_embd, cfg.rms_eps, xq=xq, label="result_norm")
    kern.matvec(dl, output, acts["xn"] if xq is None else xq, acts["logits"], prep=None if xq is None else Q8_INPUT,
                label="result_output", argmax_out=acts["argmax"])
