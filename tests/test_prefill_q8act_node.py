"""The prefill chunk's Q8_0 activation quantisation (shaders/quantize_rows.wgsl through ChunkKernels.quantize_rows)
and the GEMMs that read it, on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide), against the numpy
emulation of llama.cpp's quantize_row_q8_0 (diskformer.reference.layers.fake_quantize_q8_0).

The quantised rows must match exactly: random rows, rows with all-zero blocks, blocks whose scale is an f16
subnormal, one dominant value per block, strided and offset rows, k rows per token (the experts' activations) and a
short chunk (rows past chunk.n untouched). A code at an exact .5 tie of x · 127 / amax may round one step apart
where the device's division differs from numpy's in the last bit: at most a tiny fraction of values, each exactly
one step d off. The GEMMs (dense, routed gate/up reading a token row per pick, routed down reading each pick's
row) over the quantised rows must equal fake_quantize_q8_0(x) @ W.T up to f32 accumulation.
"""
import json
import shutil

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS
from diskformer.reference.layers import fake_quantize_q8_0

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    kern = Kernels(gpu, pipes, create_buffer(gpu, 16, UNIFORM | COPY_DST, "step"))
    rb = Readback(gpu)

    def inp(name):
        return upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)

    def matrix(name, rows, cols):
        bufs = {3: inp(name + "_codes"), 4: inp(name + "_scales")}
        return GpuMatrix(name, "q8", rows, cols, [(0, rows, bufs)])

    for a in spec:
        name = a["name"]
        chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        write_buffer(gpu, chunk, 0, struct.pack("<4I", a["n"], 0, 0, 0))
        ck = ChunkKernels(kern, chunk, a["T"])
        dl = DispatchList()
        xq = inp(name + "_xq0")
        y = inp(name + "_y0") if a["kernel"] != "quantize" else None
        async with GpuErrorScope(gpu, "recording " + name):
            ck.quantize_rows(dl, inp(name + "_x"), xq, a["cols"], a["row_mult"], a["x_stride"], a["x_base"],
                             a["q_stride"], a["q_base"])
            if a["kernel"] == "gemm":
                ck.gemm(dl, matrix(name + "_w", a["rows"], a["cols"]), xq, y, a["q_stride"], a["rows"],
                        x_base=a["q_base"])
            elif a["kernel"] == "experts":
                pool = matrix(name + "_w", a["n_exp"] * a["rows"], a["cols"])
                ck.expert_gemm(dl, pool, a["rows"], a["k"], xq, y, inp(name + "_grouped"), inp(name + "_slot_map"),
                               0, a["n_exp"], inp(name + "_mask"), a["cols"], a["x_div"])
        dl.submit(gpu)
        (d / f"out_{name}_xq.bin").write_bytes(await rb.read(xq, 0, int(xq.size)))
        if y is not None:
            (d / f"out_{name}_y.bin").write_bytes(await rb.read(y, 0, int(y.size)))
        check_errors(gpu, name)
    return {"adapter": gpu.info}
