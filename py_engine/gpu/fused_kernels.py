"""Launchers for fused kernels: several small steps of a layer in one dispatch, fewer dispatches per token
(each costs a few µs of GPU front-end time however little it computes). Each records into a DispatchList through
a `Kernels` instance (its pipelines, its parameter buffers), like the launchers in kernels.py:

- moe_gate_up: the routed experts' gate and up products and silu(gate)·up (shaders/moe_gate_up.wgsl), over the
  resident pools or, with `StreamingKernels`, over the streamed pool (shaders/moe_pool_gate_up.wgsl);
- moe_route_gate_up: the same over the resident pools with the router's top-k computed in the same dispatch;
- ffn_gate_up: the same for one dense pair (the shared expert where the pools do not hold it);
- shexp_down_combine: the shared expert's down product, then the routed experts' weighted sum, the gated shared
  expert and the residual add;
- moe_down_combine: the routed experts' down products (and the shared expert's) and the block's sums, over the
  resident pools after moe_route_gate_up (a shared expert stacked into the pools after the routed ones runs in
  both as one more expert).
"""
from dataclasses import dataclass

from .kernels import (Q8_MAX_COLS, GpuMatrix, MoeRoute, check_q8_cols, lanes_for, matvec_lanes,
                      matvec_rows_per_group, xfmt)
from .workgroups import moe_down_workgroup


@dataclass(frozen=True)
class DecodeMoeShape:
    """A routed MoE block's shape for the decode's fused launchers, built from the model's config: n_expert
    experts, k picked per token, `rows` rows of an expert's gate and up matrices (its FFN width); shared_slot: the
    pools' slot of a shared expert stacked after the routed ones (None: no such expert)."""
    n_expert: int
    k: int
    rows: int
    shared_slot: "int | None" = None


@dataclass(frozen=True)
class RoutedOutputs:
    """The routed experts' down products of one token (k × rows values in `down`) and their weights, which the
    block's sums add up (shexp_down_combine)."""
    down: object
    weights: object
    k: int


def moe_gate_up(kern, dl, gate, up, shape: DecodeMoeShape, x, act, route: MoeRoute, label="ffn_moe_gate_up"):
    """act[k*rows + r] = silu(G_slot(k)[r]·x) · U_slot(k)[r]·x for the k routed experts (ids in route.picks);
    `gate` / `up` are the layer's ffn_gate_exps / ffn_up_exps (GpuMatrix pools, or the streamed pool's parts)."""
    rows, k = shape.rows, shape.k
    if not isinstance(gate, GpuMatrix) or not isinstance(up, GpuMatrix):
        return _streamed_gate_up(kern, dl, gate, up, rows, k, x, act, route.picks, label)
    _record_gate_up(kern, dl, gate, up, x, act, GateUpRoute(rows, k, route.picks, route.slot_map, route.map_base),
                    label)


@dataclass(frozen=True)
class GateUpRoute:
    """Which experts a fused gate/up product (shaders/moe_gate_up.wgsl) runs, k of `rows` rows each: `route` holds
    the routed ids (topk None) or the router's logits | ids | weights (topk = (n_exp, ids_base, w_base)), looked up
    in slot_map from map_base; routed False: one dense pair (route and slot_map stand-ins). shared_slot: one more
    expert, that slot of the pools, after the k routed ones."""
    rows: int
    k: int
    route: object
    slot_map: object
    map_base: int
    routed: bool = True
    topk: "tuple | None" = None
    shared_slot: "int | None" = None


