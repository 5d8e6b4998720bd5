"""The prefill GEMM tile (shaders/gemm/gemm_tile_*.wgsl through gemm.wgsl and moe_gemm.wgsl, launched by
py_engine.gpu.chunk_kernels) on a real WebGPU device (Dawn on lavapipe in Node, through Pyodide) against numpy.

The cases sit on the tile's edges: weight rows around the 128-row tile (1, 127, 129, 300), tokens around the token
tiles (1, 63, 65: the tile follows the recorded chunk size, 16, 32 or 64 tokens) and a chunk whose last rows are
unused, K of one block, two blocks and 64 blocks, Q8_0 and F32 weights, row bands, strided and offset rows,
accumulation, row views of a stacked matrix (GpuMatrix.row_view: the weight rows start at row_base), and routed
experts with no, one, a few and more than a tile of picks, masked and absent experts (with few picks per expert
on average the int8 mode takes shaders/moe_gemm_few.wgsl: more than one pass of picks, short and long K).
Each runs for Q8_0 weights in Q8_0-activation mode ("q8": the int8 tile, shaders/gemm_tile_q8.wgsl; the reference
quantises x as llama.cpp does), Q8_0 weights with f32 activations ("q8f") and F32 weights (both: gemm_tile_f32.wgsl).
The int8 tile also gets rows already fake-quantised (as fake_quantize_q8_0 writes them: the same product) and rows with
zero blocks, f16-subnormal and large scales and a dominant value.
"""
import json
from dataclasses import dataclass

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from node_helpers import KERNEL_HARNESS, q8_row_words
from diskformer.reference.layers import fake_quantize_q8_0


NODE_CODE = KERNEL_HARNESS + r'''
from py_engine.gpu.chunk_kernels import ChunkKernels, gemm_k_slices, gemm_token_tile
from py_engine.gpu.chunk_shapes import ExpertGemmShape, ExpertRouting, GemmRows
from py_engine.gpu.kernels import q8_input_words

async def main(args):
    d, spec, gpu, pipes = await kernel_device(args)
    step = create_buffer(gpu, 16, UNIFORM | COPY_DST, "step")
    kern = Kernels(gpu, pipes, step)
    kerns = {"q8": kern, "f32": Kernels(gpu, pipes, step, q8_act=False)}  # by activation mode
    rb = Readback(gpu)

    def inp(name):
        return upload(gpu, (d / f"in_{name}.bin").read_bytes(), name)

    def matrix(name, fmt, rows, cols, band_rows=None):
        return case_matrix(gpu, d, name, fmt, rows, cols, band_rows)

    for a in spec:
        chunk = create_buffer(gpu, 16, UNIFORM | COPY_DST, "chunk")
        write_buffer(gpu, chunk, 0, struct.pack("<4I", a["n"], 0, 0, 0))
        ck = ChunkKernels(kerns[a["act"]], chunk, a["T"])
        dl = DispatchList()
        y = inp(a["name"] + "_y0")
        async with GpuErrorScope(gpu, "recording " + a["name"]):
            if a["kernel"] == "gemm":
                if a["row_base"] or a["rows_after"]:  # a view of rows_before + rows + rows_after stacked rows
                    total = a["row_base"] + a["rows"] + a["rows_after"]
                    stack = matrix(a["name"] + "_w", a["fmt"], total, a["cols"], total)
                    w = stack.row_view(a["name"], a["row_base"], a["rows"])
                else:
                    w = matrix(a["name"] + "_w", a["fmt"], a["rows"], a["cols"], a["band_rows"])
                xq = inp(a["name"] + "_xq") if a["xq"] else None
                if a["quantise"]:  # X's rows quantised by the chunk first, into a buffer of junk
                    junk = bytes([0xA5]) * (4 * a["T"] * q8_input_words(a["cols"]))
                    ck.gemm_quantised(dl, w, inp(a["name"] + "_x"), upload(gpu, junk), y, a["y_stride"],
                                      a["y_base"], a["accumulate"], label=a["name"])
                else:
                    rows = GemmRows(a["x_stride"], a["y_stride"], a["x_base"], a["y_base"])
                    ck.gemm(dl, w, inp(a["name"] + "_x"), y, rows, a["accumulate"], k_slices=a["k_slices"], xq=xq)
            else:
                pool = matrix(a["name"] + "_w", a["fmt"], a["slots"] * a["rows"], a["cols"], a["slots"] * a["rows"])
                route = ExpertRouting(a["k"], a["n_exp"], inp(a["name"] + "_grouped"), inp(a["name"] + "_slot_map"),
                                      a["map_base"], inp(a["name"] + "_mask"))
                ck.expert_gemm(dl, pool, inp(a["name"] + "_x"), y, route,
                               ExpertGemmShape(a["rows"], a["x_stride"], a["x_div"]))
        dl.submit(gpu)
        (d / f"out_{a['name']}.bin").write_bytes(await rb.read(y, 0, int(y.size)))
        check_errors(gpu, a["name"])
    # a launcher that cannot offset the weight rows refuses a view that does not start at row 0
    view = GpuMatrix("stack", "f32", 64, 32, [(0, 64, {3: kern.placeholder()})]).row_view("part", 32, 32)
    try:
        ck.embed(dl, view, y, y)
        refused = ""
    except ValueError as e:
        refused = str(e)
    slices = {f"{t} {r} {nb} {c}": gemm_k_slices(t, r, nb, gemm_token_tile(t), c)
              for t, r, nb in ((512, 256, 64), (512, 32, 64), (512, 512, 64), (512, 2048, 16), (512, 4096, 128),
                               (512, 2048, 128), (256, 8192, 64), (64, 256, 64), (512, 256, 1)) for c in (False, True)}
    from types import SimpleNamespace
    from py_engine.engine.decoder import default_prefill_chunk
    chunks = {f"{n} {k} {cpu}": default_prefill_chunk(SimpleNamespace(cpu_adapter=cpu),
                                                     SimpleNamespace(n_expert=n, n_expert_used=k))
              for n, k in ((256, 8), (128, 8), (64, 8)) for cpu in (False, True)}
    return {"adapter": gpu.info, "tiles": [gemm_token_tile(n) for n in args["tile_tokens"]], "refused": refused,
            "k_slices": slices, "default_chunks": chunks}
'''

