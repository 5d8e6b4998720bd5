"""qwen3moe's per-chunk plan (the batched prefill): decode.py's layers with every token row of a chunk going
through each layer together (models/chunk_blocks.py)."""
from ..chunk_blocks import build_attn, build_moe_ffn


def quantised_row_cols(cfg) -> int:
    """Values per row of the widest rows the chunk quantises into its xq buffer: the norms' (n_embd) and the
    attention output product's input (gemm_quantised)."""
    return max(cfg.n_embd, cfg.n_head * cfg.head_dim)


def build_layer_attn(ck, dl, b, w, cfg, cache_k, cache_v, i, xq=None):
    """Causal GQA attention of the chunk's rows (q/k norm + RoPE, K/V appended first); h += attn_output(...)."""
    build_attn(ck, dl, b, w, cfg, cache_k, cache_v, i, xq=xq)


def build_layer_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=None) -> tuple:
    """The routed experts over the chunk's rows; returns their cut points."""
    return build_moe_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=xq)


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
        build_layer_attn(ck, dl, b, w, cfg, cache.k[i], cache.v[i], i, xq=xq)
        cuts.append((i, *build_layer_ffn(ck, dl, b, w, cfg, i, slot_map, pool, xq=xq)))
    return cuts