def route_layout(n_exp: int, k: int) -> tuple:
    """(ids_base, w_base, words) of the buffer moe_route_gate_up works in: the router's logits at 0 (and a shared
    expert's gate logit at n_exp, where the router carries it as its last row), the picked ids and their weights
    each at a 256-byte boundary (bound as views by the kernels after it)."""
    ids_base = -(-(n_exp + 1) // 64) * 64
    w_base = ids_base + -(-k // 64) * 64
    return ids_base, w_base, w_base + k


def moe_route_gate_up(kern, dl, gate, up, shape: DecodeMoeShape, x, act, route: MoeRoute,
                      label="ffn_moe_gate_up", x_q8=False):
    """moe_gate_up over resident pools, routing included: route.picks holds the router's logits (route_layout);
    every workgroup ranks them (shaders/router_pick_topk.wgsl) and one more, which computes no product, also takes
    their softmax and stores the ids and weights. shape.shared_slot: the pools' slot of a shared expert, whose
    activations then follow the k routed experts' in `act`. Returns the (buffer,
    offset, size) views of the ids and of the weights for the down product and the block's sums. x_q8: x holds
    the input quantised ahead (Kernels.matvec's xq_out; both pools Q8_0 with Q8_0 activations): every workgroup
    copies its codes (shaders/x_stage_q8load.wgsl) instead of quantising it again."""
    rows, k, n_exp, route_buf = shape.rows, shape.k, shape.n_expert, route.picks
    if not isinstance(gate, GpuMatrix) or not isinstance(up, GpuMatrix):
        raise ValueError(f"{gate.name}: the routing gate/up product runs over resident pools only")
    if n_exp > 256 or k > 64 or k > n_exp:
        raise ValueError(f"router: {n_exp} experts top-{k} unsupported (<= 256 experts, k <= 64)")
    ids_base, w_base, _ = route_layout(n_exp, k)
    if x_q8 and (gate.fmt != "q8" or up.fmt != "q8" or xfmt(kern, gate.fmt) != "q8"):
        raise ValueError(f"{gate.name}: an input quantised ahead only for Q8_0 pools with Q8_0 activations")
    routing = GateUpRoute(rows, k, route_buf, route.slot_map, route.map_base, topk=(n_exp, ids_base, w_base),
                          shared_slot=shape.shared_slot)
    _record_gate_up(kern, dl, gate, up, x, act, routing, label, x_q8=x_q8)
    return (route_buf, 4 * ids_base, 4 * k), (route_buf, 4 * w_base, 4 * k)


def ffn_gate_up(kern, dl, gate: GpuMatrix, up: GpuMatrix, x, act, label="ffn_gate_up"):
    """act[r] = silu(G[r]·x) · U[r]·x for the rows of one dense pair (e.g. the shared expert)."""
    if gate.rows != up.rows:
        raise ValueError(f"{gate.name} has {gate.rows} rows, {up.name} {up.rows}")
    stand_in = kern.placeholder()
    _record_gate_up(kern, dl, gate, up, x, act, GateUpRoute(gate.rows, 1, stand_in, stand_in, 0, routed=False),
                    label)


def _record_gate_up(kern, dl, gate, up, x, act, routing: GateUpRoute, label, x_q8=False):
    """act = silu(G·x) · U·x for the k experts `routing` names (and its shared one) over its rows each."""
    topk, shared_slot, rows, k = routing.topk, routing.shared_slot, routing.rows, routing.k
    for w in (gate, up):
        if len(w.bands) != 1:
            raise ValueError(f"{w.name}: a fused gate/up product needs each matrix in a single buffer per binding")
    if gate.cols != up.cols:
        raise ValueError(f"{gate.name} has {gate.cols} columns, {up.name} {up.cols}")
    nb = gate.cols // 32
    lanes = matvec_lanes(rows * k, nb, kern.lane_cap, kern.matvec_min_groups)
    n_exp, ids_base, w_base = topk or (0, 0, 0)
    params = {"rows": rows, "nb": nb, "map_base": routing.map_base, "n_exp": n_exp, "k": k, "ids_base": ids_base,
              "w_base": w_base, "shared_slot": shared_slot or 0}
    g, u = gate.bands[0][2], up.bands[0][2]
    binds = {9 if x_q8 else 1: x, 2: act, 3: g[3], 5: routing.route, 6: routing.slot_map, 7: u[3]}
    if gate.fmt == "q8":
        binds[4] = g[4]
    if up.fmt == "q8":
        binds[8] = u[4]
    rows_per = min(2, matvec_rows_per_group(rows * k, lanes, kern.matvec_multi_row_groups))
    per_group = 64 // lanes * rows_per
    consts = {"WFMT": gate.fmt, "UFMT": up.fmt, "XFMT": "q8load" if x_q8 else xfmt(kern, gate.fmt, up.fmt),
              "LANES": lanes, "ROUTED": "true" if routing.routed else "false", "ROWS": rows_per,
              "ROUTE": "topk" if topk else "ids", "STAGED_BLOCKS": nb}
    # the rows of workgroups: the k experts', the shared expert's, and with the top-k the writer's
    # (router_pick_topk.wgsl)
    n_k = k + (shared_slot is not None) + (topk is not None)
    kern.record(dl, "moe_gate_up.wgsl", consts, binds, ((rows + per_group - 1) // per_group, n_k), label, params)


def _streamed_gate_up(kern, dl, gate, up, rows, k, x, act, route_ids, label):
    """The streamed pool (engine/expert_pool.py StreamingKernels): the layer's residency check first (as its
    moe_matvec does for the first product of a layer), then one dispatch per pool buffer."""
    pool = getattr(kern, "pool", None)
    if pool is None or not hasattr(kern, "splits"):
        raise ValueError(f"{gate.name}: streamed expert parts need the streaming kernels (StreamingKernels)")
    from ..engine.expert_pool import MAX_TOP_K  # the streaming side only: imports js
    if k > MAX_TOP_K:
        raise ValueError(f"top-{k} routing: the pool kernels handle at most {MAX_TOP_K} experts per token")
    if gate.layer != up.layer or gate.fmt != up.fmt or gate.cols != up.cols:
        raise ValueError(f"{gate.name} / {up.name}: a fused gate/up product needs parts of one layer, one format "
                         "and one width")
    for part in (gate, up):
        if part.rows != rows:
            raise ValueError(f"{part.name}: {part.rows} rows per expert, the model asked for {rows}")
    if not kern.splits or kern.splits[-1][0] != gate.layer:
        kern.residency_check(dl, gate.layer, k, route_ids)
    lay = pool.layout
    nb = gate.cols // 32
    lanes = lanes_for(nb, kern.lane_cap)
    per_group = 64 // lanes
    groups = ((rows + per_group - 1) // per_group, k)
    for b, buf in enumerate(pool.buffers):
        params = {"rows": rows, "nb": nb, "buf": b, "spb": lay.slots_per_buffer, "stride": lay.slot_stride,
                  "gate_codes": gate.codes_off, "gate_scales": gate.scales_off, "up_codes": up.codes_off,
                  "up_scales": up.scales_off}
        binds = {1: x, 2: act, 3: buf, 5: pool.route_slots}
        if gate.fmt == "q8":
            binds[4] = buf
        kern.record(dl, "moe_pool_gate_up.wgsl", {"WFMT": gate.fmt, "XFMT": xfmt(kern, gate.fmt), "LANES": lanes,
                                                  "STAGED_BLOCKS": nb},
                    binds, groups, f"{label}@pool{b}", params)


def shexp_down_combine(kern, dl, w_down: GpuMatrix, act, routed: RoutedOutputs, xn, gate_w, h,
                       label="ffn_moe_shexp_out"):
    """h[r] = h[r] + Σ_k weights[k]·down[k*rows + r] + sigmoid(gate_w·xn)·(W_down[r]·act) for the rows of the
    shared expert's down matrix (one token; down, weights and k from `routed`): its product and the block's sums in
    one dispatch (shaders/shared_expert_down_combine.wgsl)."""
    k = routed.k
    if len(w_down.bands) != 1:
        raise ValueError(f"{w_down.name}: the fused shared-expert down product needs one buffer per binding")
    w_down.require_whole("shexp_down_combine")
    check_q8_cols(w_down)
    nb = w_down.cols // 32
    lanes = matvec_lanes(w_down.rows, nb, kern.lane_cap, kern.matvec_min_groups)
    rows_per = matvec_rows_per_group(w_down.rows, lanes, kern.matvec_multi_row_groups)
    params = {"rows": w_down.rows, "nb": nb, "k": k, "n_gate": w_down.rows}
    consts = {"WFMT": w_down.fmt, "XFMT": xfmt(kern, w_down.fmt), "LANES": lanes, "ROWS": rows_per,
              "STAGED_BLOCKS": nb}
    binds = {1: act, 2: h, **w_down.bands[0][2], 5: routed.weights, 6: routed.down, 7: xn, 8: gate_w}
    per_group = 64 // lanes * rows_per
    kern.record(dl, "shared_expert_down_combine.wgsl", consts, binds, (w_down.rows + per_group - 1) // per_group,
                label, params)


MOE_DOWN_MAX_EXPERTS = 9  # k routed experts (+ the shared one) moe_down_combine.wgsl sums in one workgroup
# Rows per lane group of moe_down_combine: one. Every workgroup stages all k + 1 experts' activations; on the H200
# two rows (half the workgroups) still cost more GPU time per token (1.604 vs 1.568 ms on the 8-layer file).
MOE_DOWN_ROWS = 1


def can_down_combine(pool, k: int, shared: bool = False) -> bool:
    """Whether moe_down_combine takes this block: a resident pool in one buffer per binding, at most
    MOE_DOWN_MAX_EXPERTS experts whose activations fit one workgroup's staging."""
    if not isinstance(pool, GpuMatrix) or len(pool.bands) != 1 or pool.row_base:
        return False
    return down_combine_fits(k, pool.cols, shared)


def down_combine_fits(k: int, cols: int, shared: bool) -> bool:
    """Whether moe_down_combine can sum k routed experts (+ a shared one) of down matrices `cols` wide: one
    workgroup stages all their activations."""
    n_e = k + shared
    return cols % 32 == 0 and n_e <= MOE_DOWN_MAX_EXPERTS and n_e * cols <= Q8_MAX_COLS


def moe_down_combine(kern, dl, pool: GpuMatrix, rows: int, k: int, act, route: MoeRoute, h, shared=None,
                     label="ffn_moe_out"):
    """h[r] += Σ_k w_k · D_slot(k)[r]·a_k (+ g · D_shared[r]·a_shared) for the `rows` rows of an expert of the
    layer's down pool, in one dispatch (shaders/moe_down_combine.wgsl): `act` holds a_0 .. a_{k-1} (pool.cols values
    each), then a_shared; route.picks the ids at route.ids_base and the weights at route.w_base (route_layout).
    shared = (slot, gate_at): the shared expert is that slot of the pool, g = sigmoid(route.picks[gate_at]). Only
    where can_down_combine."""
    if not can_down_combine(pool, k, shared is not None):
        raise ValueError(f"{pool.name}: moe_down_combine cannot take this block (see can_down_combine)")
    nb = pool.cols // 32
    n_e = k + (shared is not None)
    lanes = matvec_lanes(rows, nb, kern.lane_cap, kern.matvec_min_groups)
    rows_per = MOE_DOWN_ROWS
    wg = moe_down_workgroup(n_e, nb, rows_per)
    slot, gate_at = shared or (0, 0)
    params = {"rows": rows, "nb": nb, "k": k, "map_base": route.map_base, "ids_base": route.ids_base,
              "w_base": route.w_base, "shared_slot": slot, "gate_at": gate_at}
    consts = {"WFMT": pool.fmt, "XFMT": xfmt(kern, pool.fmt), "LANES": lanes, "ROWS": rows_per,
              "SHARED": "true" if shared is not None else "false", "N_E": n_e, "STAGED_BLOCKS": n_e * nb,
              "WG": wg}
    per_group = wg // lanes * rows_per
    binds = {1: act, 2: h, **pool.bands[0][2], 5: route.picks, 6: route.slot_map}
    kern.record(dl, "moe_down_combine.wgsl", consts, binds, (rows + per_group - 1) // per_group, label, params)


__all__ = ["DecodeMoeShape", "RoutedOutputs", "moe_gate_up", "moe_route_gate_up", "route_layout", "ffn_gate_up",
           "shexp_down_combine", "can_down_combine", "down_combine_fits", "moe_down_combine"]
