"""qwen35moe's per-chunk plan (the batched prefill): decode.py's layers with every token row of a chunk going
through each layer together (models/chunk_blocks.py; the DeltaNet conv and recurrence sequential in the chunk's
rows inside their dispatches)."""
from ...gpu.chunk_shapes import DeltaNetShape, GemmRows
from ...gpu.qwen35_kernels import GdnShape, attn_output_gate, attn_q_split, gdn_gated_norm
from ..chunk_blocks import build_attn_kqv, build_moe_ffn, neighbour_gemms


def quantised_row_cols(cfg) -> int:
    """Values per row of the widest rows the chunk quantises into its xq buffer: the norms' (n_embd) and the
    inputs of the output products (gemm_quantised: attention, DeltaNet, shared expert down)."""
    cols = [cfg.n_embd, cfg.n_head * cfg.head_dim]
    if any(cfg.recurrent):
        cols.append(cfg.ssm_d_inner)
    if cfg.n_ff_shexp:
        cols.append(cfg.n_ff_shexp)
    return max(cols)


def build_layer_attn(ck, dl, b, w, cfg, cache_k, cache_v, i, xq=None):
    """Gated causal GQA attention of the chunk's rows: the q projection yields [query | gate] per head;
    h += attn_output(attention(...) · sigmoid(gate))."""
    hd, nh, e = cfg.head_dim, cfg.n_head, cfg.n_embd
    ck.gemm(dl, w["attn_q"], b["xn"], b["qg"], GemmRows(e, 2 * nh * hd), label=f"Qcur_full-{i}", xq=xq)
    attn_q_split(ck.kern, dl, b["qg"], b["q"], nh * ck.T, hd, label=f"Qcur-{i}")
    build_attn_kqv(ck, dl, b, w, cfg, cache_k, cache_v, i, xq)
    attn_output_gate(ck.kern, dl, b["qg"], b["attn"], nh * ck.T, hd, label=f"attn_gated-{i}")
    ck.gemm_quantised(dl, w["attn_output"], b["attn"], xq, b["h"], e, accumulate=True, label=f"attn_out-{i}")


def build_layer_attn_linear(ck, dl, b, w, cfg, window, state, i, xq=None):
    """Gated DeltaNet over the chunk: projections as GEMMs, the conv over all rows at once (then its ring kept), the
    recurrence in one dispatch (sequential in the chunk's rows inside the kernel), gated norm over all rows' heads,
    h += ssm_out(...)."""
    e, nv, dv = cfg.n_embd, cfg.ssm_dt_rank, cfg.head_v_dim
    ck.gemm(dl, w["attn_qkv"], b["xn"], b["qkv"], GemmRows(e, cfg.conv_channels), label=f"linear_attn_qkv_mixed-{i}",
            xq=xq)
    ck.gemm(dl, w["attn_gate"], b["xn"], b["z"], GemmRows(e, cfg.ssm_d_inner), label=f"z-{i}", xq=xq)
    neighbour_gemms(ck, dl, w["ssm_beta"], w["ssm_alpha"], b["xn"], b["ssm_gates"], GemmRows(e, 2 * nv),
                    (f"beta-{i}", f"alpha-{i}", f"beta_alpha-{i}"), xq)
    ck.gdn_conv(dl, b["qkv"], w["ssm_conv1d"], window, b["qkv_conv"], cfg.conv_channels, cfg.ssm_conv_kernel,
                label=f"conv_output_silu-{i}", keep_label=f"conv_keep-{i}")
    ck.gdn_recurrent(dl, b["qkv_conv"], b["ssm_gates"], (w["ssm_dt"], w["ssm_a"]), state, b["delta_out"],
                     b["gdn_qk"], DeltaNetShape.of(cfg), labels=(f"attn_output-{i}", f"delta_net_qk-{i}"))
    # the rows' heads are contiguous (row t head h at (t·nv + h)·dv in o, z and y): one dispatch over T·nv heads
    gdn_gated_norm(ck.kern, dl, b["delta_out"], w["ssm_norm"], b["z"], b["delta_normed"],
                   GdnShape(cfg.ssm_n_group, nv, cfg.ssm_d_state, dv, cfg.rms_eps, cfg.ssm_conv_kernel),
                   n_heads=nv * ck.T, label=f"final_output-{i}")
    ck.gemm_quantised(dl, w["ssm_out"], b["delta_normed"], xq, b["h"], e, accumulate=True,
                      label=f"linear_attn_out-{i}")


def _shared_expert(ck, dl, b, w, cfg, i, xq=None):
    """h += sigmoid(ffn_gate_inp_shexp · xn) · down_shexp(silu(gate_shexp · xn) ⊙ up_shexp · xn)."""
    e, fs = cfg.n_embd, cfg.n_ff_shexp
    gate, up, down = w["ffn_gate_shexp"], w["ffn_up_shexp"], w["ffn_down_shexp"]
    ck.gemm(dl, gate, b["xn"], b["shexp_gate"], GemmRows(e, fs), label=f"ffn_shexp_gate-{i}", xq=xq)
    ck.gemm(dl, up, b["xn"], b["shexp_up"], GemmRows(e, fs), label=f"ffn_shexp_up-{i}", xq=xq)
    ck.kern.silu_mul(dl, b["shexp_gate"], b["shexp_up"], b["shexp_act"], ck.T * fs, label=f"ffn_shexp_swiglu-{i}")
    ck.gemm_quantised(dl, down, b["shexp_act"], xq, b["shexp_out"], e, label=f"ffn_shexp-{i}")
    ck.record(dl, "shared_expert_gate.wgsl", {},
              {1: b["xn"], 2: w["ffn_gate_inp_shexp"], 3: b["shexp_out"], 4: b["h"]}, (ck.T, 1),
              f"ffn_shexp_gated-{i}", {"n": e})


def build_layer_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=None) -> tuple:
    """The routed experts then the shared expert over the chunk's rows; returns the routed part's cut points."""
    cut = build_moe_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=xq)
    _shared_expert(ck, dl, b, w, cfg, i, xq=xq)
    return cut


def record_chunk(model, ck, dl, b, acts, cache, slot_map, pool=None) -> list:
    """The whole chunk from the token ids to every layer's output rows in b["h"] (no logits: the prompt's last
    token runs through the per-token plan or the output head). Returns [(layer, after_group, after_experts)]."""
    cfg = model.cfg
    ck.embed(dl, model.token_embd, b["ids"], b["h"])
    # in Q8_0-activation mode each norm also writes its rows quantised, which its int8 products read as they are
    xq = b["xq"] if ck.quantised_rows else None
    cuts = []
    for i, w in enumerate(model.layers):
        ck.rmsnorm(dl, b["h"], w["attn_norm"], b["xn"], cfg.n_embd, cfg.rms_eps, label=f"attn_norm-{i}", xq=xq)
        if cfg.recurrent[i]:
            build_layer_attn_linear(ck, dl, b, w, cfg, acts[f"conv_window.{i}"], acts[f"ssm_state.{i}"], i, xq=xq)
        else:
            kv = model.kv_index[i]
            build_layer_attn(ck, dl, b, w, cfg, cache.k[kv], cache.v[kv], i, xq=xq)
        cuts.append((i, *build_layer_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=xq)))
    return cuts
