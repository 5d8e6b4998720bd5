"""Launchers for fused kernels: several small steps of a layer in one dispatch, fewer dispatches per token
(each costs a few µs of GPU front-end time however little it computes). Each records into a DispatchList through
a `Kernels` instance (its pipelines, its parameter buffers), like the launchers in kernels.py:

- moe_gate_up: the routed experts' gate and up products and silu(gate)·up (shaders/moe_gate_up.wgsl), over the
  resident pools or, with `StreamingKernels`, over the streamed pool (shaders/expert_gate_up.wgsl);
- moe_route_gate_up: the same over the resident pools with the router's top-k computed in the same dispatch;
- ffn_gate_up: the same for one dense pair (the shared expert);
- shexp_down_combine: the shared expert's down product, then the routed experts' weighted sum, the gated shared
  expert and the residual add.
"""
from .kernels import GpuMatrix, check_q8_cols, lanes_for, matvec_lanes, matvec_rows_per_group, xfmt


def moe_gate_up(kern, dl, gate, up, rows, k, x, act, route_ids, slot_map, map_base, label="ffn_moe_gate_up"):
    """act[k*rows + r] = silu(G_slot(k)[r]·x) · U_slot(k)[r]·x for the k routed experts; `gate` / `up` are the
    layer's ffn_gate_exps / ffn_up_exps (GpuMatrix pools, or the streamed pool's parts)."""
    if not isinstance(gate, GpuMatrix) or not isinstance(up, GpuMatrix):
        return _streamed_gate_up(kern, dl, gate, up, rows, k, x, act, route_ids, label)
    _record_gate_up(kern, dl, gate, up, rows, k, x, act, route_ids, slot_map, map_base, True, label)


