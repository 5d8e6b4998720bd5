"""The prefill's fused routed FFN for few picks per expert on a real WebGPU device (Dawn on lavapipe in Node, through
Pyodide): the chunk's norm writing its rows also quantised (rmsnorm_q8.wgsl over T rows), gate/up/SwiGLU in one
dispatch reading them (shaders/moe_gate_up_few.wgsl) and writing act quantised, the down product reading that
(moe_gemm_few.wgsl with moe_x_q8.wgsl): ChunkKernels.rmsnorm(xq=), expert_gate_up, expert_gemm(x_q8=True).

The same inputs also run through the separate path (the f32 norm rows into gate and up products, silu_mul, the down
product quantising the f32 act rows while staging) in the same process. Checked: the norm's codes and scales are
the Q8_0 quantisation of its f32 rows, the fused act codes and scales exactly the Q8_0 quantisation of the separate
path's act rows (llama.cpp's rounding, numpy), the down outputs of both paths agree, gate and up against numpy, and
nothing is written for the picks of absent or masked experts. Cases: an expert past several passes of 8 picks, an FFN
width that leaves the last workgroup one output block (96 rows), K of 3 and of 64 blocks.
"""
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference.layers import fake_quantize_q8_0, quantize_q8_0
from node_helpers import KERNEL_HARNESS


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels
from py_engine.gpu.chunk_shapes import ExpertGemmShape, ExpertRouting

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    kern = Kernels(gpu, pipes, step)
    rb = Readback(gpu)

    def inp(name):
        return upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)

    def pool(name, rows, cols):
        codes, scales = inp(name + "_codes"), inp(name + "_scales")
        return GpuMatrix(name, "q8", rows, cols, [(0, rows, {3: codes, 4: scales})])

    fused = {}
    for a in spec:
        n, T, k, ffn, e, slots = a["name"], a["T"], a["k"], a["ffn"], a["e"], a["slots"]
        chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        write_buffer(gpu, chunk, 0, struct.pack("<4I", T, 0, 0, 0))
        ck = ChunkKernels(kern, chunk, T)
        gate, up, down = (pool(f"{n}_{p}", slots * r, c) for p, r, c in (("gate", ffn, e), ("up", ffn, e),
                                                                         ("down", e, ffn)))
        fused[n] = ck.fused_gate_up(gate, up, down, k, a["n_exp"])
        h, norm_w, grouped, slot_map, mask = (inp(f"{n}_{s}") for s in ("h", "norm_w", "grouped", "slot_map", "mask"))
        route = ExpertRouting(k, a["n_exp"], grouped, slot_map, a["map_base"], mask)
        gate_up_shape, down_shape = ExpertGemmShape(ffn, e, k), ExpertGemmShape(e, ffn, 1)
        outs = {s: inp(f"{n}_{s}0") for s in ("x", "xq", "g", "u", "act", "actq", "y_sep", "y_fused")}
        x = outs["x"]
        dl = DispatchList()
        async with GpuErrorScope(gpu, "recording " + n):
            ck.rmsnorm(dl, h, norm_w, x, e, 1e-6, xq=outs["xq"])
            ck.expert_gemm(dl, gate, x, outs["g"], route, gate_up_shape)
            ck.expert_gemm(dl, up, x, outs["u"], route, gate_up_shape)
            kern.silu_mul(dl, outs["g"], outs["u"], outs["act"], T * k * ffn)
            ck.expert_gemm(dl, down, outs["act"], outs["y_sep"], route, down_shape)
            ck.expert_gate_up(dl, gate, up, outs["xq"], outs["actq"], route, gate_up_shape)
            ck.expert_gemm(dl, down, outs["actq"], outs["y_fused"], route, down_shape, x_q8=True)
        dl.submit(gpu)
        for s, buf in outs.items():
            (d / f"out_{n}_{s}.bin").write_bytes(await rb.read(buf, 0, int(buf.size)))
        check_errors(gpu, n)
    try:
        many = ExpertRouting(4096, a["n_exp"], grouped, slot_map, a["map_base"], mask)
        ck.expert_gemm(dl, gate, x, outs["g"], many, gate_up_shape, x_q8=True)
        refused = ""
    except ValueError as err:
        refused = str(err)
    return {"fused": fused, "refused": refused, "limit": gpu.limits.get("maxStorageBuffersPerShaderStage")}
