"""gemma4's weight formats on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide) against the numpy
reference's dequantisation (diskformer/reference/dequant.py): the Q4_0 product (py_engine.gpu.q4_kernels.q4_matvec)
reading the store's nibble and scale planes (py_engine.gguf.split_q4_0) with its input quantised to Q8_0 as
llama.cpp does, the Q6_K embedding lookup (embed_scaled), which must equal ggml's dequantisation bit for bit, the tied
output head (Kernels.matvec over the Q6_K rows) and the prefill's GEMM over Q4_0 weights (ChunkKernels.gemm, with
the chunk's rows quantised to Q8_0 while staged and as f32 rows).

CPython writes the raw GGUF blocks and the case list to a folder; one Node process runs every case and writes the
outputs back; numpy checks them here.
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference.dequant import Q6_K_BLOCK_BYTES, dequantize_q4_0, dequantize_q6_k
from diskformer.reference.layers import fake_quantize_q8_0, rms_norm
from node_helpers import KERNEL_HARNESS
from py_engine.gguf import split_q4_0

NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu import q4_kernels

def pad4(b):
    return b + b"\0" * (-len(b) % 4)

def band_matrix(gpu, d, m):
    """A GpuMatrix of the case folder's planes (q4: _codes, _scales; q6k: the raw blocks) in bands of m["band"] rows."""
    rows, cols, band = m["rows"], m["cols"], m.get("band") or m["rows"]
    if m["fmt"] == "q4":
        planes = {3: ((d / f"in_{m['name']}_codes.bin").read_bytes(), cols // 2),
                  4: ((d / f"in_{m['name']}_scales.bin").read_bytes(), cols // 16)}
    else:
        planes = {3: ((d / f"in_{m['name']}.bin").read_bytes(), cols // 256 * 210)}
    bands = []
    for r0 in range(0, rows, band):
        n = min(band, rows - r0)
        bands.append((r0, n, {k: upload(gpu, pad4(data[r0 * per_row:(r0 + n) * per_row]))
                              for k, (data, per_row) in planes.items()}))
    return GpuMatrix(m["name"], m["fmt"], rows, cols, bands)

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    rb = Readback(gpu)
    errors = {}
    for case in spec:
        kern = Kernels(gpu, pipes, step, lane_cap=case.get("lane_cap", 16), q8_act=case.get("q8_act", True),
                       matvec_multi_row_groups=case.get("multi_row_groups", 4096), matvec_min_groups=0)
        dl = DispatchList()
        w = band_matrix(gpu, d, case["matrix"])
        y = upload(gpu, (d / f"in_{case['y0']}.bin").read_bytes(), "y") if case.get("y0") else \
            storage_buffer(gpu, case["y_len"] * 4, "y")
        try:
            async with GpuErrorScope(gpu, "recording " + case["name"]):
                if case["kernel"] == "matvec":  # the shared launcher over a Q6_K (head) or Q4_0 matrix
                    x = upload(gpu, (d / f"in_{case['x']}.bin").read_bytes(), "x")
                    kern.matvec(dl, w, x, y, argmax_out=None)
                elif case["kernel"] == "gemm":  # the prefill's tiled GEMM over a chunk of rows
                    from py_engine.gpu.chunk_kernels import ChunkKernels
                    from py_engine.gpu.chunk_shapes import GemmRows
                    chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
                    write_buffer(gpu, chunk, 0, struct.pack("<4I", case["n"], 0, 0, 0))
                    x = upload(gpu, (d / f"in_{case['x']}.bin").read_bytes(), "x")
                    ChunkKernels(kern, chunk, case["T"]).gemm(dl, w, x, y, GemmRows(w.cols, w.rows))
                elif case["kernel"] == "q4_matvec":
                    x = upload(gpu, (d / f"in_{case['x']}.bin").read_bytes(), "x")
                    norm = (upload(gpu, (d / f"in_{case['nw']}.bin").read_bytes(), "nw"), case["eps"]) \
                        if case.get("nw") else None
                    q4_kernels.q4_matvec(kern, dl, w, x, y, case["x_base"], case["y_base"], case.get("accumulate",
                                         False), norm)
                else:
                    q4_kernels.embed_scaled(kern, dl, w, y, case["scale"])
        except ValueError as exc:
            errors[case["name"]] = str(exc)
            continue
        write_buffer(gpu, step, 0, struct.pack("<4I", case.get("token", 0), 0, 1, 0))
        dl.submit(gpu)
        (d / f"out_{case['name']}.bin").write_bytes(await rb.read(y, 0, int(y.size)))
        check_errors(gpu, case["name"])
    return {"errors": errors}
'''


def q4_0_blocks(rng, rows, cols):
    """Random Q4_0 rows (18-byte blocks: f16 scale, 16 bytes of nibbles), every code 0..15 present."""
    n_blocks = rows * cols // 32
    scales = (rng.random(n_blocks) * 0.02 + 0.001).astype(np.float16) * rng.choice([-1, 1], n_blocks)
    nibbles = rng.integers(0, 256, size=(n_blocks, 16), dtype=np.uint8)
    nibbles[0] = np.arange(16) * 17  # codes 0..15 in both nibbles
    raw = np.concatenate([scales.astype(np.float16).view(np.uint8).reshape(-1, 2), nibbles], axis=1)
    return raw.reshape(rows, cols // 32 * 18)


def q6_k_blocks(rng, rows, cols):
    """Random Q6_K rows: any bits for ql, qh and the int8 scales; a normal f16 d (either sign)."""
    n_blocks = rows * cols // 256
    raw = rng.integers(0, 256, size=(n_blocks, Q6_K_BLOCK_BYTES), dtype=np.uint8)
    d = ((rng.random(n_blocks) * 0.01 + 1e-3) * rng.choice([-1, 1], n_blocks)).astype(np.float16)
    raw[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, cols // 256 * Q6_K_BLOCK_BYTES)


class Cases:
    def __init__(self, folder):
        self.dir, self.spec = folder, []

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        return name

    def q4(self, name, raw):
        """The store's planes of raw Q4_0 rows (what the kernel reads)."""
        codes, scales = split_q4_0(raw.tobytes())
        (self.dir / f"in_{name}_codes.bin").write_bytes(codes)
        (self.dir / f"in_{name}_scales.bin").write_bytes(scales)

    def out(self, name):
        return np.frombuffer((self.dir / f"out_{name}.bin").read_bytes(), np.float32)


@pytest.fixture(scope="module")
def q4_run(tmp_path_factory):
    c = Cases(tmp_path_factory.mktemp("q4_kernels"))
    rng = np.random.default_rng(11)
    expect = {}
    K, R = 512, 100
    raw = q4_0_blocks(rng, R, K)
    c.q4("wq4", raw)
    W = dequantize_q4_0(raw).astype(np.float64)
    x = rng.standard_normal(K + 32).astype(np.float32)
    c.arr("x", x)
    mat = {"name": "wq4", "fmt": "q4", "rows": R, "cols": K, "band": 64}
    for cap in (1, 4, 16):
        for rows_per in (4096, 0):  # one row per lane group, and 4 (the tall matrices' shape)
            name = f"q4_l{cap}_r{'4' if rows_per == 0 else '1'}"
            c.spec.append({"name": name, "kernel": "q4_matvec", "matrix": mat, "x": "x", "x_base": 32, "y_base": 10,
                           "y_len": R + 10, "lane_cap": cap, "multi_row_groups": rows_per})
            expect[name] = (10, W @ fake_quantize_q8_0(x[32:]).astype(np.float64))
    y0 = rng.standard_normal(R).astype(np.float32)
    c.arr("y0", y0)
    c.spec.append({"name": "q4_accumulate", "kernel": "q4_matvec", "matrix": mat, "x": "x", "x_base": 32,
                   "y_base": 0, "y0": "y0", "accumulate": True})
    expect["q4_accumulate"] = (0, W @ fake_quantize_q8_0(x[32:]).astype(np.float64) + y0)
    c.spec.append({"name": "q4_f32_act", "kernel": "q4_matvec", "matrix": mat, "x": "x", "x_base": 32, "y_base": 0,
                   "y_len": R, "q8_act": False})
    expect["q4_f32_act"] = (0, W @ x[32:].astype(np.float64))
    nw = (1 + 0.1 * rng.standard_normal(K)).astype(np.float32)
    c.arr("nw", nw)
    c.spec.append({"name": "q4_norm", "kernel": "q4_matvec", "matrix": mat, "x": "x", "x_base": 0, "y_base": 0,
                   "y_len": R, "nw": "nw", "eps": 1e-6})
    xn = rms_norm(x[:K].astype(np.float32), nw, np.float32(1e-6)).astype(np.float32)
    expect["q4_norm"] = (0, W @ fake_quantize_q8_0(xn).astype(np.float64))

    # the Q6_K token table: 2 bands of rows (a band's bytes start mid-word), the token in the second; scaled
    V, H = 37, 512
    table = q6_k_blocks(rng, V, H)
    c.arr("emb", table)
    values = dequantize_q6_k(table)
    emb = {"name": "emb", "fmt": "q6k", "rows": V, "cols": H, "band": 13}
    scale = float(np.sqrt(np.float32(H)))
    for token, s in ((29, scale), (5, 1.0), (36, scale)):
        name = f"embed_q6k_{token}"
        c.spec.append({"name": name, "kernel": "embed", "matrix": emb, "y_len": H, "token": token, "scale": s})
        expect[name] = values[token] * np.float32(s)
    c.spec.append({"name": "embed_q6k_partial_block", "kernel": "embed", "y_len": 16, "scale": 1.0,
                   "matrix": {"name": "emb", "fmt": "q6k", "rows": 2, "cols": 160}})
    c.spec.append({"name": "q4_wrong_format", "kernel": "q4_matvec", "matrix": emb, "x": "x", "x_base": 0,
                   "y_base": 0, "y_len": V})

    # the tied output head: a matvec over Q6_K rows in bands, f32 activations, each weight dequantised exactly
    xh = rng.standard_normal(H).astype(np.float32)
    c.arr("xh", xh)
    for cap in (4, 16):
        name = f"head_q6k_l{cap}"
        c.spec.append({"name": name, "kernel": "matvec", "matrix": emb, "x": "xh", "y_len": V, "lane_cap": cap})
        expect[name] = (0, values.astype(np.float64) @ xh.astype(np.float64))
    # the prefill's GEMM over Q4_0 weights: 20 rows of a 32-row chunk, x quantised to Q8_0 while staged (int8
    # tiles) and as f32 rows
    T, n = 32, 20
    xs = rng.standard_normal((T, K)).astype(np.float32)
    c.arr("xs", xs)
    for q8 in (True, False):
        name = f"gemm_q4_{'q8' if q8 else 'f32'}"
        c.spec.append({"name": name, "kernel": "gemm", "matrix": mat, "x": "xs", "y_len": T * R, "T": T, "n": n,
                       "q8_act": q8})
        xq = np.stack([fake_quantize_q8_0(r) for r in xs[:n]]) if q8 else xs[:n]
        expect[name] = (0, (xq.astype(np.float64) @ W.T).reshape(-1))
    (c.dir / "spec.json").write_text(json.dumps(c.spec))
    result = run_in_node(NODE_CODE, {"dir": str(c.dir)}, mounts=[c.dir], timeout=600)
    return c, expect, result


def test_q4_0_products_equal_the_reference(q4_run):
    c, expect, _ = q4_run
    names = [n for n in expect if n.startswith("q4_")]  # (the head and GEMM cases: the test below)
    for name in names:
        base, want = expect[name]
        got = c.out(name)[base:base + len(want)]
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=name)
    # the f32-activation mode differs from the Q8_0-activation one by the input's rounding, which the test sees
    diff = np.max(np.abs(expect["q4_f32_act"][1] - expect["q4_l16_r1"][1]))
    assert diff > 1e-3


@pytest.mark.parametrize("name", ["head_q6k_l4", "head_q6k_l16", "gemm_q4_q8", "gemm_q4_f32"])
def test_q6_k_head_and_q4_0_gemm_equal_the_reference(q4_run, name):
    c, expect, _ = q4_run
    base, want = expect[name]
    got = c.out(name)[base:base + len(want)]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=name)


def test_q6_k_embedding_is_ggmls_dequantisation_bit_for_bit(q4_run):
    c, expect, _ = q4_run
    for name in [n for n in expect if n.startswith("embed_")]:
        assert np.array_equal(c.out(name), expect[name].astype(np.float32)), name


def test_launchers_refuse_what_they_cannot_run(q4_run):
    _, _, result = q4_run
    assert result["errors"] == {
        "embed_q6k_partial_block": "emb: Q6_K rows of 160 values are not whole 256-value blocks",
        "q4_wrong_format": "emb: q4_matvec multiplies Q4_0 matrices, not 'q6k'",
    }
