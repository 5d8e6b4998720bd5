"""Every kernel in shaders/ run on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide) against numpy.

CPython writes the inputs to a temporary folder; one Node process (start-up costs seconds) runs all the kernels
through py_engine.gpu and writes the outputs back; numpy checks them here.
"""
import json
import shutil

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS
from diskformer.reference.layers import fake_quantize_q8_0 as fq  # what Q8_0 products do to their input

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

# Runs inside Pyodide: reads inputs/<name>.bin, runs each case, writes outputs/<name>.bin.
NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.kernels import q8_input_words

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    bufs = {}

    def buf(name, extra=0):
        if name not in bufs:
            bufs[name] = upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)
        return bufs[name]

    def out(name, nbytes):
        bufs[name] = storage_buffer(gpu, nbytes, name)
        return bufs[name]

    def matrix(name, fmt, rows, cols, band_rows=None):
        band_rows = band_rows or rows
        bands = []
        for r0 in range(0, rows, band_rows):
            n = min(band_rows, rows - r0)
            if fmt == "q8":
                codes = (d / f"in_{name}_codes.bin").read_bytes()[r0 * cols:(r0 + n) * cols]
                scales = (d / f"in_{name}_scales.bin").read_bytes()[r0 * cols // 16:(r0 + n) * cols // 16]
                bands.append((r0, n, {3: upload(gpu, codes), 4: upload(gpu, scales)}))
            else:
                vals = (d / f"in_{name}.bin").read_bytes()[r0 * cols * 4:(r0 + n) * cols * 4]
                bands.append((r0, n, {3: upload(gpu, vals)}))
        return GpuMatrix(name, fmt, rows, cols, bands)

    results = {}
    for case in spec:
        kern = Kernels(gpu, pipes, step, lane_cap=case.get("lane_cap", 16), kv_format=case.get("kv", "f16"),
                       matvec_multi_row_groups=case.get("multi_row_groups", 4096), q8_act=case.get("q8_act", True),
                       matvec_min_groups=case.get("min_groups", 0), argmax_lanes=case.get("argmax_lanes"))
        dl = DispatchList()
        k, a = case["kernel"], case
        async with GpuErrorScope(gpu, "recording " + a["name"]):
            if k == "matvec":
                w = matrix(a["w"], a["fmt"], a["rows"], a["cols"], a.get("band_rows"))
                y = buf(a["y"]) if a.get("accumulate") else out(a["y"], a["y_len"] * 4)
                norm = (buf(a["nw"]), a["eps"]) if a.get("nw") else None
                xn = out(a["xn"], a["cols"] * 4) if a.get("xn") else None
                if a.get("two_step"):  # the unfused reference: rmsnorm into xn, then the plain product of xn
                    kern.rmsnorm(dl, buf(a["x"]), norm[0], xn, a["cols"], norm[1], x_base=a["x_base"])
                    kern.matvec(dl, w, xn, y, 0, a["y_base"], a.get("accumulate", False))
                elif a.get("prequant"):  # the norm also writes xn quantised; the product reads that as is
                    xq = out(a["xq"], q8_input_words(a["cols"]) * 4)
                    kern.rmsnorm(dl, buf(a["x"]), norm[0], xn, a["cols"], norm[1], x_base=a["x_base"], xq=xq)
                    kern.matvec(dl, w, xq, y, 0, a["y_base"], a.get("accumulate", False), x_q8=True)
                elif a.get("xq_out"):  # the fused norm also leaves xn quantised (the router's, for the experts)
                    xq = out(a["xq"], q8_input_words(a["cols"]) * 4)
                    kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], a.get("accumulate", False),
                                norm=norm, xn_out=xn, xq_out=xq)
                elif a.get("expect_error"):
                    try:
                        kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], norm=norm, xn_out=xn)
                        results[a["name"]] = "no error"
                    except ValueError as e:
                        results[a["name"]] = str(e)
                else:
                    am = out(a["am"], 8) if a.get("am") else None  # the argmax of what the product wrote
                    kern.matvec(dl, w, buf(a["x"]), y, a["x_base"], a["y_base"], a.get("accumulate", False),
                                norm=norm, xn_out=xn, argmax_out=am)
            elif k == "moe_matvec":
                pool = matrix(a["w"], a["fmt"], a["slots"] * a["rows"], a["cols"])
                y = out(a["y"], a["k"] * a["rows"] * 4)
                kern.moe_matvec(dl, pool, a["rows"], a["k"], buf(a["x"]), y, buf("ids"), buf("slot_map"),
                                a["map_base"], a["x_base"], a["x_stride"])
            elif k == "rmsnorm":
                y = out(a["y"], a["n"] * a["rows"] * 4)
                kern.rmsnorm(dl, buf(a["x"]), buf(a["w"]), y, a["n"], a["eps"], a["rows"])
            elif k == "embed":
                w = matrix(a["w"], a["fmt"], a["rows"], a["cols"], a.get("band_rows"))
                kern.embed(dl, w, out(a["y"], a["cols"] * 4))
            elif k == "qk_rope_append":
                norms = (buf(a["wq"]), buf(a["wk"])) if a["norm"] else (None, None)
                kern.qk_rope_append(dl, buf(a["x"]), out(a["q"], a["heads"] * a["hd"] * 4), *norms, buf(a["kc"]),
                                    buf(a["vc"]), a["heads"], a["kv_heads"], a["hd"], a["n_rot"], a["eps"], a["base"],
                                    a["hd"], a["k_base"], a["v_base"])
            elif k == "attention":
                y = out(a["y"], a["n_head"] * a["hd"] * 4)
                kern.attention(dl, buf(a["q"]), buf(a["kc"]), buf(a["vc"]), y, a["n_head"], a["n_kv"], a["hd"],
                               a["scale"])
            elif k == "silu_mul":
                kern.silu_mul(dl, buf(a["g"]), buf(a["u"]), out(a["y"], a["n"] * 4), a["n"])
            elif k == "add":
                kern.add(dl, buf(a["x"]), buf(a["y"]), a["n"])
            elif k == "moe_combine":
                kern.moe_combine(dl, buf(a["w"]), buf(a["ys"]), buf(a["h"]), a["n"], a["k"])
            elif k == "router_topk":
                ids, wts = out(a["ids"], a["k"] * 4), out(a["wts"], a["k"] * 4)
                kern.router_topk(dl, buf(a["logits"]), ids, wts, a["n_exp"], a["k"], a["renorm"])
        write_buffer(gpu, step, 0, struct.pack("<4I", a.get("token", 0), a.get("pos", 0), a.get("pos", 0) + 1, 0))
        dl.submit(gpu)
        for name in a["outputs"]:
            b = bufs[name]
            data = await rb.read(b, 0, int(b.size))
            (d / f"out_{a['name']}_{name}.bin").write_bytes(data)
        check_errors(gpu, a["name"])
    return {"adapter": gpu.info, "subgroups": gpu.has_subgroups, "results": results}
