"""Every kernel in shaders/ run on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide) against numpy.

CPython writes the inputs to a temporary folder; one Node process (start-up costs seconds) runs all the kernels
through py_engine.gpu and writes the outputs back; numpy checks them here.
"""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from kernel_cases import CASES_NODE_CODE, Case, close
from diskformer.reference.layers import fake_quantize_q8_0 as fq  # what Q8_0 products do to their input


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
    # head_dim 512 (gemma4's global layers: two value pairs per lane), split over 4 workgroups per head (3 with
    # positions) and merged; a sliding window of 32 over a ring of 95 rows, split in 2
    for name, nh, nkv, hd, rows, pos, window, splits in (("attn_hd512", 4, 2, 512, 200, 130, None, 4),
                                                          ("attn_window", 8, 4, 64, 95, 150, 32, 2)):
        qw = rng.standard_normal(nh * hd).astype(np.float32)
        kw = (rng.standard_normal((rows, nkv, hd)) * 0.2).astype(np.float16)
        vw = rng.standard_normal((rows, nkv, hd)).astype(np.float16)
        c.arr(f"q_{name}", qw)
        c.arr(f"kc_{name}", kw)
        c.arr(f"vc_{name}", vw)
        c.add(name=name, kernel="attention", kv="f16", q=f"q_{name}", kc=f"kc_{name}", vc=f"vc_{name}",
              y=f"y_{name}", n_head=nh, n_kv=nkv, hd=hd, scale=0.5, pos=pos, max_splits=splits,
              window=[window, rows] if window else None, outputs=[f"y_{name}"])
        seen = [p % rows for p in range(pos - window + 1 if window else 0, pos + 1)]  # ring rows of the window
        o = []
        for h in range(nh):
            g = h // (nh // nkv)
            sc = kw[seen, g].astype(np.float64) @ qw[h * hd:(h + 1) * hd] * 0.5
            pr = np.exp(sc - sc.max())
            o.append((pr / pr.sum()) @ vw[seen, g].astype(np.float64))
        ref[name] = np.concatenate(o)

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
    info = run_in_node(CASES_NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    return c, ref, info


def test_kernels_run_on_a_device_without_shader_f16(kernel_run):
    """No shader-f16 requirement (f16 data is packed in u32): open_gpu never asks for the feature, whatever the
    adapter offers, and every kernel case ran on that device; no shader enables f16, so none needs it to compile."""
    c, _, info = kernel_run
    assert info["adapter"]["description"]
    assert "shader-f16" not in info["device_features"], (info["adapter_features"], info["device_features"])
    for case in c.spec:  # each case's outputs came back from the device (a failed compile or dispatch raises there)
        for name in case["outputs"]:
            assert (c.dir / f"out_{case['name']}_{name}.bin").is_file(), (case["name"], name)
    shaders = sorted((Path(__file__).resolve().parents[2] / "shaders").rglob("*.wgsl"))
    assert shaders
    assert not [p.name for p in shaders if re.search(r"^\s*enable\s+f16\b", p.read_text(encoding="utf-8"), re.M)]


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


@pytest.mark.parametrize("name,size", [("attn_hd512", 4 * 512), ("attn_window", 8 * 64)])
def test_attention_wide_heads_and_sliding_windows(kernel_run, name, size):
    c, ref, _ = kernel_run
    close(c.out(name, f"y_{name}")[:size], ref[name], rtol=2e-4, atol=2e-5)


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
