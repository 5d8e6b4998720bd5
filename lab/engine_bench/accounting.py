"""What one token must move and compute, counted from the GGUF's tensor table (no GPU needed).

Bytes a decoded token reads at the least: every dense matrix and vector once (the embedding only its one row,
unless the output head is tied to it), the k routed experts of every layer (their gate, up and down slices), the
KV cache rows attended to, and each recurrent layer's state (read and written). The GPU copies hold the same bytes
as the file (Q8_0 split into code and scale planes is still 34 bytes per 32 weights), so the file's sizes are the
GPU's. FLOPs: 2 per weight of every matrix used (multiply + add), 4 · heads · head_dim per attended position
(q·k and p·v), 7 per recurrent state value (decay, k·S, rank-1 update, q·S).
"""
import re

_EXPERT = re.compile(r"^blk\.(\d+)\.ffn_\w+_exps\.weight$")
_BLOCK = re.compile(r"^blk\.(\d+)\.")
STATE_PREFIXES = ("ssm_state.", "conv_window.")  # per-layer recurrent state kept across tokens (qwen35moe)
GDN_FLOPS_PER_STATE_VALUE = 7


def is_expert(name: str) -> bool:
    return _EXPERT.match(name) is not None


def used(t, n_layer: int) -> bool:
    """False for a block the decoder never runs (qwen35moe's MTP head after the last layer)."""
    block = _BLOCK.match(t.name)
    return not block or int(block.group(1)) < n_layer


def weight_bytes(header, n_layer: int) -> dict:
    """{"dense", "experts"}: bytes of the model's tensors as they sit on the GPU (all experts resident)."""
    dense = experts = 0
    for t in header.tensors:
        if not used(t, n_layer):
            continue
        if is_expert(t.name):
            experts += t.nbytes
        else:
            dense += t.nbytes
    return {"dense": dense, "experts": experts}


def _matrix_elements(t) -> int:
    return t.n_elements if len(t.dims) >= 2 else 0


def attention_layers(cfg, n_kv_layers: int) -> list:
    """(KV heads, head dim, window or None) of each layer with a KV cache: gemma4's vary by layer (sliding-window
    layers with their own head dim and KV heads), the Qwen models' are alike."""
    if isinstance(cfg.n_head_kv, (list, tuple)):
        return [(cfg.n_head_kv[i], cfg.layer_head_dim(i), cfg.n_swa if cfg.is_swa(i) else None)
                for i in range(cfg.n_layer)]
    return [(cfg.n_head_kv, cfg.head_dim, None)] * n_kv_layers


def per_token(header, cfg, n_kv_layers: int, kv_elt_bytes: int, state_values: int, ctx: float,
              state_layers: int = 0, state_elements_per_layer: int = 0) -> dict:
    """Bytes read and FLOPs of one decoded token attending to `ctx` cached positions.

    state_values: f32 values of recurrent state kept across tokens (all layers together); state_layers and
    state_elements_per_layer size the delta-rule FLOPs."""
    tied = "output.weight" not in header.tensors_by_name
    dense_bytes = expert_bytes_all = 0
    dense_flops = expert_elems_all = 0
    for t in header.tensors:
        if not used(t, cfg.n_layer):
            continue
        if is_expert(t.name):
            expert_bytes_all += t.nbytes
            expert_elems_all += t.n_elements
        elif t.name == "token_embd.weight":
            row = t.nbytes // cfg.n_vocab
            dense_bytes += t.nbytes + row if tied else row  # the embedded row (+ the whole head when tied)
            dense_flops += 2 * t.n_elements if tied else 0
        else:
            dense_bytes += t.nbytes
            dense_flops += 2 * _matrix_elements(t)
    k, n_exp = cfg.n_expert_used, cfg.n_expert
    expert_bytes = expert_bytes_all * k // n_exp  # k of the n experts of every layer
    expert_flops = 2 * expert_elems_all * k // n_exp
    kv_read = attn_flops = 0
    for kv_heads, head_dim, window in attention_layers(cfg, n_kv_layers):
        seen = min(ctx, window) if window else ctx  # a sliding-window layer reads its window's rows at most
        kv_read += 2 * seen * kv_heads * head_dim * kv_elt_bytes
        attn_flops += 4 * cfg.n_head * head_dim * seen
    kv_read, attn_flops = int(kv_read), int(attn_flops)
    state_bytes = 2 * 4 * state_values  # read and written back
    gdn_flops = GDN_FLOPS_PER_STATE_VALUE * state_layers * state_elements_per_layer
    total = dense_bytes + expert_bytes + kv_read + state_bytes
    return {"dense_weights": dense_bytes, "experts": expert_bytes, "kv_read": kv_read, "state": state_bytes,
            "total": total, "flops": dense_flops + expert_flops + attn_flops + gdn_flops,
            "weight_flops": dense_flops + expert_flops}