'''


class Case:
    """Collects inputs (written as files) and the case list for the node run."""

    def __init__(self, folder):
        self.dir = folder
        self.spec = []

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        return name

    def q8(self, name, rows, cols, rng):
        codes = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
        scales = (rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        blocks = codes.reshape(rows, cols // 32, 32).astype(np.float32) * scales[:, :, None].astype(np.float32)
        return blocks.reshape(rows, cols)

    def add(self, **case):
        self.spec.append(case)

    def out(self, name, key, dtype=np.float32):
        return np.frombuffer((self.dir / f"out_{name}_{key}.bin").read_bytes(), dtype=dtype)


def rope_neox(x, pos, n_rot, base):
    x = x.astype(np.float64).copy()
    half = n_rot // 2
    i = np.arange(half)
    ang = pos * base ** (-2.0 * i / n_rot)
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., :half].copy(), x[..., half:n_rot].copy()
    x[..., :half] = x0 * c - x1 * s
    x[..., half:n_rot] = x0 * s + x1 * c
    return x


def f16_pairs(a):
    return a.astype(np.float16)


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("kernels")
    rng = np.random.default_rng(7)
    c = Case(d)
    ref = {}

    # matvec, Q8_0: several lane counts, two row bands, offsets, accumulation
    K = 256
    W = c.q8("wq", 100, K, rng)
    x = rng.standard_normal(K + 32).astype(np.float32)
    c.arr("x1", x)
    for cap in (1, 4, 16):
        c.add(name=f"mv_q8_l{cap}", kernel="matvec", fmt="q8", w="wq", rows=100, cols=K, band_rows=64, x="x1",
              y=f"y_l{cap}", y_len=110, x_base=32, y_base=10, lane_cap=cap, outputs=[f"y_l{cap}"])
    ref["mv_q8"] = W.astype(np.float64) @ fq(x[32:]).astype(np.float64)
    y0 = rng.standard_normal(100).astype(np.float32)
    c.arr("yacc", y0)
    c.add(name="mv_q8_acc", kernel="matvec", fmt="q8", w="wq", rows=100, cols=K, x="x1", y="yacc", x_base=32,
          y_base=0, accumulate=True, outputs=["yacc"])
    ref["mv_q8_acc"] = ref["mv_q8"] + y0
    # the engine's f32-activation mode (q8_act False): Q8_0 weights times x as is
    c.add(name="mv_q8_f32act", kernel="matvec", fmt="q8", w="wq", rows=100, cols=K, band_rows=64, x="x1",
          y="y_f32act", y_len=110, x_base=32, y_base=10, q8_act=False, outputs=["y_f32act"])
    ref["mv_q8_f32act"] = W.astype(np.float64) @ x[32:].astype(np.float64)
    # matvec, F32 (routers; the F32 fixture models)
    Wf = rng.standard_normal((37, 128)).astype(np.float32)
    c.arr("wf", Wf)
    c.add(name="mv_f32", kernel="matvec", fmt="f32", w="wf", rows=37, cols=128, x="x1", y="yf", y_len=37,
          x_base=0, y_base=0, outputs=["yf"])
    ref["mv_f32"] = Wf.astype(np.float64) @ x[:128].astype(np.float64)
    # the output head's argmax taken by the product's workgroups: rows 1000 and 2000 equal and the largest (the
    # lower wins), in one band or several (their partials in order), 1 or 4 rows per lane group, an offset y
    Wa_codes = rng.integers(-127, 128, size=(3001, 64), dtype=np.int8)
    Wa_scales = (rng.random((3001, 2)) * 0.02 + 0.001).astype(np.float16)
    xa = np.abs(rng.standard_normal(64)).astype(np.float32) + 0.1
    Wa_codes[[1000, 2000]] = 127
    Wa_scales[[1000, 2000]] = 0.05
    c.arr("wa_codes", Wa_codes)
    c.arr("wa_scales", Wa_scales)
    c.arr("xa", xa)
    for tag, extra in (("one", {}), ("bands", {"band_rows": 700, "multi_row_groups": 0})):
        c.add(name=f"mv_argmax_{tag}", kernel="matvec", fmt="q8", w="wa", rows=3001, cols=64, x="xa",
              y=f"ya_{tag}", y_len=3006, x_base=0, y_base=5, am=f"am_{tag}", outputs=[f"ya_{tag}", f"am_{tag}"],
              **extra)
    # the 4-rows-per-lane-group shape of tall matrices (forced here): bands and row counts not multiples of 4
    for cap in (1, 16):
        c.add(name=f"mv4_q8_l{cap}", kernel="matvec", fmt="q8", w="wq", rows=100, cols=K, band_rows=62, x="x1",
              y=f"y4_l{cap}", y_len=110, x_base=32, y_base=10, lane_cap=cap, multi_row_groups=0,
              outputs=[f"y4_l{cap}"])
    c.arr("yacc4", y0)
    c.add(name="mv4_q8_acc", kernel="matvec", fmt="q8", w="wq", rows=100, cols=K, x="x1", y="yacc4", x_base=32,
          y_base=0, accumulate=True, multi_row_groups=0, outputs=["yacc4"])
    c.add(name="mv4_f32", kernel="matvec", fmt="f32", w="wf", rows=37, cols=128, x="x1", y="yf4", y_len=37,
          x_base=0, y_base=0, multi_row_groups=0, outputs=["yf4"])

    # routed experts: pool of 6 slots, 2 picked experts mapped through the slot map
    P = c.q8("pool", 6 * 64, 128, rng).reshape(6, 64, 128)
    xe = rng.standard_normal(2 * 128).astype(np.float32)
    c.arr("xe", xe)
    c.arr("ids", np.array([3, 0], np.uint32))
    c.arr("slot_map", np.array([9, 9, 9, 9, 5, 2, 1, 4], np.uint32))  # layer base 4: expert 0 -> slot 5, 3 -> 4
    c.add(name="moe_shared_x", kernel="moe_matvec", fmt="q8", w="pool", slots=6, rows=64, cols=128, k=2, x="xe",
          y="ye", map_base=4, x_base=0, x_stride=0, outputs=["ye"])
    c.add(name="moe_own_x", kernel="moe_matvec", fmt="q8", w="pool", slots=6, rows=64, cols=128, k=2, x="xe",
          y="ye2", map_base=4, x_base=0, x_stride=128, outputs=["ye2"])
    ref["moe_shared_x"] = np.concatenate([P[4] @ fq(xe[:128]), P[5] @ fq(xe[:128])])
    ref["moe_own_x"] = np.concatenate([P[4] @ fq(xe[:128]), P[5] @ fq(xe[128:])])
    # 4 rows per lane group, 62 rows per expert: the last group of each expert is partial
    P62 = c.q8("pool62", 6 * 62, 128, rng).reshape(6, 62, 128)
    c.add(name="moe_rows4", kernel="moe_matvec", fmt="q8", w="pool62", slots=6, rows=62, cols=128, k=2, x="xe",
          y="ye4", map_base=4, x_base=0, x_stride=128, multi_row_groups=0, outputs=["ye4"])
    ref["moe_rows4"] = np.concatenate([P62[4] @ fq(xe[:128]), P62[5] @ fq(xe[128:])])

    # RMSNorm over 2 rows
    xr = rng.standard_normal(2 * 200).astype(np.float32) * 3
    wr = rng.standard_normal(200).astype(np.float32)
    c.arr("xr", xr)
    c.arr("wr", wr)
    c.add(name="rmsnorm", kernel="rmsnorm", x="xr", w="wr", y="yr", n=200, rows=2, eps=1e-6, outputs=["yr"])
    xr2 = xr.reshape(2, 200).astype(np.float64)
    ref["rmsnorm"] = (xr2 / np.sqrt((xr2 ** 2).mean(1, keepdims=True) + 1e-6) * wr).ravel()

    # embedding gather from Q8_0 planes in 2 bands, and F32
    E = c.q8("emb", 50, 64, rng)
    c.add(name="embed_q8", kernel="embed", fmt="q8", w="emb", rows=50, cols=64, band_rows=32, y="ye8", token=41,
          outputs=["ye8"])
    ref["embed_q8"] = E[41]
    Ef = rng.standard_normal((50, 64)).astype(np.float32)
    c.arr("embf", Ef)
    c.add(name="embed_f32", kernel="embed", fmt="f32", w="embf", rows=50, cols=64, y="yef", token=7,
          outputs=["yef"])
    ref["embed_f32"] = Ef[7]

    # one token's q/k norm + NeoX rope + KV append (qk_rope_append): full rotation, partial rotation, no norm at a
    # large position; 3 q heads, 2 kv heads of 64; f32 and f16 caches
    n_kv, hd = 2, 64
    for nm, norm, n_rot, pos, base, kv in (("rope_full", True, 64, 5, 1e6, "f32"),
                                           ("rope_part", True, 16, 77, 1e7, "f16"),
                                           ("rope_nonorm", False, 64, 40001, 1e6, "f32")):
        x = rng.standard_normal((3 + 2 * n_kv) * hd).astype(np.float32)
        wq_, wk_ = (rng.standard_normal(hd).astype(np.float32) for _ in range(2))
        dt = np.float16 if kv == "f16" else np.float32
        n_ctx = pos + 2
        for tag, a in (("x", x), ("wq", wq_), ("wk", wk_), ("kc", np.zeros(n_ctx * n_kv * hd, dt)),
                       ("vc", np.zeros(n_ctx * n_kv * hd, dt))):
            c.arr(f"{tag}_{nm}", a)
        c.add(name=nm, kernel="qk_rope_append", x="x_" + nm, wq="wq_" + nm, wk="wk_" + nm, kc="kc_" + nm,
              vc="vc_" + nm, q="q_" + nm, norm=norm, heads=3, kv_heads=n_kv, hd=hd, n_rot=n_rot, eps=1e-6,
              base=base, k_base=3 * hd, v_base=(3 + n_kv) * hd, kv=kv, pos=pos,
              outputs=["q_" + nm, "kc_" + nm, "vc_" + nm])
        heads = x[:(3 + n_kv) * hd].reshape(3 + n_kv, hd).astype(np.float64)
        if norm:
            w = np.concatenate([np.tile(wq_, (3, 1)), np.tile(wk_, (n_kv, 1))])
            heads = heads / np.sqrt((heads ** 2).mean(1, keepdims=True) + 1e-6) * w
        ref[nm] = (rope_neox(heads, pos, n_rot, base), x[(3 + n_kv) * hd:], pos, dt)

    # attention over 150 positions with GQA
    n_head, n_ctx = 4, 160
    n_past = 150
    q = rng.standard_normal(n_head * hd).astype(np.float32)
    kc = rng.standard_normal((n_ctx, n_kv, hd)).astype(np.float32) * 2
    vc = rng.standard_normal((n_ctx, n_kv, hd)).astype(np.float32)
    c.arr("q", q)
    for kv, dt in (("f16", np.float16), ("f32", np.float32)):
        c.arr(f"akc_{kv}", kc.astype(dt))
        c.arr(f"avc_{kv}", vc.astype(dt))
        c.add(name=f"attn_{kv}", kernel="attention", kv=kv, q="q", kc=f"akc_{kv}", vc=f"avc_{kv}",
              y=f"att_{kv}", n_head=n_head, n_kv=n_kv, hd=hd, scale=hd ** -0.5, pos=n_past - 1,
              outputs=[f"att_{kv}"])
        kk = kc.astype(dt).astype(np.float64)[:n_past]
        vv = vc.astype(dt).astype(np.float64)[:n_past]
        o = []
        for h in range(n_head):
            g = h // (n_head // n_kv)
            s = kk[:, g] @ q[h * hd:(h + 1) * hd] * hd ** -0.5
            p = np.exp(s - s.max())
            o.append((p / p.sum()) @ vv[:, g])
        ref[f"attn_{kv}"] = np.concatenate(o)
    # head_dim 256 (qwen35moe's gated attention: every lane holds a value pair), 8 q heads on one KV head
    qb = rng.standard_normal(8 * 256).astype(np.float32)
    kb = (rng.standard_normal((70, 1, 256)) * 0.3).astype(np.float16)
    vb = rng.standard_normal((70, 1, 256)).astype(np.float16)
    c.arr("q256", qb)
    c.arr("akc256", kb)
    c.arr("avc256", vb)
    c.add(name="attn_hd256", kernel="attention", kv="f16", q="q256", kc="akc256", vc="avc256", y="att256",
          n_head=8, n_kv=1, hd=256, scale=256 ** -0.5, pos=66, outputs=["att256"])
    o = []
    for h in range(8):
        s = kb[:67, 0].astype(np.float64) @ qb[h * 256:(h + 1) * 256] * 256 ** -0.5
        pr = np.exp(s - s.max())
        o.append((pr / pr.sum()) @ vb[:67, 0].astype(np.float64))
    ref["attn_hd256"] = np.concatenate(o)

    # elementwise: SiLU gate, residual add, expert combine
    g = rng.standard_normal(300).astype(np.float32) * 4
    u = rng.standard_normal(300).astype(np.float32)
    c.arr("g", g)
    c.arr("u", u)
    c.add(name="silu_mul", kernel="silu_mul", g="g", u="u", y="ys", n=300, outputs=["ys"])
    ref["silu_mul"] = g / (1 + np.exp(-g.astype(np.float64))) * u
    ya = rng.standard_normal(300).astype(np.float32)
    c.arr("ya", ya)
    c.add(name="add", kernel="add", x="u", y="ya", n=300, outputs=["ya"])
    ref["add"] = ya.astype(np.float64) + u
    ys = rng.standard_normal(3 * 100).astype(np.float32)
    wk = np.array([0.5, 0.3, 0.2], np.float32)
    hh = rng.standard_normal(100).astype(np.float32)
    c.arr("ys3", ys)
    c.arr("wk", wk)
    c.arr("hh", hh)
    c.add(name="moe_combine", kernel="moe_combine", w="wk", ys="ys3", h="hh", n=100, k=3, outputs=["hh"])
    ref["moe_combine"] = hh + wk @ ys.reshape(3, 100)

    # router: 128 experts top-8 with exact ties (lower index wins), 256 top-8, and no renormalisation
    routers = (("router128", 128, 8, True), ("router256", 256, 8, True), ("router_raw", 16, 4, False))
    for nm, n_exp, k, renorm in routers:
        lg = rng.standard_normal(n_exp).astype(np.float32)
        lg[[5, 9, 70 % n_exp]] = 3.5  # a three-way tie at the top
        c.arr("lg_" + nm, lg)
        c.add(name=nm, kernel="router_topk", logits="lg_" + nm, ids="ids_" + nm, wts="w_" + nm, n_exp=n_exp, k=k,
              renorm=renorm, outputs=["ids_" + nm, "w_" + nm])
        p = np.exp(lg.astype(np.float64) - lg.max())
        p /= p.sum()
        order = sorted(range(n_exp), key=lambda i: (-p[i], i))[:k]
        w = p[order] / (p[order].sum() if renorm else 1.0)
        ref[nm] = (order, w)

    # the argmax taken by a product's workgroups over vocabulary-sized outputs: an F32 matrix whose rows are
    # [v_r, 0, ...] times e_0 writes exactly v (a tie across far-apart partials and a lone last value, the lower
    # index wins); bands; 1 row per lane group (3,880 partials: argmax_final's lanes take several steps) and 4.
    # "big" runs argmax_final in 1024 lanes and in 256: its winner, row 30,001, is in partial 468 (64 rows a
    # partial), which lane 468 of 1024 takes first: a tree that skipped its upper levels would miss it.
    e0 = np.zeros(32, np.float32)
    e0[0] = 1.0
    c.arr("e0", e0)
    for tag, n, ties, rows4, lanes in (("big", 248_320, ([30_001, 248_319], [5, 131_072]), False, 1024),
                                       ("big256", 248_320, ([30_001, 248_319], [5, 131_072]), False, 256),
                                       ("tail", 8193, ([8192], []), True, None)):
        v = rng.standard_normal(n).astype(np.float32)
        v[ties[0]] = 9.0
        v[ties[1]] = 8.5
        wv = np.zeros((n, 32), np.float32)
        wv[:, 0] = v
        c.arr("wv_" + tag, wv)
        c.add(name=f"argmax_{tag}", kernel="matvec", fmt="f32", w="wv_" + tag, rows=n, cols=32, x="e0",
              y="yv_" + tag, y_len=n, x_base=0, y_base=0, am="amx_" + tag, band_rows=100_000, argmax_lanes=lanes,
              outputs=["yv_" + tag, "amx_" + tag], **({"multi_row_groups": 0} if rows4 else {}))

    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return c, ref, info


def close(a, b, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


def test_device_has_no_f16_requirement(kernel_run):
    _, _, info = kernel_run
    assert info["adapter"]["description"]


@pytest.mark.parametrize("cap", [1, 4, 16])
def test_matvec_q8_lanes_bands_offsets(kernel_run, cap):
    c, ref, _ = kernel_run
    y = c.out(f"mv_q8_l{cap}", f"y_l{cap}")
    close(y[10:110], ref["mv_q8"])
    assert not y[:10].any()


def test_matvec_q8_with_f32_activations(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("mv_q8_f32act", "y_f32act")[10:110], ref["mv_q8_f32act"])
    # and the quantised default really differs from it (the test above would not notice a silent fallback)
    assert np.abs(c.out("mv_q8_l16", "y_l16")[10:110] - ref["mv_q8_f32act"]).max() > 1e-3


def test_matvec_accumulate_and_f32(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("mv_q8_acc", "yacc")[:100], ref["mv_q8_acc"])
    close(c.out("mv_f32", "yf")[:37], ref["mv_f32"])


@pytest.mark.parametrize("tag", ["one", "bands"])
def test_matvec_takes_the_argmax_of_its_rows(kernel_run, tag):
    c, _, _ = kernel_run
    y = c.out(f"mv_argmax_{tag}", f"ya_{tag}")
    idx, bits = c.out(f"mv_argmax_{tag}", f"am_{tag}", np.uint32)
    assert int(idx) == 1005 == int(np.argmax(y))  # y_base 5: the written index; rows 1000 and 2000 tie
    assert y[1005] == y[2005] and np.uint32(bits) == y[1005:1006].view(np.uint32)[0]


@pytest.mark.parametrize("cap", [1, 16])
def test_matvec_four_rows_per_lane_group(kernel_run, cap):
    c, ref, _ = kernel_run
    y = c.out(f"mv4_q8_l{cap}", f"y4_l{cap}")
    close(y[10:110], ref["mv_q8"])
    assert not y[:10].any()
    close(c.out("mv4_q8_acc", "yacc4")[:100], ref["mv_q8_acc"])
    close(c.out("mv4_f32", "yf4")[:37], ref["mv_f32"])


def test_moe_matvec_reads_mapped_slots(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("moe_shared_x", "ye"), ref["moe_shared_x"])
    close(c.out("moe_own_x", "ye2"), ref["moe_own_x"])
    close(c.out("moe_rows4", "ye4"), ref["moe_rows4"])


def test_rmsnorm(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("rmsnorm", "yr")[:400], ref["rmsnorm"])


def test_embed(kernel_run):
    c, ref, _ = kernel_run
    np.testing.assert_array_equal(c.out("embed_q8", "ye8")[:64], ref["embed_q8"])
    np.testing.assert_array_equal(c.out("embed_f32", "yef")[:64], ref["embed_f32"])


@pytest.mark.parametrize("name", ["rope_full", "rope_part", "rope_nonorm"])
def test_q_k_rope_and_kv_append(kernel_run, name):
    """q heads normed and rotated into q; k heads likewise and v as is into the caches' row `pos`, nothing else."""
    c, ref, _ = kernel_run
    heads, v, pos, dt = ref[name]
    # the large-position case: the angle itself is computed in f32 (as llama.cpp does), so allow its rounding
    tol = 3e-2 if name == "rope_nonorm" else 2e-4
    close(c.out(name, "q_" + name), heads[:3].ravel(), rtol=tol, atol=tol)
    kc = c.out(name, "kc_" + name, dt).reshape(-1, v.size)
    vc = c.out(name, "vc_" + name, dt).reshape(-1, v.size)
    ktol = max(tol, 2e-3) if dt == np.float16 else tol
    close(kc[pos].astype(np.float64), heads[3:].ravel(), rtol=ktol, atol=ktol)
    np.testing.assert_array_equal(vc[pos], v.astype(dt))
    assert not np.delete(kc, pos, axis=0).any() and not np.delete(vc, pos, axis=0).any()


@pytest.mark.parametrize("kv", ["f16", "f32"])
def test_attention_gqa_over_chunks(kernel_run, kv):
    c, ref, _ = kernel_run
    close(c.out(f"attn_{kv}", f"att_{kv}")[:256], ref[f"attn_{kv}"], rtol=2e-4, atol=2e-5)


def test_attention_head_dim_256(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("attn_hd256", "att256")[:2048], ref["attn_hd256"], rtol=2e-4, atol=2e-5)


def test_elementwise(kernel_run):
    c, ref, _ = kernel_run
    close(c.out("silu_mul", "ys")[:300], ref["silu_mul"])
    close(c.out("add", "ya")[:300], ref["add"])
    close(c.out("moe_combine", "hh")[:100], ref["moe_combine"])


@pytest.mark.parametrize("name", ["router128", "router256", "router_raw"])
def test_router_topk(kernel_run, name):
    c, ref, _ = kernel_run
    order, w = ref[name]
    k = len(order)
    assert list(c.out(name, "ids_" + name, np.uint32)[:k]) == order
    close(c.out(name, "w_" + name)[:k], w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tag", ["big", "big256"])
def test_argmax_ties_to_lower_index(kernel_run, tag):
    c = kernel_run[0]
    idx, bits = c.out("argmax_" + tag, "amx_" + tag, np.uint32)
    assert int(idx) == 30_001 and np.uint32(bits) == np.float32(9.0).view(np.uint32)


def test_argmax_of_a_lone_last_row(kernel_run):
    c = kernel_run[0]
    assert int(c.out("argmax_tail", "amx_tail", np.uint32)[0]) == 8192


# --- matvec with the preceding RMSNorm fused in (norm=, xn_out=) ------------------------------------------------
# Each fused case has a twin ("<name>_2") run unfused on the GPU: rmsnorm into xn, then the plain product; Q8_0
# cases with Q8_0 activations a third ("<name>_3"): rmsnorm writing xn and its quantised copy, then the product
# reading the copy (x_stage_q8pre.wgsl: what the output head does); cases with xn a fourth ("<name>_4"): the fused
# product also writing xn quantised (xq_out: the router's, read by the routed experts).
NORM_CASES = {  # name: (fmt, rows, cols, band_rows, x_base, y_base, eps, extra case fields)
    "nmv32": ("q8", 40, 32, None, 32, 5, 0.5, {"xn": True}),  # a large eps: a dropped eps shows
    "nmv256_bands": ("q8", 100, 256, 64, 64, 10, 1e-6, {"xn": True, "lane_cap": 4}),
    "nmv256_no_xn": ("q8", 100, 256, 64, 64, 10, 1e-6, {}),
    "nmv2048_acc": ("q8", 70, 2048, None, 2048, 0, 1e-6, {"xn": True, "accumulate": True}),
    "nmv256_rows4": ("q8", 100, 256, 62, 64, 10, 1e-6, {"xn": True, "multi_row_groups": 0}),
    # f32 activations: x normalised into an f32 copy in workgroup memory (x_stage_f32s.wgsl)
    "nmv256_f32act": ("q8", 100, 256, 64, 64, 10, 1e-6, {"xn": True, "q8_act": False}),
    "nmv128_f32w": ("f32", 37, 128, None, 32, 3, 1e-6, {"xn": True}),  # F32 weights (a router)
    "nmv2048_f32w_rows4": ("f32", 70, 2048, None, 0, 0, 1e-6, {"xn": True, "multi_row_groups": 0}),
    # small products widened to more lanes per row (matvec_lanes; a GPU's routers): 64 lanes, 32 lanes
    "nmv2048_f32w_wide": ("f32", 37, 2048, None, 0, 0, 1e-6, {"xn": True, "min_groups": 1 << 20}),
    "nmv1024_wide": ("q8", 50, 1024, None, 64, 7, 1e-6, {"xn": True, "min_groups": 1 << 20}),
    # too wide to stage in f32: an rmsnorm dispatch, then the plain product
    "nmv4096_f32act": ("q8", 20, 4096, None, 64, 0, 1e-6, {"xn": True, "q8_act": False}),
}


def rmsnorm_f32(x, w, eps):
    """rmsnorm.wgsl's values in f32 (the sum in f64: its order is the GPU's own)."""
    inv = np.float32(1.0) / np.sqrt(np.float32((x.astype(np.float64) ** 2).sum() / x.size) + np.float32(eps))
    return (x * inv).astype(np.float32) * w


@pytest.fixture(scope="module")
def norm_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("norm_matvec")
    rng = np.random.default_rng(11)
    c = Case(d)
    ref = {}
    x = (rng.standard_normal(2 * 2048 + 64) * 2).astype(np.float32)
    c.arr("nx", x)
    for name, (fmt, rows, cols, band_rows, x_base, y_base, eps, extra) in NORM_CASES.items():
        if fmt == "q8":
            W = c.q8("w_" + name, rows, cols, rng)
        else:
            W = rng.standard_normal((rows, cols)).astype(np.float32)
            c.arr("w_" + name, W)
        nw = (rng.standard_normal(cols) * 0.5 + 1).astype(np.float32)
        c.arr("nw_" + name, nw)
        y_len = y_base + rows
        y0 = rng.standard_normal(y_len).astype(np.float32)
        xn = rmsnorm_f32(x[x_base:x_base + cols], nw, eps)
        q8 = fmt == "q8" and extra.get("q8_act", True)
        y = W.astype(np.float64) @ (fq(xn) if q8 else xn).astype(np.float64)
        if extra.get("accumulate"):
            y += y0[y_base:]
        ref[name] = (y, xn, y0)
        for twin in ("", "_2") + (("_3",) if q8 else ()) + (("_4",) if extra.get("xn") else ()):
            case = dict(name=name + twin, kernel="matvec", fmt=fmt, w="w_" + name, rows=rows, cols=cols,
                        band_rows=band_rows, x="nx", y="y_" + name + twin, y_len=y_len, x_base=x_base,
                        y_base=y_base, nw="nw_" + name, eps=eps, outputs=["y_" + name + twin])
            case.update({k: v for k, v in extra.items() if k != "xn"})
            if extra.get("accumulate"):
                c.arr("y_" + name + twin, y0)
            if extra.get("xn") or twin:
                case["xn"] = "xn_" + name + twin
                case["outputs"].append(case["xn"])
            case["two_step"] = twin == "_2"
            case["prequant"] = twin == "_3"
            case["xq_out"] = twin == "_4"
            if twin in ("_3", "_4"):
                case["xq"] = "xq_" + name + ("_4" if twin == "_4" else "")
                case["outputs"].append(case["xq"])
            c.add(**case)
    # the fallback cannot fuse: without xn_out it must refuse rather than read an unnormalised x
    c.add(name="nmv_f32act_no_xn", kernel="matvec", fmt="q8", w="w_nmv4096_f32act", rows=20, cols=4096,
          x="nx", y="y_err", y_len=20, x_base=0, y_base=0, nw="nw_nmv4096_f32act", eps=1e-6, q8_act=False,
          expect_error=True, outputs=[])
    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return c, ref, info


def assert_q8_words(words, xn):
    """words (rmsnorm_q8.wgsl's layout: every block's codes, then the scales) hold xn quantised as ggml does."""
    nb = xn.size // 32
    codes = words[:8 * nb].view(np.int8).astype(np.float32).reshape(nb, 32)
    scales = words[8 * nb:9 * nb].view(np.float32)
    want = fq(xn).reshape(nb, 32)
    got = codes * scales[:, None]
    # a code at an exact .5 tie may round one step apart where the device's division differs in the last bit
    off = got != want
    assert off.mean() < 0.01, off.sum()
    np.testing.assert_allclose(np.abs(got - want)[off], np.broadcast_to(scales[:, None], off.shape)[off], rtol=1e-6)


@pytest.mark.parametrize("name", list(NORM_CASES))
def test_matvec_fused_rmsnorm(norm_run, name):
    c, ref, _ = norm_run
    fmt, rows, cols, _, _, y_base, _, extra = NORM_CASES[name]
    y_ref, xn_ref, y0 = ref[name]
    y = c.out(name, "y_" + name)
    y2 = c.out(name + "_2", "y_" + name + "_2")
    # against the unfused pair on the GPU and numpy: equal but for activation codes at a rounding tie (each worth
    # d_w * d_x, ~1e-4 here), far below what a wrong norm (scale, eps, weight) would change
    close(y[y_base:y_base + rows], y2[y_base:y_base + rows], rtol=1e-4, atol=2e-3)
    close(y[y_base:y_base + rows], y_ref, rtol=1e-4, atol=2e-3)
    if extra.get("accumulate"):
        np.testing.assert_array_equal(y[:y_base], y0[:y_base])
    else:
        assert not y[:y_base].any()
    if extra.get("xn"):
        xn = c.out(name, "xn_" + name)[:cols]
        xn2 = c.out(name + "_2", "xn_" + name + "_2")[:cols]  # rmsnorm.wgsl's output
        np.testing.assert_allclose(xn, xn2, rtol=1e-6, atol=1e-7)
        close(xn, xn_ref, rtol=1e-5, atol=1e-6)
    if fmt == "q8" and extra.get("q8_act", True):
        # the input quantised ahead: xn as rmsnorm.wgsl writes it, its codes and scales ggml's, the product the same
        y3 = c.out(name + "_3", "y_" + name + "_3")
        xn3 = c.out(name + "_3", "xn_" + name + "_3")[:cols]
        np.testing.assert_allclose(xn3, c.out(name + "_2", "xn_" + name + "_2")[:cols], rtol=1e-6, atol=1e-7)
        assert_q8_words(c.out(name + "_3", "xq_" + name, np.uint32), xn3)
        close(y3[y_base:y_base + rows], y2[y_base:y_base + rows], rtol=1e-4, atol=2e-3)
        close(y3[y_base:y_base + rows], y_ref, rtol=1e-4, atol=2e-3)
    if extra.get("xn"):
        # the fused product also writing xn quantised: the same product and xn, bit for bit, and xn's Q8_0 codes
        np.testing.assert_array_equal(c.out(name + "_4", "y_" + name + "_4"), y)
        xn4 = c.out(name + "_4", "xn_" + name + "_4")[:cols]
        np.testing.assert_array_equal(xn4, c.out(name, "xn_" + name)[:cols])
        assert_q8_words(c.out(name + "_4", "xq_" + name + "_4", np.uint32), xn4)


def test_matvec_norm_fallback_needs_xn_out(norm_run):
    _, _, info = norm_run
    assert "needs xn_out" in info["results"]["nmv_f32act_no_xn"]


# --- the shader loader (CPython, no GPU) --------------------------------------------------------------------------
def test_shader_loader_includes_and_constants(tmp_path):
    from py_engine.gpu.shader_loader import ShaderError, ShaderLoader

    (tmp_path / "a.wgsl").write_text('#include "b_{{V}}.wgsl"\n#include "b_{{V}}.wgsl"\nconst N = {{N}}u;\n')
    (tmp_path / "b_x.wgsl").write_text("fn b() {}\n")
    (tmp_path / "loop.wgsl").write_text('#include "loop2.wgsl"\n')
    (tmp_path / "loop2.wgsl").write_text('#include "loop.wgsl"\n')
    src = ShaderLoader(tmp_path).source("a.wgsl", {"V": "x", "N": 64})
    assert src.count("fn b() {}") == 1 and "const N = 64u;" in src
    with pytest.raises(ShaderError, match="no value given for"):
        ShaderLoader(tmp_path).source("a.wgsl", {"V": "x"})
    with pytest.raises(ShaderError, match="not found"):
        ShaderLoader(tmp_path).source("a.wgsl", {"V": "y", "N": 1})
    assert ShaderLoader(tmp_path).source("loop.wgsl").count("#include") == 0  # include-once ends cycles


@pytest.mark.parametrize("name,consts", [
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 4, "ROWS": 4, "ACCUMULATE": "false", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "f32", "LANES": 4, "ROWS": 1, "ACCUMULATE": "true", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 16, "ROWS": 1, "ACCUMULATE": "true", "NORM": "rms", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "f32", "XFMT": "f32s", "LANES": 8, "ROWS": 1, "ACCUMULATE": "false", "NORM": "rms", "ARGMAX": "none", "XN": "q8", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 16, "ROWS": 1, "ACCUMULATE": "true", "NORM": "gated", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 256}),
    ("matvec.wgsl", {"WFMT": "f32", "XFMT": "f32s", "LANES": 8, "ROWS": 1, "ACCUMULATE": "true", "NORM": "sgate", "ARGMAX": "parts", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("matvec.wgsl", {"WFMT": "q8", "XFMT": "q8pre", "LANES": 16, "ROWS": 4, "ACCUMULATE": "false", "NORM": "none", "ARGMAX": "none", "XN": "f32", "STAGED_BLOCKS": 64, "WG": 64}),
    ("moe_gate_up.wgsl", {"WFMT": "q8", "UFMT": "q8", "XFMT": "q8load", "LANES": 8, "ROUTED": "true", "ROWS": 2,
                          "ROUTE": "topk", "STAGED_BLOCKS": 64}),
    ("rmsnorm_q8.wgsl", {}),
    ("argmax_final.wgsl", {"STEP": "none", "WG": 256}),
    ("argmax_final.wgsl", {"STEP": "next", "WG": 1024}),
    ("qk_rope_append.wgsl", {"KV": "f16"}),
    ("moe_matvec.wgsl", {"WFMT": "f32", "XFMT": "f32", "LANES": 1, "ROWS": 1, "STAGED_BLOCKS": 16}),
    ("moe_matvec.wgsl", {"WFMT": "q8", "XFMT": "q8", "LANES": 4, "ROWS": 4, "STAGED_BLOCKS": 16}),
    ("attention.wgsl", {"KV": "f16", "QIN": "ready"}),
    ("attention.wgsl", {"KV": "f32", "QIN": "rope"}),
    ("kv_append_rows.wgsl", {"KV": "f32"}),
    ("embed.wgsl", {"WFMT": "q8"}),
])
def test_repo_shaders_assemble(name, consts):
    from py_engine.gpu.shader_loader import ShaderLoader

    src = ShaderLoader().source(name, consts)
    assert "#include" not in src and "{{" not in src and "fn main(" in src


def test_staging_sized_to_the_pipeline():
    """The workgroup staging of a product's input holds the blocks its pipeline stages, not the widest product's:
    workgroup memory bounds how many workgroups a GPU keeps resident (tools/h200/wave_sweep.mjs)."""
    from py_engine.gpu.shader_loader import ShaderLoader

    consts = {"WFMT": "q8", "LANES": 16, "ROWS": 4, "ACCUMULATE": "false", "ARGMAX": "none", "XN": "f32", "WG": 64}
    q8 = ShaderLoader().source("matvec.wgsl", {**consts, "XFMT": "q8", "NORM": "rms", "STAGED_BLOCKS": 64})
    assert "const XQ_BLOCKS: u32 = 64u;" in q8 and "array<vec4<u32>, 2u * XQ_BLOCKS>" in q8
    gated = ShaderLoader().source("matvec.wgsl", {**consts, "XFMT": "f32s", "NORM": "gated", "STAGED_BLOCKS": 16})
    assert "const XS_VECS: u32 = 8u * 16u;" in gated and "block_sq: array<f32, 16>" in gated