TILE_TOKENS = [1, 16, 17, 32, 33, 64, 65, 512]
MODES = (("q8", "q8", "q8"), ("q8f", "q8", "f32"), ("f32", "f32", "q8"))  # case tag, weights, activation mode
SENTINEL = -7.25  # in every output slot the kernel must not write


@dataclass(frozen=True)
class GemmCase:
    """A dense GEMM case of `rows` weight rows x `cols`, n tokens in use of a chunk of T (None: n).
    x_base / x_extra, y_base / y_extra: values before / after a row's own in X's and Y's rows. band_rows: the weight
    rows per band. row_base / rows_after: W is a row view of a stacked matrix with that many rows before / after it.
    k_slices: the product split along K into that many slices (gemm.wgsl's z, then gemm_split_sum.wgsl).
    xq: X also given quantised ahead (rmsnorm_q8's layout: the T rows' codes, then their scales), which the
    int8 tile reads instead of quantising X (gemm_xin_q8.wgsl). quantise: through gemm_quantised (X's rows
    quantised by quantize_rows_q8.wgsl first, then read as xq; the plain gemm in the other modes). act: the
    activation mode; kind: X's values (Cases.x_rows)."""
    fmt: str
    rows: int
    cols: int
    n: int
    T: int = None
    band_rows: int = None
    x_base: int = 0
    x_extra: int = 0
    y_base: int = 0
    y_extra: int = 0
    accumulate: bool = False
    row_base: int = 0
    rows_after: int = 0
    act: str = "q8"
    kind: str = "random"
    k_slices: int = None
    xq: bool = False
    quantise: bool = False