'''

SENTINEL = -7.25
WORD_SENTINEL = 0x5EED5EED


def _q8_codes_scales(rows):
    """llama.cpp's Q8_0 quantisation of f32 rows: int8 codes per 32-block (blocks, 32) and f32 scales (blocks)."""
    codes, d = quantize_q8_0(rows)
    return codes.reshape(-1, 32), d.reshape(-1)


class Cases:
    def __init__(self, folder, rng):
        self.dir, self.rng = folder, rng
        self.spec, self.info = [], {}

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())

    def weights(self, name, rows, cols):
        codes = self.rng.integers(-128, 128, size=(rows, cols), dtype=np.int8)
        scales = (self.rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        blocks = codes.reshape(rows, cols // 32, 32).astype(np.float32) * scales[:, :, None].astype(np.float32)
        return blocks.reshape(rows, cols)

    def ffn(self, name, ffn, e, T, k, counts, absent=(), masked=()):
        n_exp = len(counts)
        slots = n_exp + 1
        G = self.weights(name + "_gate", slots * ffn, e).reshape(slots, ffn, e)
        U = self.weights(name + "_up", slots * ffn, e).reshape(slots, ffn, e)
        self.weights(name + "_down", slots * e, ffn)
        slot_of = self.rng.permutation(slots)[:n_exp].astype(np.uint32)
        map_base = 2
        slot_map = np.full(map_base + n_exp, 0xFFFFFFFF, np.uint32)
        slot_map[map_base:] = slot_of
        for x in absent:
            slot_map[map_base + x] = 0xFFFFFFFF
        mask = np.ones(n_exp, np.uint32)
        mask[list(masked)] = 0
        n_picks = T * k
        order = self.rng.permutation(n_picks)
        ends = np.cumsum(counts)
        picks = [np.sort(order[end - c:end]).astype(np.uint32) for c, end in zip(counts, ends)]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
        grouped = np.concatenate([np.array(counts, np.uint32), offsets] + picks)
        h = self.rng.standard_normal((T, e)).astype(np.float32)
        norm_w = (self.rng.random(e) + 0.5).astype(np.float32)
        for nm, v in (("_h", h), ("_norm_w", norm_w), ("_grouped", grouped), ("_slot_map", slot_map),
                      ("_mask", mask)):
            self.arr(name + nm, v)
        self.arr(name + "_x0", np.zeros(T * e, np.float32))
        self.arr(name + "_xq0", np.full(T * e, WORD_SENTINEL, np.uint32))  # T · e · 9/32 words used
        for s in ("g0", "u0", "act0", "y_sep0", "y_fused0"):
            rows = ffn if s[0] in "gua" else e
            self.arr(name + "_" + s, np.full(n_picks * rows, SENTINEL, np.float32))
        self.arr(name + "_actq0", np.full(n_picks * ffn, WORD_SENTINEL, np.uint32))  # T·k·ffn · 9/32 words used
        live = [p for x, ps in enumerate(picks) if x not in absent and x not in masked for p in ps]
        self.info[name] = dict(live=np.array(sorted(live), np.int64), n_picks=n_picks, picks=picks, G=G, U=U,
                               slot_of=slot_of, dead_experts=set(absent) | set(masked), h=h, norm_w=norm_w)
        self.spec.append(dict(name=name, T=T, k=k, ffn=ffn, e=e, slots=slots, n_exp=n_exp, map_base=map_base))


@pytest.fixture(scope="module")
def ffn_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("expert_ffn_few")
    c = Cases(d, np.random.default_rng(5))
    c.ffn("wide", 96, 2048, T=40, k=2, counts=[0, 33, 20, 1, 17, 9, 0, 0], absent=[5], masked=[2])
    c.ffn("short_k", 64, 96, T=12, k=2, counts=[5, 0, 12, 7], masked=[3])
    c.ffn("two_wg", 128, 64, T=16, k=4, counts=[16, 16, 16, 16], absent=[0])
    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d)}, mounts=[d], timeout=600)
    return c, d, info


CASES = ("wide", "short_k", "two_wg")


def _out(d, name, s, dtype=np.float32):
    return np.frombuffer((d / f"out_{name}_{s}.bin").read_bytes(), dtype)


def test_the_fused_path_is_taken_on_this_device(ffn_run):
    _, _, info = ffn_run
    assert info["limit"] >= 9
    assert all(info["fused"].values())
    assert "only the few-picks kernel reads quantised rows" in info["refused"]


@pytest.mark.parametrize("name", CASES)
def test_norm_rows_and_their_quantised_copy(ffn_run, name):
    """The chunk norm's f32 rows against numpy, and its quantised copy: the rows' codes, then their scales, exactly
    the Q8_0 quantisation of those f32 rows."""
    c, d, _ = ffn_run
    info = c.info[name]
    h, w = info["h"].astype(np.float64), info["norm_w"]
    T, e = h.shape
    x = _out(d, name, "x").reshape(T, e)
    ref = h / np.sqrt((h * h).mean(axis=1, keepdims=True) + 1e-6) * w
    assert np.abs(x - ref).max() <= 1e-5 * np.abs(ref).max()
    words = _out(d, name, "xq", np.uint32)
    nb = e // 32
    want_codes, want_d = _q8_codes_scales(x)
    assert np.array_equal(words[:8 * T * nb].view(np.int8).reshape(-1, 32), want_codes)
    assert np.array_equal(words[8 * T * nb:9 * T * nb].view(np.float32), want_d)
    assert (words[9 * T * nb:] == WORD_SENTINEL).all()


@pytest.mark.parametrize("name", CASES)
def test_gate_and_up_against_numpy(ffn_run, name):
    c, d, _ = ffn_run
    info = c.info[name]
    a = next(s for s in c.spec if s["name"] == name)
    ffn, k = a["ffn"], a["k"]
    xs = fake_quantize_q8_0(_out(d, name, "x").reshape(a["T"], a["e"])).astype(np.float64)
    for s, W in (("g", info["G"]), ("u", info["U"])):
        ref = np.full((info["n_picks"], ffn), SENTINEL)
        for x_e, ps in enumerate(info["picks"]):
            if x_e not in info["dead_experts"]:
                for p in ps:
                    ref[p] = W[info["slot_of"][x_e]].astype(np.float64) @ xs[p // k]
        got = _out(d, name, s).astype(np.float64).reshape(ref.shape)
        untouched = ref == SENTINEL
        assert np.array_equal(got[untouched], ref[untouched])
        scale = np.abs(ref[~untouched]).max()
        assert np.abs(got - ref).max() <= 2e-5 * scale + 1e-5


@pytest.mark.parametrize("name", CASES)
def test_fused_act_is_the_quantised_swiglu(ffn_run, name):
    """The fused kernel's codes and scales are the Q8_0 quantisation of the separate path's act rows, bit for bit,
    for every live pick; the words of the other picks stay as they were."""
    c, d, _ = ffn_run
    a = next(s for s in c.spec if s["name"] == name)
    ffn, n_picks, live = a["ffn"], c.info[name]["n_picks"], c.info[name]["live"]
    act = _out(d, name, "act").reshape(n_picks, ffn)
    words = _out(d, name, "actq", np.uint32)
    nbo = ffn // 32
    codes = words[:8 * n_picks * nbo].view(np.int8).reshape(n_picks, nbo * 32)
    scales = words[8 * n_picks * nbo:9 * n_picks * nbo].view(np.float32).reshape(n_picks, nbo)
    want_codes, want_d = _q8_codes_scales(act[live])
    assert np.array_equal(codes[live].reshape(-1, 32), want_codes)
    assert np.array_equal(scales[live].ravel(), want_d)
    dead = np.setdiff1d(np.arange(n_picks), live)
    code_words = words[:8 * n_picks * nbo].reshape(n_picks, 8 * nbo)
    assert (code_words[dead] == WORD_SENTINEL).all()
    assert (words[8 * n_picks * nbo:9 * n_picks * nbo].reshape(n_picks, nbo)[dead] == WORD_SENTINEL).all()
    assert (words[9 * n_picks * nbo:] == WORD_SENTINEL).all()


@pytest.mark.parametrize("name", CASES)
def test_fused_down_matches_the_separate_path(ffn_run, name):
    c, d, _ = ffn_run
    sep, fused = _out(d, name, "y_sep"), _out(d, name, "y_fused")
    untouched = sep == SENTINEL
    assert untouched.any() and (~untouched).any()
    assert np.array_equal(fused[untouched], sep[untouched])
    scale = np.abs(sep[~untouched]).max()
    assert np.abs(fused.astype(np.float64) - sep).max() <= 1e-6 * scale