'''

SENTINEL = -7.25  # in every slot the kernels must not write
TIE_FRACTION = 1e-4  # quantised values allowed one step apart (exact .5 ties under a last-bit division difference)


def _rows(rng, n_rows, cols, kind):
    """Activation rows of one shape of interest (f32)."""
    x = rng.standard_normal((n_rows, cols)).astype(np.float32)
    blocks = x.reshape(n_rows, cols // 32, 32)
    if kind == "mixed":
        blocks[0, 0] = 0.0  # amax = 0: codes and scale 0
        blocks[:, -1] *= np.float32(3e-7)  # d = amax / 127 an f16 subnormal
        blocks[1 % n_rows, 1 % (cols // 32)] *= np.float32(4e3)  # a large block
        blocks[:, 0, 5] *= np.float32(40.0)  # one dominant value: the others round to few codes
    return x


class Cases:
    def __init__(self, folder, rng):
        self.dir, self.rng = folder, rng
        self.spec, self.x, self.ref = [], {}, {}

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())

    def weights(self, name, rows, cols):
        codes = self.rng.integers(-128, 128, size=(rows, cols), dtype=np.int8)
        scales = (self.rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        return (codes.reshape(rows, cols // 32, 32).astype(np.float32)
                * scales[:, :, None].astype(np.float32)).reshape(rows, cols)

    def _quantized(self, name, kind, cols, n, T, row_mult=1, x_base=0, x_extra=0, q_base=0, q_extra=0):
        """Input rows (T · row_mult of them, n · row_mult in use) and the expected quantised scratch."""
        x_stride, q_stride = cols + x_base + x_extra, cols + q_base + q_extra
        rows, used = T * row_mult, n * row_mult
        x = np.full((rows, x_stride), 1e6, np.float32)  # outside the rows' columns: huge, must not leak in
        x[:, x_base:x_base + cols] = _rows(self.rng, rows, cols, kind)
        xq = np.full((rows, q_stride), SENTINEL, np.float32)
        xq[:used, q_base:q_base + cols] = fake_quantize_q8_0(x[:used, x_base:x_base + cols])
        self.arr(name + "_x", x)
        self.arr(name + "_xq0", np.full((rows, q_stride), SENTINEL, np.float32))
        self.x[name] = x
        self.ref[name + "_xq"] = xq.ravel()
        return dict(name=name, cols=cols, n=n, T=T, row_mult=row_mult, x_stride=x_stride, x_base=x_base,
                    q_stride=q_stride, q_base=q_base), xq[:, q_base:q_base + cols]

    def quantize(self, name, kind, cols, n, T=None, **kw):
        a, _ = self._quantized(name, kind, cols, n, T or n, **kw)
        self.spec.append(dict(a, kernel="quantize"))

    def gemm(self, name, rows, cols, n, T=None, **kw):
        T = T or n
        a, xq = self._quantized(name, "mixed", cols, n, T, **kw)
        W = self.weights(name + "_w", rows, cols)
        y = np.full((T, rows), SENTINEL, np.float64)
        y[:n] = xq[:n].astype(np.float64) @ W.astype(np.float64).T
        self.arr(name + "_y0", np.full(T * rows, SENTINEL, np.float32))
        self.ref[name + "_y"] = y.ravel()
        self.spec.append(dict(a, kernel="gemm", rows=rows))

    def experts(self, name, rows, cols, T, k, n_exp, x_div):
        """Routed picks p = token · k + j over n_exp experts (slot = expert); x row of pick p: p // x_div."""
        row_mult = k // x_div
        a, xq = self._quantized(name, "random", cols, T, T, row_mult=row_mult)
        P = self.weights(name + "_w", n_exp * rows, cols).reshape(n_exp, rows, cols)
        route = np.array([self.rng.permutation(n_exp)[:k] for _ in range(T)]).ravel()
        picks = [np.flatnonzero(route == e).astype(np.uint32) for e in range(n_exp)]
        counts = np.array([len(p) for p in picks], np.uint32)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
        self.arr(name + "_grouped", np.concatenate([counts, offsets] + picks))
        self.arr(name + "_slot_map", np.arange(n_exp, dtype=np.uint32))
        self.arr(name + "_mask", np.ones(n_exp, np.uint32))
        self.arr(name + "_y0", np.full(T * k * rows, SENTINEL, np.float32))
        y = np.array([P[route[p]].astype(np.float64) @ xq[p // x_div].astype(np.float64) for p in range(T * k)])
        self.ref[name + "_y"] = y.ravel()
        self.spec.append(dict(a, kernel="experts", rows=rows, k=k, n_exp=n_exp, x_div=x_div))


@pytest.fixture(scope="module")
def q8_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("prefill_q8act")
    c = Cases(d, np.random.default_rng(5))
    c.quantize("q_random", "random", 2048, 65)
    c.quantize("q_mixed", "mixed", 96, 40)
    c.quantize("q_short_strided", "mixed", 160, 23, T=32, x_base=32, x_extra=7, q_base=64, q_extra=3)
    c.quantize("q_k_rows", "random", 64, 9, T=16, row_mult=4)
    c.gemm("g_t65", 129, 256, 65)
    c.gemm("g_short_offset", 300, 96, 37, T=64, x_base=32, x_extra=5, q_base=32, q_extra=1)
    c.experts("e_gate_up", 96, 128, T=20, k=4, n_exp=6, x_div=4)
    c.experts("e_down", 64, 96, T=20, k=4, n_exp=6, x_div=1)
    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=600)
    return c, d, info


def _names(kernel):
    return {"quantize": ["q_random", "q_mixed", "q_short_strided", "q_k_rows"],
            "gemm": ["g_t65", "g_short_offset", "e_gate_up", "e_down"]}[kernel]


def _out(d, name):
    return np.frombuffer((d / f"out_{name}.bin").read_bytes(), np.float32)


@pytest.mark.parametrize("name", _names("quantize") + _names("gemm"))
def test_quantized_rows_match_ggml(q8_run, name):
    c, d, _ = q8_run
    got, ref = _out(d, name + "_xq"), c.ref[name + "_xq"].astype(np.float32)
    assert got.shape == ref.shape
    untouched = ref == SENTINEL
    assert np.array_equal(got[untouched], ref[untouched]), f"{name}: wrote outside its rows / columns"
    diff = np.flatnonzero(got != ref)
    if diff.size:
        # ties only: each differing value one code step (d of its block) away, and rare
        a = c.spec[[s["name"] for s in c.spec].index(name)]
        rows = c.x[name][:, a["x_base"]:a["x_base"] + a["cols"]]
        d_blk = (np.abs(rows.reshape(rows.shape[0], -1, 32)).max(axis=-1) / np.float32(127)).astype(np.float16)
        q = ref.reshape(rows.shape[0], a["q_stride"])
        r, col = np.divmod(diff, a["q_stride"])
        step = d_blk[r, (col - a["q_base"]) // 32].astype(np.float32)
        assert np.array_equal(np.abs(got[diff] - q.ravel()[diff]), step), f"{name}: values off by more than a tie"
        assert diff.size <= TIE_FRACTION * (~untouched).sum() + 1, f"{name}: {diff.size} tie differences"


@pytest.mark.parametrize("name", _names("gemm"))
def test_gemm_over_quantized_rows(q8_run, name):
    c, d, _ = q8_run
    got, ref = _out(d, name + "_y").astype(np.float64), c.ref[name + "_y"]
    assert got.shape == ref.shape
    untouched = ref == SENTINEL
    assert np.array_equal(got[untouched], ref[untouched]), f"{name}: wrote outside its rows / tokens"
    scale = np.abs(ref[~untouched]).max()
    err = np.abs(got - ref).max()
    assert err <= 1e-5 * scale + 1e-6, f"{name}: max error {err} (scale {scale})"