@dataclass(frozen=True)
class ExpertsCase:
    """A routed-expert GEMM case: expert e gets counts[e] of the T·k picks; x row of pick p: p // x_div; absent
    experts have no slot, masked ones are not in use."""
    fmt: str
    rows: int
    cols: int
    T: int
    k: int
    counts: tuple
    x_div: int
    absent: tuple = ()
    masked: tuple = ()
    act: str = "q8"


class Cases:
    def __init__(self, folder, rng):
        self.dir, self.rng = folder, rng
        self.spec, self.ref = [], {}

    def arr(self, name, a):
        (self.dir / f"in_{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())

    def weights(self, name, fmt, rows, cols):
        """Random weights written in the engine's layout; returns their exact f32 values."""
        if fmt == "f32":
            w = self.rng.standard_normal((rows, cols)).astype(np.float32)
            self.arr(name, w)
            return w
        codes = self.rng.integers(-128, 128, size=(rows, cols), dtype=np.int8)
        scales = (self.rng.random((rows, cols // 32)) * 0.02 + 0.001).astype(np.float16)
        self.arr(name + "_codes", codes)
        self.arr(name + "_scales", scales)
        blocks = codes.reshape(rows, cols // 32, 32).astype(np.float32) * scales[:, :, None].astype(np.float32)
        return blocks.reshape(rows, cols)

    def gemm(self, name, case: GemmCase):
        fmt, rows, cols, n, T = case.fmt, case.rows, case.cols, case.n, case.T or case.n
        x_base, x_extra, y_base, y_extra = case.x_base, case.x_extra, case.y_base, case.y_extra
        row_base, rows_after, accumulate, act, xq = case.row_base, case.rows_after, case.accumulate, case.act, case.xq
        x_stride, y_stride = cols + x_base + x_extra, rows + y_base + y_extra
        W = self.weights(name + "_w", fmt, row_base + rows + rows_after, cols)[row_base:row_base + rows]
        x = self.rng.standard_normal((T, x_stride)).astype(np.float32)
        x[:, x_base:x_base + cols] = self.x_rows((T, cols), case.kind)
        x = x.ravel()
        y0 = np.full(T * y_stride, SENTINEL, np.float32)
        if accumulate:
            y0 = self.rng.standard_normal(T * y_stride).astype(np.float32)
        self.arr(name + "_x", x)
        self.arr(name + "_y0", y0)
        if xq:  # x_base 0 and x_stride == cols: whole rows
            self.arr(name + "_xq", q8_row_words(x.reshape(T, cols)))
        ref = y0.astype(np.float64).reshape(T, y_stride)
        xs = self.act(x.reshape(T, x_stride)[:n, x_base:x_base + cols], fmt, act)
        prod = xs @ W.astype(np.float64).T
        ref[:n, y_base:y_base + rows] = prod + (ref[:n, y_base:y_base + rows] if accumulate else 0)
        self.ref[name] = ref.ravel()
        self.spec.append(dict(name=name, kernel="gemm", fmt=fmt, rows=rows, cols=cols, n=n, T=T,
                              band_rows=case.band_rows or rows, x_stride=x_stride, y_stride=y_stride, x_base=x_base,
                              y_base=y_base, accumulate=accumulate, row_base=row_base, rows_after=rows_after,
                              act=act, k_slices=case.k_slices, xq=xq, quantise=case.quantise))

    def x_rows(self, shape, kind):
        """Activation rows: "random", "mixed" (a zero block, blocks with an f16-subnormal or a large scale, a
        dominant value) or "prequant" (mixed, already fake-quantised)."""
        x = self.rng.standard_normal(shape).astype(np.float32)
        if kind != "random":
            blocks = x.reshape(-1, shape[-1] // 32, 32)
            blocks[0, 0] = 0.0
            blocks[:, -1] *= np.float32(3e-7)
            blocks[1 % len(blocks), 0] *= np.float32(4e3)
            blocks[:, 0, 5] *= np.float32(40.0)
        return fake_quantize_q8_0(x) if kind == "prequant" else x

    @staticmethod
    def act(x, fmt, act):
        """What a product over `fmt` weights multiplies in activation mode `act`, as f64."""
        return (fake_quantize_q8_0(x) if fmt == "q8" and act == "q8" else x).astype(np.float64)

    def experts(self, name, case: ExpertsCase):
        fmt, rows, cols, T, k, counts, x_div = case.fmt, case.rows, case.cols, case.T, case.k, case.counts, case.x_div
        absent, masked, act = case.absent, case.masked, case.act
        n_exp = len(counts)
        slots = n_exp + 1
        P = self.weights(name + "_w", fmt, slots * rows, cols).reshape(slots, rows, cols)
        slot_of = self.rng.permutation(slots)[:n_exp].astype(np.uint32)  # expert e -> a slot (one spare)
        map_base = 3
        slot_map = np.full(map_base + n_exp, 0xFFFFFFFF, np.uint32)
        slot_map[map_base:] = slot_of
        for e in absent:
            slot_map[map_base + e] = 0xFFFFFFFF
        mask = np.ones(n_exp, np.uint32)
        mask[list(masked)] = 0
        n_picks = T * k
        assert sum(counts) <= n_picks
        order = self.rng.permutation(n_picks)  # every pick belongs to one expert (p = token · k + j)
        ends = np.cumsum(counts)
        picks = [np.sort(order[end - c:end]).astype(np.uint32) for c, end in zip(counts, ends)]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
        grouped = np.concatenate([np.array(counts, np.uint32), offsets] + picks)
        x_rows = T if x_div == k else n_picks
        x = self.rng.standard_normal(x_rows * cols).astype(np.float32)
        xs = self.act(x.reshape(x_rows, cols), fmt, act)
        y0 = np.full(n_picks * rows, SENTINEL, np.float32)
        for nm, v in (("_x", x), ("_y0", y0), ("_grouped", grouped), ("_slot_map", slot_map), ("_mask", mask)):
            self.arr(name + nm, v)
        ref = y0.astype(np.float64).reshape(n_picks, rows)
        for e in range(n_exp):
            if e in absent or e in masked:
                continue
            for p in picks[e]:
                ref[p] = P[slot_of[e]].astype(np.float64) @ xs[p // x_div]
        self.ref[name] = ref.ravel()
        self.spec.append(dict(name=name, kernel="experts", fmt=fmt, rows=rows, cols=cols, n=T, T=T, k=k,
                              n_exp=n_exp, slots=slots, map_base=map_base, x_stride=cols, x_div=x_div, act=act))


@pytest.fixture(scope="module")
def tile_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemm_tile")
    c = Cases(d, np.random.default_rng(11))
    for tag, fmt, act in MODES:
        kw = {"act": act}
        for rows in (1, 127, 129, 300):
            for n in (1, 63, 65):
                c.gemm(f"g_{tag}_r{rows}_t{n}_k64", GemmCase(fmt, rows, 64, n, **kw))
        for rows, n in ((129, 65), (300, 1), (127, 63)):
            c.gemm(f"g_{tag}_r{rows}_t{n}_k32", GemmCase(fmt, rows, 32, n, **kw))
        for rows, n in ((129, 65), (300, 1), (1, 63)):
            c.gemm(f"g_{tag}_r{rows}_t{n}_k2048", GemmCase(fmt, rows, 2048, n, **kw))
        # a short last chunk (rows beyond n unused), bands, offsets inside wider rows, accumulation
        c.gemm(f"g_{tag}_short", GemmCase(fmt, 300, 96, 37, T=64, band_rows=129, x_base=32, x_extra=5, y_base=7,
                                          y_extra=3, **kw))
        c.gemm(f"g_{tag}_acc", GemmCase(fmt, 129, 64, 20, T=32, x_base=64, y_base=11, accumulate=True, **kw))
        c.gemm(f"g_{tag}_t16", GemmCase(fmt, 200, 64, 9, T=16, **kw))
        # row views: an odd first row (Q8_0 scales mid-word), a view past a full tile, the last part of a stack
        c.gemm(f"g_{tag}_view_mid", GemmCase(fmt, 129, 96, 20, T=32, row_base=3, rows_after=5, y_base=4, **kw))
        c.gemm(f"g_{tag}_view_tail", GemmCase(fmt, 40, 64, 17, T=32, row_base=130, **kw))
        # split along K: slices of unequal length (64 blocks in 3), accumulating at an offset over a short chunk in
        # bands; a view; more slices than blocks (one per block)
        c.gemm(f"g_{tag}_split3", GemmCase(fmt, 300, 2048, 37, T=64, band_rows=129, x_base=32, x_extra=5, y_base=7,
                                           y_extra=3, accumulate=True, k_slices=3, **kw))
        c.gemm(f"g_{tag}_split_view", GemmCase(fmt, 129, 96, 20, T=32, row_base=3, rows_after=5, y_base=4,
                                               k_slices=2, **kw))
        c.gemm(f"g_{tag}_split_all", GemmCase(fmt, 64, 96, 16, T=16, k_slices=8, **kw))
        # X quantised ahead (read only by the int8 tile; the other modes take the f32 rows): a short chunk, split
        c.gemm(f"g_{tag}_xq", GemmCase(fmt, 300, 2048, 37, T=64, xq=True, y_base=7, y_extra=3, **kw))
        c.gemm(f"g_{tag}_xq_split", GemmCase(fmt, 129, 96, 20, T=32, k_slices=2, accumulate=True, xq=True,
                                             kind="mixed", **kw))
        # X quantised by the chunk itself first (an output product's input): a short chunk of K 64 blocks (more
        # than one workgroup of blocks per row in quantize_rows_q8.wgsl), edge values accumulating
        c.gemm(f"g_{tag}_quantise", GemmCase(fmt, 300, 2560, 37, T=64, y_base=7, y_extra=3, quantise=True, **kw))
        c.gemm(f"g_{tag}_quantise_mixed", GemmCase(fmt, 129, 96, 20, T=32, accumulate=True, kind="mixed",
                                                   quantise=True, **kw))
        # routed experts: average picks per expert pick the 16-, 32- and 64-token tile; counts around each
        c.experts(f"e_{tag}_t16", ExpertsCase(fmt, 129, 64, T=8, k=2, counts=[0, 1, 8, 7], x_div=2, **kw))
        c.experts(f"e_{tag}_t32", ExpertsCase(fmt, 300, 64, T=50, k=2, counts=[33, 0, 50, 17], x_div=2, masked=[0],
                                              **kw))
        c.experts(f"e_{tag}_t64", ExpertsCase(fmt, 127, 96, T=130, k=2, counts=[130, 65, 64, 1], x_div=1,
                                              absent=[2], **kw))
        # few picks per expert on average (the int8 mode's moe_gemm_few.wgsl): an expert past several passes
        # of 8 picks, K of 64 blocks (4 staging steps) and of 3 (one short step), rows past the last 64-row block
        c.experts(f"e_{tag}_few", ExpertsCase(fmt, 129, 2048, T=40, k=2, counts=[0, 33, 20, 1, 17, 9, 0, 0],
                                              x_div=1, absent=[5], **kw))
        c.experts(f"e_{tag}_few_k96", ExpertsCase(fmt, 64, 96, T=12, k=2, counts=[5, 0, 12, 7], x_div=2,
                                                  masked=[3], **kw))
        if act == "q8" and fmt == "q8":  # quantisation edge values, raw and already quantised
            c.gemm(f"g_{tag}_mixed", GemmCase(fmt, 129, 96, 33, T=64, x_base=32, x_extra=5, kind="mixed", **kw))
            c.gemm(f"g_{tag}_prequant", GemmCase(fmt, 129, 96, 33, T=64, x_base=32, x_extra=5, kind="prequant", **kw))
    (d / "spec.json").write_text(json.dumps(c.spec))
    info = run_in_node(NODE_CODE, {"dir": str(d), "tile_tokens": TILE_TOKENS}, mounts=[d], timeout=600)
    return c, d, info


def _cases(prefix):
    names = []
    for tag, fmt, act in MODES:
        names += [f"g_{tag}_mixed", f"g_{tag}_prequant"] if (fmt, act) == ("q8", "q8") else []
        names += [f"g_{tag}_r{r}_t{n}_k64" for r in (1, 127, 129, 300) for n in (1, 63, 65)]
        names += [f"g_{tag}_r{r}_t{n}_k32" for r, n in ((129, 65), (300, 1), (127, 63))]
        names += [f"g_{tag}_r{r}_t{n}_k2048" for r, n in ((129, 65), (300, 1), (1, 63))]
        names += [f"g_{tag}_short", f"g_{tag}_acc", f"g_{tag}_t16", f"g_{tag}_view_mid", f"g_{tag}_view_tail"]
        names += [f"g_{tag}_split3", f"g_{tag}_split_view", f"g_{tag}_split_all", f"g_{tag}_xq", f"g_{tag}_xq_split"]
        names += [f"g_{tag}_quantise", f"g_{tag}_quantise_mixed"]
        names += [f"e_{tag}_t16", f"e_{tag}_t32", f"e_{tag}_t64", f"e_{tag}_few", f"e_{tag}_few_k96"]
    return [n for n in names if n.startswith(prefix)]


def _check(tile_run, name):
    c, d, _ = tile_run
    got = np.frombuffer((d / f"out_{name}.bin").read_bytes(), np.float32).astype(np.float64)
    ref = c.ref[name]
    assert got.shape == ref.shape
    untouched = ref == SENTINEL
    assert np.array_equal(got[untouched], ref[untouched]), f"{name}: wrote outside its rows / tokens"
    # f32 accumulation over K columns against an f64 reference: bound by K · eps · Σ|w·x|-scale values
    scale = np.abs(ref[~untouched]).max() if (~untouched).any() else 1.0
    err = np.abs(got - ref).max()
    assert err <= 2e-5 * scale + 1e-5, f"{name}: max error {err} (scale {scale})"


@pytest.mark.parametrize("name", _cases("g_"))
def test_dense_gemm_tile_edges(tile_run, name):
    _check(tile_run, name)


@pytest.mark.parametrize("name", _cases("e_"))
def test_expert_gemm_tile_edges(tile_run, name):
    _check(tile_run, name)


def test_token_tile_follows_the_chunk(tile_run):
    assert tile_run[2]["tiles"] == [16, 16, 32, 32, 64, 64, 64, 64]


def test_row_view_refused_where_rows_cannot_be_offset(tile_run):
    assert "embed_rows cannot read a row view" in tile_run[2]["refused"]


def test_small_products_split_along_k_on_a_gpu(tile_run):
    """Dense products keep the token tile that covers the chunk; those of fewer tiles than 90 % of GEMM_MIN_GROUPS
    (2 per SM of a 132-SM GPU) are split along K toward GEMM_MIN_GROUPS workgroups: at 512 tokens the router (256
    rows), beta/alpha (32), the shared expert's gate/up (512) and down (2048 rows, K 512), the output products (2048
    rows); not z (4096 rows: 256 tiles), a one-block K or any product on a CPU adapter."""
    got = tile_run[2]["k_slices"]
    assert got["512 256 64 False"] == 16 and got["512 32 64 False"] == 32 and got["512 512 64 False"] == 8
    assert got["512 2048 16 False"] == 3
    assert got["512 2048 128 False"] == 3 and got["512 4096 128 False"] == 1 and got["256 8192 64 False"] == 1
    assert got["64 256 64 False"] == 64 and got["512 256 1 False"] == 1  # 2 tiles: slices of 1 block
    assert all(v == 1 for k, v in got.items() if k.endswith("True"))


def test_default_prefill_chunk_keeps_few_picks_per_expert(tile_run):
    """A GPU's default prefill chunk is 512 tokens, halved while the routed experts would get more than 16 picks
    each on average (the few-picks kernels): qwen35moe's 256 experts top-8 512, qwen3moe's 128 256; a CPU adapter 64."""
    got = tile_run[2]["default_chunks"]
    assert got["256 8 False"] == 512 and got["128 8 False"] == 256 and got["64 8 False"] == 128
    assert all(v == 64 for k, v in got.items() if k.endswith("True"))
