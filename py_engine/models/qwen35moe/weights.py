"""qwen35moe's tensors by their GGUF names (llama.cpp llama_model_qwen35moe::load_arch_tensors), uploaded through the
engine's loader (engine/gpu_weights.py for a GGUF, engine/store_weights.py for a store)."""
from ...gpu.fused_kernels import down_combine_fits
from ..blocks import load_projections


def load(model, loader) -> None:
    """The dense trunk and each layer's tensors into model.layers (attention or DeltaNet by the layer pattern); the
    experts as each layer's pool (a streaming loader hands pool parts instead)."""
    c = model.cfg
    e = c.n_embd
    model.token_embd = loader.matrix("token_embd.weight", (c.n_vocab, e))
    model.output_norm = loader.vector("output_norm.weight", e)
    model.output = loader.matrix("output.weight", (c.n_vocab, e)) if loader.has("output.weight") else model.token_embd
    for i in range(c.n_layer):
        p = f"blk.{i}."
        w = {
            "attn_norm": loader.vector(p + "attn_norm.weight", e),
            # blocks.build_moe_ffn normalises with w["ffn_norm"]: here the post-attention norm
            "ffn_norm": loader.vector(p + "post_attention_norm.weight", e),
            "ffn_gate_inp_shexp": loader.vector(p + "ffn_gate_inp_shexp.weight", e),
            **(_load_pooled_experts(loader, c, p) or _load_experts(loader, c, p)),
        }
        w.update(_load_delta_net(loader, c, p) if c.recurrent[i] else _load_attention(loader, c, p))
        model.layers.append(w)


def _expert_parts(c, p):
    """(key, GGUF name, shape) of the router and of the routed and shared experts' matrices."""
    e, n, f, fs = c.n_embd, c.n_expert, c.n_ff_exp, c.n_ff_shexp
    return [("ffn_gate_inp", p + "ffn_gate_inp.weight", (n, e)),
            ("ffn_gate_exps", p + "ffn_gate_exps.weight", (n, f, e)),
            ("ffn_up_exps", p + "ffn_up_exps.weight", (n, f, e)),
            ("ffn_down_exps", p + "ffn_down_exps.weight", (n, e, f)),
            ("ffn_gate_shexp", p + "ffn_gate_shexp.weight", (fs, e)),
            ("ffn_up_shexp", p + "ffn_up_shexp.weight", (fs, e)),
            ("ffn_down_shexp", p + "ffn_down_shexp.weight", (e, fs))]


def _load_experts(loader, c, p):
    return {key: loader.matrix(name, shape, key.endswith("_exps")) for key, name, shape in _expert_parts(c, p)}


def _load_pooled_experts(loader, c, p):
    """The shared expert stacked into each pool after the routed experts (slot n_expert: ffn_{gate,up,down}_pool)
    and its gate vector under the router (ffn_router, the gate's logit after the experts'), so the decode runs it
    as one more expert of the routed dispatches (blocks.build_moe_ffn). The parts stay row views under their
    own keys (the prefill's GEMMs). None where they cannot be stacked: a loader that streams the experts, a shared
    expert of another width or type, or a block moe_down_combine cannot sum."""
    if c.n_ff_shexp != c.n_ff_exp or not down_combine_fits(c.n_expert_used, c.n_ff_exp, True):
        return None
    parts = {key: (name, shape) for key, name, shape in _expert_parts(c, p)}
    stacks = [("ffn_router", "ffn_gate_inp", (p + "ffn_gate_inp_shexp.weight", (c.n_embd,)))] + [
        (f"ffn_{m}_pool", f"ffn_{m}_exps", parts[f"ffn_{m}_shexp"]) for m in ("gate", "up", "down")]
    if not all(loader.can_stack(p + key, [parts[first], second]) for key, first, second in stacks):
        return None  # checked first: nothing is uploaded for stacks that cannot all be made
    built = [loader.stacked(p + key, [parts[first], second]) for key, first, second in stacks]
    w = {}
    for (key, first, second), (matrix, views) in zip(stacks, built):
        w[key] = matrix
        w[first] = views[parts[first][0]]
        if key != "ffn_router":
            w[first.replace("_exps", "_shexp")] = views[second[0]]
    return w


def _load_attention(loader, c, p):
    hd, e = c.head_dim, c.n_embd
    w = load_projections(loader, "attn_in", p + "attn_in", [
        ("attn_q", p + "attn_q.weight", (2 * c.n_head * hd, e)),  # [query | gate] per head
        ("attn_k", p + "attn_k.weight", (c.n_head_kv * hd, e)),
        ("attn_v", p + "attn_v.weight", (c.n_head_kv * hd, e))])
    return {
        **w,
        "attn_output": loader.matrix(p + "attn_output.weight", (e, c.n_head * hd)),
        "attn_q_norm": loader.vector(p + "attn_q_norm.weight", hd),
        "attn_k_norm": loader.vector(p + "attn_k_norm.weight", hd),
    }


def _load_delta_net(loader, c, p):
    e, nv = c.n_embd, c.ssm_dt_rank
    # beta | alpha first: gdn_recurrent reads its gates from 0 of the decode's buffer
    w = load_projections(loader, "dn_in", p + "dn_in", [
        ("ssm_beta", p + "ssm_beta.weight", (nv, e)),
        ("ssm_alpha", p + "ssm_alpha.weight", (nv, e)),
        ("attn_qkv", p + "attn_qkv.weight", (c.conv_channels, e)),
        ("attn_gate", p + "attn_gate.weight", (c.ssm_d_inner, e))])  # z
    return {
        **w,
        "ssm_conv1d": loader.vector(p + "ssm_conv1d.weight", c.conv_channels * c.ssm_conv_kernel),
        "ssm_dt": loader.vector(p + "ssm_dt.bias", nv),
        "ssm_a": loader.vector(p + "ssm_a", nv),
        "ssm_norm": loader.vector(p + "ssm_norm.weight", c.head_v_dim),
        "ssm_out": loader.matrix(p + "ssm_out.weight", (e, c.ssm_d_inner)),
    }