def route_layout(n_exp: int, k: int) -> tuple:
    """(ids_base, w_base, words) of the buffer moe_route_gate_up works in: the router's logits at 0, the picked ids
    and their weights each at a 256-byte boundary (bound as views by the kernels after it)."""
    ids_base = -(-n_exp // 64) * 64
    w_base = ids_base + -(-k // 64) * 64
    return ids_base, w_base, w_base + k


def moe_route_gate_up(kern, dl, gate, up, rows, k, x, act, route, n_exp, slot_map, map_base,
                      label="ffn_moe_gate_up"):
    """moe_gate_up over resident pools, routing included: `route` holds the router's logits (route_layout); every
    workgroup ranks them (shaders/route_topk.wgsl) and one stores the ids and weights. Returns the (buffer, offset,
    size) views of the ids and of the weights for the down product and the block's sums."""
    if not isinstance(gate, GpuMatrix) or not isinstance(up, GpuMatrix):
        raise ValueError(f"{gate.name}: the routing gate/up product runs over resident pools only")
    if n_exp > 256 or k > 64 or k > n_exp:
        raise ValueError(f"router: {n_exp} experts top-{k} unsupported (<= 256 experts, k <= 64)")
    ids_base, w_base, _ = route_layout(n_exp, k)
    _record_gate_up(kern, dl, gate, up, rows, k, x, act, route, slot_map, map_base, True, label,
                    topk=(n_exp, ids_base, w_base))
    return (route, 4 * ids_base, 4 * k), (route, 4 * w_base, 4 * k)


def ffn_gate_up(kern, dl, gate: GpuMatrix, up: GpuMatrix, x, act, label="ffn_gate_up"):
    """act[r] = silu(G[r]·x) · U[r]·x for the rows of one dense pair (e.g. the shared expert)."""
    if gate.rows != up.rows:
        raise ValueError(f"{gate.name} has {gate.rows} rows, {up.name} {up.rows}")
    stand_in = kern.placeholder()
    _record_gate_up(kern, dl, gate, up, gate.rows, 1, x, act, stand_in, stand_in, 0, False, label)


def _record_gate_up(kern, dl, gate, up, rows, k, x, act, route, slot_map, map_base, routed, label, topk=None):
    """route: the routed ids (topk None) or the router's logits | ids | weights (topk = (n_exp, ids_base, w_base))."""
    for w in (gate, up):
        if len(w.bands) != 1:
            raise ValueError(f"{w.name}: a fused gate/up product needs each matrix in a single buffer per binding")
    if gate.cols != up.cols:
        raise ValueError(f"{gate.name} has {gate.cols} columns, {up.name} {up.cols}")
    nb = gate.cols // 32
    lanes = matvec_lanes(rows * k, nb, kern.lane_cap, kern.matvec_min_groups)
    n_exp, ids_base, w_base = topk or (0, 0, 0)
    params = kern._params("8I", rows, nb, map_base, n_exp, k, ids_base, w_base, 0, label=label)
    g, u = gate.bands[0][2], up.bands[0][2]
    binds = {0: params, 1: x, 2: act, 3: g[3], 5: route, 6: slot_map, 7: u[3]}
    if gate.fmt == "q8":
        binds[4] = g[4]
    if up.fmt == "q8":
        binds[8] = u[4]
    rows_per = min(2, matvec_rows_per_group(rows * k, lanes, kern.matvec_multi_row_groups))
    per_group = 64 // lanes * rows_per
    consts = {"WFMT": gate.fmt, "UFMT": up.fmt, "XFMT": xfmt(kern, gate.fmt, up.fmt), "LANES": lanes,
              "ROUTED": "true" if routed else "false", "ROWS": rows_per, "ROUTE": "topk" if topk else "ids"}
    kern._record(dl, "moe_gate_up.wgsl", consts, binds, ((rows + per_group - 1) // per_group, k), label)


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
        kern._residency_check(dl, gate.layer, k, route_ids)
    lay = pool.layout
    nb = gate.cols // 32
    lanes = lanes_for(nb, kern.lane_cap)
    per_group = 64 // lanes
    groups = ((rows + per_group - 1) // per_group, k)
    for b, buf in enumerate(pool.buffers):
        params = kern._params("12I", rows, nb, b, lay.slots_per_buffer, lay.slot_stride, gate.codes_off,
                              gate.scales_off, up.codes_off, up.scales_off, 0, 0, 0, label=label)
        binds = {0: params, 1: x, 2: act, 3: buf, 5: pool.route_slots}
        if gate.fmt == "q8":
            binds[4] = buf
        kern._record(dl, "expert_gate_up.wgsl", {"WFMT": gate.fmt, "XFMT": xfmt(kern, gate.fmt), "LANES": lanes},
                     binds, groups, f"{label}@pool{b}")


def shexp_down_combine(kern, dl, w_down: GpuMatrix, act, route_w, down, xn, gate_w, h, k,
                       label="ffn_moe_shexp_out"):
    """h[r] = h[r] + Σ_k route_w[k]·down[k*rows + r] + sigmoid(gate_w·xn)·(W_down[r]·act) for the rows of the
    shared expert's down matrix (one token): its product and the block's sums in one dispatch
    (shaders/shexp_down_combine.wgsl)."""
    if len(w_down.bands) != 1:
        raise ValueError(f"{w_down.name}: the fused shared-expert down product needs one buffer per binding")
    w_down.require_whole("shexp_down_combine")
    check_q8_cols(w_down)
    nb = w_down.cols // 32
    lanes = matvec_lanes(w_down.rows, nb, kern.lane_cap, kern.matvec_min_groups)
    rows_per = matvec_rows_per_group(w_down.rows, lanes, kern.matvec_multi_row_groups)
    params = kern._params("4I", w_down.rows, nb, k, w_down.rows, label=label)
    consts = {"WFMT": w_down.fmt, "XFMT": xfmt(kern, w_down.fmt), "LANES": lanes, "ROWS": rows_per}
    binds = {0: params, 1: act, 2: h, **w_down.bands[0][2], 5: route_w, 6: down, 7: xn, 8: gate_w}
    per_group = 64 // lanes * rows_per
    kern._record(dl, "shexp_down_combine.wgsl", consts, binds, (w_down.rows + per_group - 1) // per_group, label)


__all__ = ["moe_gate_up", "moe_route_gate_up", "route_layout", "ffn_gate_up", "shexp_down_combine"]
