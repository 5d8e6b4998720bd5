"""RMSNorm fused into a product's staging (matvec prep=NormedInput) on a real WebGPU device against numpy and against
the same norm and product as two dispatches."""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference.layers import fake_quantize_q8_0 as fq  # what Q8_0 products do to their input
from kernel_cases import CASES_NODE_CODE, Case, close


# --- matvec with the preceding RMSNorm fused in (prep=NormedInput) ------------------------------------------------
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
    info = run_in_node(CASES_NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
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
