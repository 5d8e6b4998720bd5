"""Sums of squares a residual product leaves for the next RMSNorm, on a real WebGPU device (Dawn on lavapipe in Node,
through Pyodide), against numpy.

A product that writes h (Kernels.matvec sq_out, shaders/row_sq_parts.wgsl) stores one sum of the squares of the
values it wrote per workgroup; the norm fused into the next product (norm=(weight, eps, squares),
shaders/x_norm_rmsparts.wgsl) takes its scale from those sums instead of a pass over h; where another kernel wrote h,
Kernels.row_squares (shaders/row_squares.wgsl) leaves the same sums.
"""
import json
import shutil

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference.layers import fake_quantize_q8_0 as fq
from node_helpers import KERNEL_HARNESS

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

# Runs inside Pyodide: each case is a list of steps on named buffers, recorded into one dispatch list.
NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.kernels import InputGate, matvec_lanes

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    bufs, squares, results = {}, {}, {}

    def buf(name):
        if name not in bufs:
            bufs[name] = upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)
        return bufs[name]

    def out(name, nbytes):
        if name not in bufs:
            bufs[name] = storage_buffer(gpu, nbytes, name)
        return bufs[name]

    def matrix(name, rows, cols, band_rows=None):
        band_rows = band_rows or rows
        codes = (d / f"in_{name}_codes.bin").read_bytes()
        scales = (d / f"in_{name}_scales.bin").read_bytes()
        bands = [(r0, min(band_rows, rows - r0), {3: upload(gpu, codes[r0 * cols:(r0 + band_rows) * cols]),
                                                  4: upload(gpu, scales[r0 * cols // 16:(r0 + band_rows) * cols // 16])})
                 for r0 in range(0, rows, band_rows)]
        return GpuMatrix(name, "q8", rows, cols, bands)

    for case in spec:
        kern = Kernels(gpu, pipes, step, matvec_multi_row_groups=case.get("multi_row_groups", 4096),
                       matvec_min_groups=0)
        dl = DispatchList()
        info = results.setdefault(case["name"], {})
        async with GpuErrorScope(gpu, "recording " + case["name"]):
            for s in case["steps"]:
                op = s["op"]
                try:
                    if op == "product":  # h (+)= W·x, leaving its sums of squares in s["sq"]
                        w = matrix(s["w"], s["rows"], s["cols"], s.get("band_rows"))
                        gate = InputGate("sgate", buf(s["gate"]), 32, 64, 32) if s.get("gate") else None
                        y = buf(s["y"]) if s.get("accumulate") else out(s["y"], 4 * s["rows"])
                        sq = buf(s["sq"]) if s.get("sq_init") else out(s["sq"], 4 * s.get("sq_len", s["rows"]))
                        r = kern.matvec(dl, w, buf(s["x"]), y, accumulate=s.get("accumulate", False), x_gate=gate,
                                        sq_out=sq, y_base=s.get("y_base", 0))
                        squares[s["sq"]] = r
                        info[s["sq"] + "_count"] = r.count
                        info[s["sq"] + "_per_group"] = 64 // matvec_lanes(s["rows"], s["cols"] // 32, 16, 0)
                    elif op == "norm_product":  # y = W · rmsnorm(x) · nw, the scale from s["sq"] where given
                        w = matrix(s["w"], s["rows"], s["cols"])
                        norm = (buf(s["nw"]), s["eps"]) + ((squares[s["sq"]],) if s.get("sq") else ())
                        kern.matvec(dl, w, bufs[s["x"]], out(s["y"], 4 * s["rows"]), norm=norm,
                                    xn_out=out(s["xn"], 4 * s["cols"]), x_base=s.get("x_base", 0))
                    elif op == "row_squares":
                        r = kern.row_squares(dl, bufs[s["h"]], s["n"], s["per_part"], out(s["sq"], 4 * s["n"]))
                        info[s["sq"] + "_count"] = r.count
                    info[s.get("key", op)] = "ok"
                except ValueError as e:
                    info[s.get("key", op)] = "ValueError: " + str(e)
        write_buffer(gpu, step, 0, struct.pack("<4I", 0, 0, 1, 0))
        dl.submit(gpu)
        for name in case["outputs"]:
            b = bufs[name]
            (d / f"out_{name}.bin").write_bytes(await rb.read(b, 0, int(b.size)))
        check_errors(gpu, case["name"])
    return results
'''

EPS = 1e-6


def q8(folder, name, rows, cols, rng):
    codes = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
    scales = (rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
    (folder / f"in_{name}_codes.bin").write_bytes(codes.tobytes())
    (folder / f"in_{name}_scales.bin").write_bytes(scales.tobytes())
    return (codes.reshape(rows, -1, 32).astype(np.float32) * scales[:, :, None].astype(np.float32)).reshape(rows, cols)


@pytest.fixture(scope="module")
def sq_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("row_squares")
    rng = np.random.default_rng(23)
    arr = lambda name, a: (d / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a, np.float32).tobytes())  # noqa
    n, k_in = 256, 128
    ref = {}
    for name, rows, cols in (("w_res", n, k_in), ("w_res_gated", n, 128), ("w_res4", n, k_in),
                             ("w_next", 96, n), ("w_tall", 1000, k_in), ("w_res14", 224, k_in),
                             ("w_next14", 40, 224)):
        ref[name] = q8(d, name, rows, cols, rng)
    arr("x_in", rng.standard_normal(k_in) * 3)
    arr("gate", rng.standard_normal(256))
    arr("h0", rng.standard_normal(n) * 2)
    ref["nw"] = (rng.standard_normal(n) * 0.5 + 1).astype(np.float32)
    arr("nw", ref["nw"])
    arr("h14", rng.standard_normal(224))
    arr("sq14", np.full(224, 1e3))  # what earlier sums left past the 14 this product writes
    spec = [
        # a residual product (h += W·x, 16 rows a workgroup), then the next product with the norm fused: from the
        # sums, and from its own pass
        dict(name="chain", steps=[
            dict(op="product", w="w_res", rows=n, cols=k_in, x="x_in", y="h0", accumulate=True, sq="sq"),
            dict(op="norm_product", w="w_next", rows=96, cols=n, x="h0", nw="nw", eps=EPS, sq="sq", y="y_parts",
                 xn="xn_parts"),
            dict(op="norm_product", w="w_next", rows=96, cols=n, x="h0", nw="nw", eps=EPS, y="y_pass",
                 xn="xn_pass"),
            dict(op="row_squares", h="h0", n=n, per_part=16, sq="sq_again")],
             outputs=["h0", "sq", "y_parts", "xn_parts", "y_pass", "xn_pass", "sq_again"]),
        # 14 sums (224 rows, 16 a workgroup): the norm's last vec4 of sums holds two, the rest of it is stale
        dict(name="chain14", steps=[
            dict(op="product", w="w_res14", rows=224, cols=k_in, x="x_in", y="h14", accumulate=True, sq="sq14",
                 sq_init=True),
            dict(op="norm_product", w="w_next14", rows=40, cols=224, x="h14", nw="nw", eps=EPS, sq="sq14",
                 y="y14", xn="xn14")],
             outputs=["h14", "xn14", "y14"]),
        # a product whose input is gated (256 lanes a workgroup), one of four rows per lane group, one in bands
        dict(name="gated", steps=[dict(op="product", w="w_res_gated", rows=n, cols=128, x="x_in", y="y_gated",
                                       gate="gate", sq="sq_gated")], outputs=["y_gated", "sq_gated"]),
        dict(name="rows4", multi_row_groups=0, steps=[
            dict(op="product", w="w_res4", rows=n, cols=k_in, x="x_in", y="y_rows4", sq="sq_rows4")],
             outputs=["y_rows4", "sq_rows4"]),
        dict(name="bands", steps=[dict(op="product", w="w_tall", rows=1000, cols=k_in, x="x_in", y="y_tall",
                                       band_rows=300, sq="sq_tall")], outputs=["y_tall", "sq_tall"]),
        # refusals: sums of a vector written from an offset; a norm over another width than the sums cover;
        # a buffer too small for the sums; rows per sum out of range
        dict(name="refusals", steps=[
            dict(op="product", w="w_res", rows=n, cols=k_in, x="x_in", y="y_off", y_base=4, sq="sq_off", key="off"),
            dict(op="product", w="w_res", rows=n, cols=k_in, x="x_in", y="y_ok", sq="sq_ok"),
            dict(op="norm_product", w="w_next", rows=96, cols=n, x="y_ok", nw="nw", eps=EPS, sq="sq_ok",
                 y="y_off2", xn="xn_off2", x_base=4),
            dict(op="row_squares", h="y_ok", n=n, per_part=0, sq="sq_zero")], outputs=[]),
        dict(name="small_buffer", steps=[dict(op="product", w="w_tall", rows=1000, cols=k_in, x="x_in",
                                              y="y_small", sq="sq_small", sq_len=8)], outputs=[]),
    ]
    (d / "spec.json").write_text(json.dumps(spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=300)
    out = lambda name: np.frombuffer((d / f"out_{name}.bin").read_bytes(), np.float32)  # noqa: E731
    return info, ref, out


def group_sums(y, per):
    y = y.astype(np.float64)
    return np.array([(y[i:i + per] ** 2).sum() for i in range(0, y.size, per)])


def test_one_sum_per_workgroup_of_the_rows_it_wrote(sq_run):
    info, _, out = sq_run
    for case, sq, y in (("chain", "sq", "h0"), ("gated", "sq_gated", "y_gated"), ("rows4", "sq_rows4", "y_rows4")):
        count = info[case][sq + "_count"]
        h = out(y)[:256]
        per = -(-256 // count)
        assert count == 256 // per  # whole workgroups of rows, one sum each
        np.testing.assert_allclose(out(sq)[:count], group_sums(h, per), rtol=1e-5)
    # 64 lanes of 4 per row: 16 rows a workgroup; the gated input's 256 lanes: 64; four rows per lane group: 64
    assert info["chain"]["sq_count"] == 256 // info["chain"]["sq_per_group"]
    assert info["gated"]["sq_gated_count"] == info["chain"]["sq_count"] // 4
    assert info["rows4"]["sq_rows4_count"] == info["chain"]["sq_count"] // 4


def test_bands_number_their_sums_on(sq_run):
    info, _, out = sq_run
    y = out("y_tall").astype(np.float64)
    per = info["bands"]["sq_tall_per_group"]
    want = np.concatenate([group_sums(y[r0:r0 + 300], per) for r0 in range(0, 1000, 300)])
    assert info["bands"]["sq_tall_count"] == want.size
    np.testing.assert_allclose(out("sq_tall")[:want.size], want, rtol=1e-5)


def test_norm_from_the_sums(sq_run):
    _, ref, out = sq_run
    h = out("h0").astype(np.float64)
    xn_parts, xn_pass = out("xn_parts"), out("xn_pass")
    # against float64, and against the norm's own pass (the sums' order differs: rounding, not bits)
    want = h / np.sqrt((h ** 2).mean() + EPS) * ref["nw"]
    np.testing.assert_allclose(xn_parts, want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(xn_parts, xn_pass, rtol=2e-6, atol=1e-7)
    # the product of what it staged: xn quantised per 32-block
    np.testing.assert_allclose(out("y_parts"), ref["w_next"].astype(np.float64) @ fq(xn_parts).astype(np.float64),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out("y_parts"), out("y_pass"), rtol=1e-2, atol=1e-2)


def test_norm_from_a_partial_last_vec4_of_sums(sq_run):
    info, ref, out = sq_run
    assert info["chain14"]["sq14_count"] == 14
    h = out("h14").astype(np.float64)
    want = h / np.sqrt((h ** 2).mean() + EPS) * ref["nw"][:224]
    np.testing.assert_allclose(out("xn14"), want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(out("y14"), ref["w_next14"].astype(np.float64) @ fq(out("xn14")).astype(np.float64),
                               rtol=1e-4, atol=1e-4)


def test_row_squares_repeats_the_products_sums_bit_for_bit(sq_run):
    info, _, out = sq_run
    count = info["chain"]["sq_again_count"]
    assert count == info["chain"]["sq_count"] and info["chain"]["sq_per_group"] == 16
    assert (out("sq_again")[:count].view(np.uint32) == out("sq")[:count].view(np.uint32)).all()


def test_refusals(sq_run):
    info = sq_run[0]
    assert "only of a whole vector written from 0" in info["refusals"]["off"]
    assert info["refusals"]["product"] == "ok"
    assert "from 4" in info["refusals"]["norm_product"]
    assert "1 to 256" in info["refusals"]["row_squares"]
    assert "do not fit 32 bytes" in info["small_buffer"]["product"]
