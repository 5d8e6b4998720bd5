"""The fused kernels (py_engine/gpu/fused_kernels.py: routed and dense gate/up + SwiGLU in one dispatch, over the
resident pools (also with the router's top-k in the same dispatch) and over streamed pool buffers; routed sum + gated shared expert + residual add; the routed and shared down products with the block's sums) on a real WebGPU
device (Dawn on lavapipe in Node, through Pyodide) against numpy.

CPython writes the inputs to a temporary folder; one Node process runs every case and writes the outputs back.
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS, q8_row_words
from diskformer.reference.layers import fake_quantize_q8_0


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu import fused_kernels
from py_engine.gpu.fused_kernels import DecodeMoeShape, RoutedOutputs
from py_engine.gpu.kernels import MoeRoute

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)

    def buf(name):
        return upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)

    def matrix(name, fmt, rows, cols):
        bufs = {3: buf(name + "_codes"), 4: buf(name + "_scales")} if fmt == "q8" else {3: buf(name)}
        return GpuMatrix(name, fmt, rows, cols, [(0, rows, bufs)])

    for a in spec:
        extra = {}
        kern = Kernels(gpu, pipes, step, lane_cap=a.get("lane_cap", 16),
                       matvec_multi_row_groups=a.get("multi_row_groups", 256), matvec_min_groups=a.get("min_groups", 0))
        dl = DispatchList()
        out = storage_buffer(gpu, a["out_len"] * 4, "out") if "out_len" in a else None
        async with GpuErrorScope(gpu, "recording " + a["name"]):
            if a["kernel"] == "moe_gate_up":
                g = matrix(a["gate"], a["gfmt"], a["slots"] * a["rows"], a["cols"])
                u = matrix(a["up"], a["ufmt"], a["slots"] * a["rows"], a["cols"])
                fused_kernels.moe_gate_up(kern, dl, g, u, DecodeMoeShape(a["slots"], a["k"], a["rows"]), buf(a["x"]),
                                          out, MoeRoute(buf(a["ids"]), buf(a["slot_map"]), a["map_base"]))
            elif a["kernel"] == "moe_route_gate_up":
                g = matrix(a["gate"], a["gfmt"], a["slots"] * a["rows"], a["cols"])
                u = matrix(a["up"], a["ufmt"], a["slots"] * a["rows"], a["cols"])
                route = buf(a["route"])
                shape = DecodeMoeShape(a["n_exp"], a["k"], a["rows"], a["shared_slot"])
                ids, weights = fused_kernels.moe_route_gate_up(kern, dl, g, u, shape, buf(a["x"]), out,
                                                               MoeRoute(route, buf(a["slot_map"]), a["map_base"]),
                                                               x_q8=a["x_q8"])
                extra = {"ids": ids, "w": weights}  # views of route, for the kernels after it
                assert ids[0] is route and weights[0] is route and ids[1] % 256 == 0 and weights[1] % 256 == 0
            elif a["kernel"] == "ffn_gate_up":
                g = matrix(a["gate"], a["gfmt"], a["rows"], a["cols"])
                u = matrix(a["up"], a["ufmt"], a["rows"], a["cols"])
                fused_kernels.ffn_gate_up(kern, dl, g, u, buf(a["x"]), out)
            elif a["kernel"] == "expert_gate_up":
                # the shader the streamed launcher records, one dispatch per pool buffer (as it does)
                slots = buf(a["route_slots"])
                nb = a["cols"] // 32
                lanes = 64 // a["per_group"]
                for b in range(a["n_buffers"]):
                    gc, gs, uc, us = a["offsets"]
                    params = {"rows": a["rows"], "nb": nb, "buf": b, "spb": a["spb"], "stride": a["stride"],
                              "gate_codes": gc, "gate_scales": gs, "up_codes": uc, "up_scales": us}
                    pool = buf(f"{a['pool']}{b}")
                    binds = {1: buf(a["x"]), 2: out, 3: pool, 5: slots}
                    if a["fmt"] == "q8":
                        binds[4] = pool
                    kern.record(dl, "moe_pool_gate_up.wgsl", {"WFMT": a["fmt"], "XFMT": a["fmt"], "LANES": lanes,
                                                              "STAGED_BLOCKS": nb}, binds,
                                ((a["rows"] + a["per_group"] - 1) // a["per_group"], a["k"]), a["name"], params)
            elif a["kernel"] == "shexp_down_combine":
                out = buf(a["h"])
                wd = matrix(a["w_down"], a["fmt"], a["n"], a["cols"])
                routed = RoutedOutputs(buf(a["down"]), buf(a["route_w"]), a["k"])
                fused_kernels.shexp_down_combine(kern, dl, wd, buf(a["act"]), routed, buf(a["x"]), buf(a["gate_w"]),
                                                 out)
            elif a["kernel"] == "down_combine":
                # moe_down_combine; without a shared expert also the dispatches it replaces (moe_matvec, moe_combine)
                n, ffn, k = a["n"], a["ffn"], a["k"]
                pool = matrix(a["pool"], a["fmt"], a["slots"] * n, ffn)
                route, slot_map = buf(a["route"]), buf(a["slot_map"])
                out, h_ref, act = buf(a["h"]), buf(a["h"]), buf(a["act"])
                shared = (a["shared_slot"], a["gate_at"]) if a["shared"] else None
                assert fused_kernels.can_down_combine(pool, k, a["shared"])
                fused_kernels.moe_down_combine(kern, dl, pool, n, k, act,
                                               MoeRoute(route, slot_map, a["map_base"], a["ids_base"], a["w_base"]),
                                               out, shared)
                if not a["shared"]:
                    down = storage_buffer(gpu, 4 * k * n, "down")
                    kern.moe_matvec(dl, pool, n, k, act, down,
                                    MoeRoute((route, 4 * a["ids_base"], 4 * k), slot_map, a["map_base"]),
                                    x_stride=ffn)
                    kern.moe_combine(dl, (route, 4 * a["w_base"], 4 * k), down, h_ref, n, k)
                    extra = {"ref": (h_ref, 0, 4 * n)}
        dl.submit(gpu)
        data = await rb.read(out, 0, int(out.size))
        (d / f"out_{a['name']}.bin").write_bytes(data)
        for tag, (b, off, size) in extra.items():
            (d / f"out_{a['name']}_{tag}.bin").write_bytes(await rb.read(b, off, size))
        check_errors(gpu, a["name"])
    return {"cases": len(spec)}
'''


def silu(v):
    return v / (1.0 + np.exp(-v))


class Cases:
    def __init__(self, folder, rng):
        self.dir, self.rng = folder, rng
        self.spec, self.expect = [], {}

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        return name

    def weights(self, name, fmt, rows, cols):
        """Random Q8_0 planes (codes, f16 scales) or F32 values; returns the dequantised matrix (float64)."""
        if fmt == "f32":
            w = (self.rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)
            self.arr(name, w)
            return w.astype(np.float64)
        codes = self.rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
        scales = (self.rng.random((rows, cols // 32)) * 0.004 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        blocks = codes.reshape(rows, cols // 32, 32).astype(np.float64) * scales[:, :, None].astype(np.float64)
        return blocks.reshape(rows, cols)

    def add(self, expect, **case):
        self.spec.append(case)
        self.expect[case["name"]] = expect


def operand(x, fmt):
    """What a product with weights of `fmt` multiplies: Q8_0 quantises its input as llama.cpp does."""
    return (fake_quantize_q8_0(x) if fmt == "q8" else x).astype(np.float64)


def routed_cases(c, gfmt, ufmt, k, rows, cols, lane_cap, two_rows=False):
    """A pool of 7 slots; layer base 3 in the slot map; ids whose slots come out permuted. two_rows: every lane
    group takes 2 rows (the launch of large pools), the last one partial where rows is odd."""
    name = f"moe_{gfmt}_{ufmt}_k{k}_r{rows}_c{cols}_l{lane_cap}" + ("_2rows" if two_rows else "")
    slots, n_exp, base = 7, 6, 3
    G = c.weights(name + "_g", gfmt, slots * rows, cols).reshape(slots, rows, cols)
    U = c.weights(name + "_u", ufmt, slots * rows, cols).reshape(slots, rows, cols)
    x = c.rng.standard_normal(cols).astype(np.float32)
    perm = c.rng.permutation(slots)[:n_exp]
    slot_map = np.concatenate([np.full(base, 99), perm]).astype(np.uint32)
    ids = c.rng.permutation(n_exp)[:k].astype(np.uint32)
    c.arr(name + "_x", x)
    c.arr(name + "_map", slot_map)
    c.arr(name + "_ids", ids)
    xg, xu = operand(x, gfmt), operand(x, ufmt)
    want = np.concatenate([silu(G[perm[e]] @ xg) * (U[perm[e]] @ xu) for e in ids])
    c.add(want, name=name, kernel="moe_gate_up", gate=name + "_g", up=name + "_u", gfmt=gfmt, ufmt=ufmt,
          slots=slots, rows=rows, cols=cols, k=k, x=name + "_x", ids=name + "_ids", slot_map=name + "_map",
          map_base=base, out_len=k * rows, lane_cap=lane_cap, **({"multi_row_groups": 0} if two_rows else {}))


def route_case(c, n_exp, k, ties, shared=False, x_q8=False):
    """The router's top-k inside the routed gate/up product: logits in the route buffer (with ties when asked:
    the lower expert index must win), every expert's slot a permutation; the ids and weights come back for the
    kernels after it. shared: the pools hold one more slot, a shared expert, computed after the k picked ones.
    x_q8: x given quantised ahead (the router's xq_out layout), each workgroup copying its codes."""
    name = route_name(n_exp, k, ties, shared, x_q8)
    rows, cols, fmt = 24, 64, "q8"
    slots = n_exp + shared
    G = c.weights(name + "_g", fmt, slots * rows, cols).reshape(slots, rows, cols)
    U = c.weights(name + "_u", fmt, slots * rows, cols).reshape(slots, rows, cols)
    x = c.rng.standard_normal(cols).astype(np.float32)
    logits = c.rng.standard_normal(n_exp).astype(np.float32)
    if ties:
        logits = np.round(logits * 2) / 2  # many equal values
    route = np.full(n_exp + 256, 7.0, np.float32)  # room for the ids and weights (route_layout)
    route[:n_exp] = logits
    base = 2
    perm = c.rng.permutation(n_exp).astype(np.uint32)
    c.arr(name + "_x", q8_row_words([x]) if x_q8 else x)
    c.arr(name + "_map", np.concatenate([np.full(base, 99, np.uint32), perm]))
    c.arr(name + "_route", route)
    picked = np.argsort(-logits, kind="stable")[:k]
    lw = logits[picked].astype(np.float64)
    weights = np.exp(lw - lw.max()) / np.exp(lw - lw.max()).sum()
    xd = operand(x, fmt)
    slots_run = [perm[e] for e in picked] + ([n_exp] if shared else [])
    act = np.concatenate([silu(G[s] @ xd) * (U[s] @ xd) for s in slots_run])
    c.add((act, picked, weights), name=name, kernel="moe_route_gate_up", gate=name + "_g",
          up=name + "_u", gfmt=fmt, ufmt=fmt, slots=slots, rows=rows, cols=cols, k=k, x=name + "_x",
          route=name + "_route", n_exp=n_exp, slot_map=name + "_map", map_base=base, out_len=len(act),
          shared_slot=n_exp if shared else None, x_q8=x_q8)


def route_name(n_exp, k, ties, shared=False, x_q8=False):
    return f"route_e{n_exp}_k{k}" + ("_ties" if ties else "") + ("_shared" if shared else "") + ("_xq" if x_q8 else "")


def dense_case(c, gfmt, ufmt, rows, cols, min_groups=0):
    name = f"dense_{gfmt}_{ufmt}_r{rows}_c{cols}_m{min_groups}"
    G = c.weights(name + "_g", gfmt, rows, cols)
    U = c.weights(name + "_u", ufmt, rows, cols)
    x = c.rng.standard_normal(cols).astype(np.float32)
    c.arr(name + "_x", x)
    c.add(silu(G @ operand(x, gfmt)) * (U @ operand(x, ufmt)), name=name, kernel="ffn_gate_up", gate=name + "_g", up=name + "_u", gfmt=gfmt,
          ufmt=ufmt, rows=rows, cols=cols, x=name + "_x", out_len=rows, min_groups=min_groups)


def streamed_case(c, fmt):
    """Records of [gate codes | gate scales | up codes | up scales] (256-byte aligned parts, as the store lays
    them out) in 2 pool buffers of 3 slots; k = 4 picks slots in both buffers and one absent expert."""
    name = f"pool_{fmt}"
    rows, cols, spb, k = 24, 64, 3, 4
    align = lambda n: (n + 255) // 256 * 256  # noqa: E731
    if fmt == "q8":
        codes_b, scales_b = rows * cols, rows * cols // 16
    else:
        codes_b, scales_b = 4 * rows * cols, 0
    gc = 0
    gs = align(gc + codes_b)
    uc = align(gs + scales_b)
    us = align(uc + codes_b)
    stride = align(us + scales_b)
    pools = [bytearray(spb * stride) for _ in range(2)]
    mats = {}
    for slot in range(2 * spb):
        record = pools[slot // spb]
        at = (slot % spb) * stride
        for part, co, so in (("g", gc, gs), ("u", uc, us)):
            tag = f"{name}_{slot}{part}"
            mats[slot, part] = c.weights(tag, fmt, rows, cols)
            if fmt == "q8":
                codes = (c.dir / f"in_{tag}_codes.bin").read_bytes()
                scales = (c.dir / f"in_{tag}_scales.bin").read_bytes()
                record[at + co:at + co + len(codes)] = codes
                record[at + so:at + so + len(scales)] = scales
            else:
                vals = (c.dir / f"in_{tag}.bin").read_bytes()
                record[at + co:at + co + len(vals)] = vals
    for b in range(2):
        c.arr(f"{name}{b}", np.frombuffer(bytes(pools[b]), np.uint8))
    route_slots = np.array([4, 0xFFFFFFFF, 1, 5], np.uint32)
    c.arr(name + "_slots", route_slots)
    x = c.rng.standard_normal(cols).astype(np.float32)
    c.arr(name + "_x", x)
    xd = operand(x, fmt)
    want = np.concatenate([np.zeros(rows) if s == 0xFFFFFFFF else
                           silu(mats[s, "g"] @ xd) * (mats[s, "u"] @ xd) for s in route_slots])
    c.add(want, name=name, kernel="expert_gate_up", fmt=fmt, pool=name, n_buffers=2, spb=spb, stride=stride,
          offsets=[gc, gs, uc, us], rows=rows, cols=cols, k=k, per_group=32, x=name + "_x",
          route_slots=name + "_slots", out_len=k * rows)


def combine_case(c, fmt, n, k, cols, multi_row_groups, min_groups=0):
    """The shared expert's down product (n rows x cols) fused with the block's sums into h."""
    name = f"combine_{fmt}_n{n}_k{k}_c{cols}_m{multi_row_groups}" + (f"_w{min_groups}" if min_groups else "")
    h = c.rng.standard_normal(n).astype(np.float32)
    route_w = c.rng.random(k).astype(np.float32)
    down = c.rng.standard_normal(k * n).astype(np.float32)
    x = c.rng.standard_normal(n).astype(np.float32)
    gate_w = (c.rng.standard_normal(n) * 0.1).astype(np.float32)
    wd = c.weights(name + "_wd", fmt, n, cols)
    act = c.rng.standard_normal(cols).astype(np.float32)
    for tag, a in (("h", h), ("rw", route_w), ("down", down), ("x", x), ("gw", gate_w), ("act", act)):
        c.arr(f"{name}_{tag}", a)
    d = lambda a: a.astype(np.float64)  # noqa: E731
    gate = 1.0 / (1.0 + np.exp(-(d(gate_w) @ d(x))))
    want = d(h) + d(route_w) @ d(down).reshape(k, n) + gate * (wd @ operand(act, fmt))
    c.add(want, name=name, kernel="shexp_down_combine", fmt=fmt, w_down=name + "_wd", cols=cols, act=name + "_act",
          h=name + "_h", route_w=name + "_rw", down=name + "_down", x=name + "_x", gate_w=name + "_gw", n=n, k=k,
          multi_row_groups=multi_row_groups, min_groups=min_groups)


def down_combine_case(c, fmt, n, ffn, k, shared):
    """The end of a MoE block: k routed experts' down products from a pool of 11 slots (layer base 5 in the slot map,
    the ids and weights where moe_route_gate_up leaves them), with `shared` also slot 10 (the shared expert stacked
    after the routed ones) gated by sigmoid(route[gate_at]), summed into h."""
    name = f"down_{fmt}_n{n}_f{ffn}_k{k}" + ("_shared" if shared else "")
    slots, n_exp, base, shared_slot = 11, 9, 5, 10
    D = c.weights(name + "_pool", fmt, slots * n, ffn).reshape(slots, n, ffn)
    perm = c.rng.permutation(shared_slot)[:n_exp].astype(np.uint32)
    ids = c.rng.permutation(n_exp)[:k].astype(np.uint32)
    gate_at, ids_base, w_base = n_exp, 64, 128
    route = np.zeros(w_base + 64, np.uint32)
    route[ids_base:ids_base + k] = ids
    w = c.rng.random(k).astype(np.float32)
    route[w_base:w_base + k] = w.view(np.uint32)
    logit = np.float32(c.rng.standard_normal())
    route[gate_at] = logit.view(np.uint32)
    act = (c.rng.standard_normal((k + 1) * ffn) * 0.5).astype(np.float32)
    h = c.rng.standard_normal(n).astype(np.float32)
    for tag, a in (("route", route), ("map", np.concatenate([np.full(base, 99, np.uint32), perm])), ("act", act),
                   ("h", h)):
        c.arr(f"{name}_{tag}", a)
    want = h.astype(np.float64) + sum(
        float(w[e]) * (D[perm[ids[e]]] @ operand(act[e * ffn:(e + 1) * ffn], fmt)) for e in range(k))
    if shared:
        g = 1.0 / (1.0 + np.exp(-float(logit)))
        want = want + g * (D[shared_slot] @ operand(act[k * ffn:], fmt))
    c.add(want, name=name, kernel="down_combine", fmt=fmt, n=n, ffn=ffn, k=k, shared=shared, slots=slots,
          pool=name + "_pool", route=name + "_route", ids_base=ids_base, w_base=w_base, gate_at=gate_at,
          shared_slot=shared_slot, slot_map=name + "_map", map_base=base, act=name + "_act", h=name + "_h")


# (gfmt, ufmt, k, rows, cols, lane cap); c256 / c320 at 2 lanes: several two-block steps per lane, then the tail
ROUTED = [("q8", "q8", 1, 40, 128, 16), ("q8", "q8", 3, 40, 128, 4), ("q8", "q8", 6, 33, 96, 16),
          ("f32", "f32", 2, 40, 128, 16), ("q8", "f32", 4, 17, 64, 1), ("f32", "q8", 3, 64, 256, 16),
          ("q8", "q8", 3, 40, 256, 2), ("f32", "q8", 2, 24, 320, 2)]
ROUTED_TWO_ROWS = [("q8", "q8", 6, 33, 96, 16), ("f32", "q8", 3, 17, 64, 4), ("q8", "q8", 8, 64, 128, 16),
                   ("q8", "q8", 5, 33, 320, 2)]
DENSE = [("q8", "q8", 70, 128, 0), ("f32", "f32", 30, 96, 0), ("q8", "q8", 40, 2048, 1 << 20)]  # last: 64 lanes
ROUTES = [(256, 8, False), (256, 8, True), (13, 4, True), (6, 6, False), (256, 8, False, True), (13, 4, True, True),
          (256, 8, False, True, True), (13, 4, True, False, True)]  # the last two: x quantised ahead
COMBINE = [("q8", 300, 3, 64, 256), ("q8", 256, 8, 128, 0), ("f32", 40, 1, 96, 256), ("q8", 70, 2, 512, 0),
           ("q8", 70, 2, 2048, 0, 1 << 20)]  # the last widened to 64 lanes per row (matvec_lanes)
# (fmt, n, ffn, k, shared): the real shape's 8 + 1 experts of 16 blocks, rows not a multiple of a workgroup's, F32,
# more blocks per row than lanes, one expert, no shared expert (qwen3moe), 4-block steps (64 blocks on 16 lanes)
DOWN_COMBINE = [("q8", 200, 512, 8, True), ("q8", 70, 64, 3, True), ("f32", 40, 96, 2, True),
                ("q8", 90, 1024, 4, True), ("q8", 66, 128, 1, False), ("f32", 33, 64, 8, False),
                ("q8", 50, 2048, 2, True)]


@pytest.fixture(scope="module")
def fused_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("fused")
    c = Cases(d, np.random.default_rng(11))
    for case in ROUTED:
        routed_cases(c, *case)
    for case in ROUTED_TWO_ROWS:
        routed_cases(c, *case, two_rows=True)
    for case in DENSE:
        dense_case(c, *case)
    for case in ROUTES:
        route_case(c, *case)
    for fmt in ("q8", "f32"):
        streamed_case(c, fmt)
    for case in COMBINE:
        combine_case(c, *case)
    for case in DOWN_COMBINE:
        down_combine_case(c, *case)
    (d / "spec.json").write_text(json.dumps(c.spec))
    run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return c


def check(c, name, n=None):
    got = np.frombuffer((c.dir / f"out_{name}.bin").read_bytes(), np.float32)
    want = c.expect[name]
    np.testing.assert_allclose(got[:len(want)].astype(np.float64), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ROUTED, ids=lambda t: "_".join(map(str, t)))
def test_moe_gate_up_matches_numpy(fused_run, case):
    gfmt, ufmt, k, rows, cols, lane_cap = case
    check(fused_run, f"moe_{gfmt}_{ufmt}_k{k}_r{rows}_c{cols}_l{lane_cap}")


@pytest.mark.parametrize("case", ROUTED_TWO_ROWS, ids=lambda t: "_".join(map(str, t)))
def test_moe_gate_up_two_rows_per_group_matches_numpy(fused_run, case):
    gfmt, ufmt, k, rows, cols, lane_cap = case
    check(fused_run, f"moe_{gfmt}_{ufmt}_k{k}_r{rows}_c{cols}_l{lane_cap}_2rows")


@pytest.mark.parametrize("case", DENSE, ids=lambda t: "_".join(map(str, t)))
def test_dense_gate_up_matches_numpy(fused_run, case):
    gfmt, ufmt, rows, cols, min_groups = case
    check(fused_run, f"dense_{gfmt}_{ufmt}_r{rows}_c{cols}_m{min_groups}")


@pytest.mark.parametrize("fmt", ["q8", "f32"])
def test_streamed_gate_up_reads_both_pool_buffers(fused_run, fmt):
    check(fused_run, f"pool_{fmt}")


@pytest.mark.parametrize("case", COMBINE, ids=lambda t: "_".join(map(str, t)))
def test_shared_expert_down_fused_with_the_block_sums(fused_run, case):
    fmt, n, k, cols, multi, *wide = case
    check(fused_run, f"combine_{fmt}_n{n}_k{k}_c{cols}_m{multi}" + (f"_w{wide[0]}" if wide else ""))


@pytest.mark.parametrize("case", ROUTES, ids=lambda t: "_".join(map(str, t)))
def test_router_top_k_inside_the_gate_up_product(fused_run, case):
    name = route_name(*case)
    act, picked, weights = fused_run.expect[name]
    out = lambda tag, dtype: np.frombuffer((fused_run.dir / f"out_{name}{tag}.bin").read_bytes(), dtype)  # noqa
    np.testing.assert_allclose(out("", np.float32)[:len(act)], act, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out("_ids", np.uint32), picked)
    np.testing.assert_allclose(out("_w", np.float32), weights, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", DOWN_COMBINE, ids=lambda t: "_".join(map(str, t)))
def test_down_products_and_the_block_sums_in_one_dispatch(fused_run, case):
    """moe_down_combine matches numpy; without a shared expert it has the bits of the two dispatches it replaces."""
    fmt, n, ffn, k, shared = case
    name = f"down_{fmt}_n{n}_f{ffn}_k{k}" + ("_shared" if shared else "")
    check(fused_run, name)
    if not shared:
        out = lambda tag: np.frombuffer((fused_run.dir / f"out_{name}{tag}.bin").read_bytes(), np.float32)  # noqa
        np.testing.assert_array_equal(out("")[:n], out("_ref"))


def test_down_combine_workgroup_fits_its_memory():
    """moe_down_combine's workgroups take 256 lanes where their partials and staging fit WebGPU's 16 KiB of
    workgroup memory (the real models' 9 experts of 16 blocks), fewer where they would not."""
    from py_engine.gpu.workgroups import WORKGROUP_STORAGE, moe_down_workgroup

    assert moe_down_workgroup(9, 16) == 256   # qwen35moe: 8 routed + the shared expert, 512 columns
    assert moe_down_workgroup(9, 8192 // 32 // 9) == 128
    assert moe_down_workgroup(9, 256 // 9, rows_per=4) == 64   # the floor, whatever it takes
    for n_e, nb in ((9, 16), (4, 64), (9, 28), (2, 128)):
        wg = moe_down_workgroup(n_e, nb)
        assert wg == 64 or 4 * wg * n_e + 36 * n_e * nb <= WORKGROUP_STORAGE
