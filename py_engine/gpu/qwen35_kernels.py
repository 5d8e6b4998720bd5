"""Launchers for the kernels qwen35moe adds to the shared set (shaders/delta_net/gdn_*.wgsl, attention_q_split /
attention_output_gate, shared_expert_gate): each records one dispatch into a DispatchList through a `Kernels`
instance (its pipelines, its step uniform, its parameter buffers), like the launchers in kernels.py.
"""
from dataclasses import dataclass

from .kernels import InputGate

MAX_GDN_KEY_DIM = 256  # shaders/gdn_conv_recurrent.wgsl keeps one key head's q and k in workgroup memory
# Value columns per workgroup of the one-token recurrence (shaders/gdn_lanes.wgsl): its 256 lanes split each column's
# key rows over 256 / GDN_COLS lanes. 8 columns (512 workgroups, 4 rows per lane at dk 128) took ~38 µs per token
# off 32 columns' (128 workgroups of 16 rows per lane) on the H200, and 4 or 16 did less
# (docs/results/2026-12-04-h200-decode-kernels.json).
GDN_COLS = 8


def gdn_lane_consts(dk: int) -> dict:
    """gdn_lanes.wgsl's pipeline constants for key heads of dk: its loops and q/k arrays sized to dk rounded up to
    the lanes of a column, not to the largest key head."""
    slices = 256 // GDN_COLS
    return {"GDN_COLS": GDN_COLS, "MAX_DK": -(-dk // slices) * slices}


def _step_label(label: str, name: str) -> str:
    """The label of an unfused step before the product labelled `label`: `name-<layer>` for `<product>-<layer>`."""
    _, dash, layer = label.rpartition("-")
    return f"{name}-{layer}" if dash and layer.isdigit() else f"{label}_{name}"


@dataclass(frozen=True)
class GdnShape:
    """One Gated DeltaNet layer's shape for the decode launchers, built from the model's config: n_k_heads key
    heads of dk, n_v_heads value heads of dv, the norms' eps, the causal conv's kernel_size, and where the input
    products leave q | k | v (x_base) and z (z_base) in their output (beta_raw | alpha_raw from 0)."""
    n_k_heads: int
    n_v_heads: int
    dk: int
    dv: int
    eps: float
    kernel_size: int
    x_base: int = 0
    z_base: int = 0


@dataclass(frozen=True)
class GdnWeights:
    """The weights of one Gated DeltaNet layer's recurrence: ssm_conv1d, ssm_dt (the decay's bias), ssm_a and
    ssm_norm (the gated norm's, read only by the pregated output)."""
    conv: object
    dt_bias: object
    a: object
    norm: object = None


def gdn_conv_recurrent(kern, dl, dn, weights: GdnWeights, window, state, out, shape: GdnShape, label="delta_net",
                       sq_parts=None):
    """One token of Gated DeltaNet after its input products (shaders/gdn_conv_recurrent.wgsl): the causal conv + SiLU
    of q | k | v (key heads of dk, value heads of dv; read at dn[x_base ..], kept in `window`, a ring of kernel_size
    inputs) and the gated delta rule for every value head; dn holds beta_raw | alpha_raw (n_v_heads each) from 0,
    out gets o (n_v × dv). With sq_parts (pregated): out gets o · weights.norm · silu(z) instead (z from
    dn[z_base ..]), and sq_parts the sums of o² (gdn_sq_parts(dv) per head) for pregated_norm_product."""
    n_k_heads, n_v_heads, dk, dv = shape.n_k_heads, shape.n_v_heads, shape.dk, shape.dv
    kernel_size, norm_w = shape.kernel_size, weights.norm
    if dk > MAX_GDN_KEY_DIM:
        raise ValueError(f"gdn_conv_recurrent: key head dim {dk} > {MAX_GDN_KEY_DIM} is not supported")
    if n_v_heads % n_k_heads:
        raise ValueError(f"gdn_conv_recurrent: {n_v_heads} value heads is not a multiple of {n_k_heads} key heads")
    if kernel_size < 2:
        raise ValueError(f"gdn_conv_recurrent: conv kernel size {kernel_size} (needs >= 2)")
    k_base = n_k_heads * dk
    n_channels = 2 * k_base + n_v_heads * dv
    params = {"n_k_heads": n_k_heads, "n_v_heads": n_v_heads, "dk": dk, "dv": dv, "q_base": 0, "k_base": k_base,
              "v_base": 2 * k_base, "eps": shape.eps, "n": n_channels, "k": kernel_size, "x_base": shape.x_base,
              "z_base": shape.z_base}
    binds = {1: kern.step, 2: dn, 3: weights.conv, 4: window, 5: weights.dt_bias, 6: weights.a, 7: state, 8: out}
    out_kind = "plain"
    if sq_parts is not None:
        if norm_w is None:
            raise ValueError("gdn_conv_recurrent: the pregated output (sq_parts) needs the gated norm's weights")
        binds.update({9: norm_w, 10: sq_parts})
        out_kind = "pregated"
    kern.record(dl, "gdn_conv_recurrent.wgsl", {**gdn_lane_consts(dk), "GDN_OUT": out_kind}, binds,
                (-(-dv // GDN_COLS), n_v_heads), label, params)


def gdn_sq_parts(dv: int) -> int:
    """Partial sums of o² per value head that gdn_conv_recurrent(sq_parts=...) leaves: one per workgroup."""
    return -(-dv // GDN_COLS)


def pregated_norm_fits(kern, w, dv: int) -> bool:
    """Whether the DeltaNet's gated norm can be split between the recurrence (sq_parts) and w's staging
    (shaders/x_norm_pregated.wgsl): heads of whole 32-blocks, at most 64 partials a head, a product that takes an
    InputGate."""
    return dv % 32 == 0 and gdn_sq_parts(dv) <= 64 and kern.can_gate_input(w)


def pregated_norm_product(kern, dl, w, o_pre, sq_parts, dv, eps, y, label="ssm_out"):
    """y += W · (o_pre per head / sqrt(Σ its sq_parts / dv + eps)): the rest of the gated norm, after
    gdn_conv_recurrent(sq_parts=...), fused into the staging of the output product (pregated_norm_fits first)."""
    gate = InputGate("pregated", sq_parts, 0, gdn_sq_parts(dv), dv, eps=eps)
    kern.matvec(dl, w, o_pre, y, accumulate=True, label=label, prep=gate)


def gdn_gated_norm(kern, dl, o, norm_w, z, y, shape: GdnShape, n_heads=None, label="gated_norm"):
    """y = RMSNorm(o per head) · norm_w · silu(z[z_base ..]) over n_heads heads (default: shape.n_v_heads; a
    chunk's rows of heads side by side are more) of shape.dv values."""
    kern.record(dl, "gdn_gated_norm.wgsl", {}, {1: o, 2: norm_w, 3: z, 4: y},
                (shape.n_v_heads if n_heads is None else n_heads, 1), label,
                {"dv": shape.dv, "eps": shape.eps, "z_base": shape.z_base})


def gated_norm_product(kern, dl, w, o, norm_w, z, scratch, y, shape: GdnShape, label="ssm_out"):
    """y += W · (RMSNorm(o per head) · norm_w · silu(z[z_base ..])) over shape's value heads: the DeltaNet's gated
    norm fused into the staging of its output product (one dispatch) where the product can take it, else
    gdn_gated_norm into `scratch` first."""
    dv, z_base = shape.dv, shape.z_base
    if dv % 32 == 0 and z_base % 4 == 0 and kern.can_gate_input(w):
        gate = InputGate("gated", z, z_base, dv, dv, norm_w=norm_w, eps=shape.eps)
        kern.matvec(dl, w, o, y, accumulate=True, label=label, prep=gate)
        return
    gdn_gated_norm(kern, dl, o, norm_w, z, scratch, shape, label=_step_label(label, "final_output"))
    kern.matvec(dl, w, scratch, y, accumulate=True, label=label)


def gated_output_product(kern, dl, w, attn, qg, n_head, hd, y, label="attn_output"):
    """y += W · (attn · sigmoid(gate)), the gate being the second half of each head's [query | gate] in qg: fused
    into the staging of the output product where it can take it, else attn_output_gate in place first."""
    if hd % 32 == 0 and kern.can_gate_input(w):
        kern.matvec(dl, w, attn, y, accumulate=True, label=label, prep=InputGate("sgate", qg, hd, 2 * hd, hd))
        return
    attn_output_gate(kern, dl, qg, attn, n_head, hd, label=_step_label(label, "attn_gated"))
    kern.matvec(dl, w, attn, y, accumulate=True, label=label)


def attn_q_split(kern, dl, qg, q, n_head, hd, label="Qcur"):
    """q[h·hd + d] = qg[h·2hd + d]: the queries out of the joint query|gate projection."""
    kern.record(dl, "attention_q_split.wgsl", {}, {1: qg, 2: q}, (n_head * hd + 255) // 256, label,
                {"n_head": n_head, "hd": hd})


def attn_output_gate(kern, dl, qg, attn, n_head, hd, label="attn_gated"):
    """attn[h·hd + d] *= sigmoid(qg[h·2hd + hd + d])."""
    kern.record(dl, "attention_output_gate.wgsl", {}, {1: qg, 2: attn}, (n_head * hd + 255) // 256, label,
                {"n_head": n_head, "hd": hd})


def shared_expert_gate(kern, dl, x, gate_w, y, h, n, label="ffn_shexp_gated"):
    """h += sigmoid(gate_w · x) · y over n values."""
    kern.record(dl, "shared_expert_gate.wgsl", {}, {1: x, 2: gate_w, 3: y, 4: h}, (1, 1), label, {"n": n})


__all__ = ["GdnShape", "GdnWeights", "gdn_conv_recurrent", "gdn_sq_parts", "pregated_norm_fits", "pregated_norm_product",
           "gdn_gated_norm",
           "gated_norm_product", "gated_output_product",
           "attn_q_split", "attn_output_gate", "shared_expert_gate"]
