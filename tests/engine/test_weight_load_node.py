"""WeightLoader on a real WebGPU device (Dawn on lavapipe, through Pyodide in Node): Q8_0 tensors split on the GPU
(shaders/q8_split.wgsl) read back byte-equal to py_engine.gguf.split_q8_0 and to an independent numpy split, for
odd block counts, row bands, bands cut into several scratch pieces and a 2-D dispatch grid; F32 tensors read back
as stored; the split scratch is freed once the synchronous load has returned; write_bytes pads an odd tail.
"""
import random

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from py_engine.gguf import split_q8_0
from gguf_craft import STR, Craft


Q8_0, F32 = 8, 0
# name -> (dims as GGUF stores them (contiguous axis first), type)
TENSORS = {
    "odd.weight": ((96, 5), Q8_0),          # 15 blocks: odd, one band
    "band.weight": ((224, 9), Q8_0),        # 7 blocks a row: bands of 4 rows (28 blocks) + a 1-row band (odd)
    "exps.weight": ((64, 3, 4), Q8_0),      # 3-D (experts) single band, 24 blocks
    "one.weight": ((32, 1), Q8_0),          # a single block
    "wide.weight": ((96, 150), Q8_0),       # 450 blocks: 4 workgroups of 64 pairs in one piece; bands of 27
    "mat.weight": ((32, 30), F32),          # F32 matrix in bands of 7 rows
    "norm.weight": ((7,), F32),             # F32 vector
}
MAX_BAND = 4 * 224  # band.weight: 4 rows of codes per band
SCRATCH = 5 * 68    # 10 blocks a piece: the 28-block bands go in pieces of 10, 10, 8

NODE_CODE = r'''
import asyncio
from py_engine.gguf import read_gguf_file
from py_engine.gpu.device import open_gpu
from py_engine.gpu.buffers import Readback, storage_buffer, write_bytes, write_view
from py_engine.gpu.pipelines import GpuErrorScope
from py_engine.engine.gpu_weights import WeightLoader
from py_engine.engine.weight_source import FileWeightSource

async def main(args):
    gpu = await open_gpu()
    rb = Readback(gpu)
    header = read_gguf_file(args["path"])
    out = {}
    for case in args["cases"]:
        source = FileWeightSource(args["path"])
        loader = WeightLoader(gpu, header, source, max_band_bytes=case["max_band"], scratch_bytes=case["scratch"])
        if case.get("max_groups"):
            loader.splitter.max_groups = case["max_groups"]
        got = {}
        async with GpuErrorScope(gpu, "loading " + case["name"]):
            mats = {n: loader.matrix(n, single_band=n.startswith("exps")) for n in args["matrices"]}
            norm = loader.vector("norm.weight", 7)
            scratch_after_load = loader.splitter._scratch is not None  # still synchronous: kept for reuse
        await asyncio.sleep(0)
        for n, m in mats.items():
            bands = []
            for r0, rows, bufs in m.bands:
                bands.append([r0, rows] + [(await rb.read(bufs[k], 0, int(bufs[k].size))).hex()
                                           for k in sorted(bufs)])
            got[n] = bands
        got["norm.weight"] = (await rb.read(norm, 0, 28)).hex()
        out[case["name"]] = {"tensors": got, "pieces": loader.splitter.pieces,
                             "scratch_after_load": scratch_after_load,
                             "scratch_freed": loader.splitter._scratch is None,
                             "bytes_uploaded": loader.bytes_uploaded}
        loader.release()
        source.close()
    # write_bytes: an odd length at an offset (the tail word is zero-padded); write_view refuses a strided view
    buf = storage_buffer(gpu, 16, "wb")
    write_bytes(gpu, buf, 0, bytes(range(100, 116)))
    write_bytes(gpu, buf, 4, b"\x01\x02\x03\x04\x05\x06\x07")
    out["write_bytes"] = (await rb.read(buf, 0, 16)).hex()
    try:
        write_view(gpu, buf, 0, memoryview(bytes(16))[::2])
        out["strided"] = "accepted"
    except ValueError as e:
        out["strided"] = str(e)
    return out
'''


def _craft(path):
    rng = random.Random(1234)
    c = Craft()
    c.kv("general.architecture", STR, "toy")
    data = bytearray()
    raw = {}
    for name, (dims, typ) in TENSORS.items():
        n = int(np.prod(dims))
        nbytes = n // 32 * 34 if typ == Q8_0 else 4 * n
        data += bytes(-len(data) % 32)
        blob = rng.randbytes(nbytes)
        c.tensor(name, dims, typ, len(data))
        raw[name] = blob
        data += blob
    c.data = bytes(data)
    path.write_bytes(c.build())
    return raw


def _numpy_split(blob):
    blocks = np.frombuffer(blob, dtype=np.uint8).reshape(-1, 34)
    return blocks[:, 2:].tobytes(), blocks[:, :2].tobytes()


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    path = d / "planes.gguf"
    raw = _craft(path)
    cases = [{"name": "pieces", "max_band": MAX_BAND, "scratch": SCRATCH},
             {"name": "2d_grid", "max_band": None, "scratch": 64 << 20, "max_groups": 1},
             {"name": "defaults", "max_band": None, "scratch": 64 << 20}]
    matrices = [n for n in TENSORS if n != "norm.weight"]
    result = run_in_node(NODE_CODE, {"path": str(path), "cases": cases, "matrices": matrices}, mounts=[d],
                         timeout=300)
    return raw, result


def _expected_bands(name, raw, max_band):
    dims, typ = TENSORS[name]
    cols = dims[0]
    rows = int(np.prod(dims)) // cols
    gpu_row = cols if typ == Q8_0 else 4 * cols
    row_bytes = cols // 32 * 34 if typ == Q8_0 else 4 * cols
    band_rows = max(1, (max_band or 1 << 27) // gpu_row)
    for r0 in range(0, rows, band_rows):
        n = min(band_rows, rows - r0)
        yield r0, n, raw[name][r0 * row_bytes:(r0 + n) * row_bytes]


def _pad4(b):
    return b + bytes(-len(b) % 4)


@pytest.mark.parametrize("case", ["pieces", "2d_grid", "defaults"])
def test_gpu_planes_equal_split_q8_0(loaded, case):
    raw, result = loaded
    res = result[case]
    max_band = MAX_BAND if case == "pieces" else None
    for name, (dims, typ) in TENSORS.items():
        if name == "norm.weight":
            assert bytes.fromhex(res["tensors"][name]) == raw[name]
            continue
        got = res["tensors"][name]
        want = list(_expected_bands(name, raw, max_band))
        assert [(g[0], g[1]) for g in got] == [(r0, n) for r0, n, _ in want], name
        for g, (r0, n, blob) in zip(got, want):
            if typ == Q8_0:
                codes, scales = split_q8_0(blob)
                assert (codes, scales) == _numpy_split(blob)  # the reference itself, checked independently
                assert bytes.fromhex(g[2]) == _pad4(codes), f"{case} {name} band {r0}: codes differ"
                assert bytes.fromhex(g[3]) == _pad4(scales), f"{case} {name} band {r0}: scales differ"
            else:
                assert bytes.fromhex(g[2]) == blob, f"{case} {name} band {r0}"
    q8_bytes = sum(len(b) // 34 * 34 for n, b in raw.items() if TENSORS[n][1] == Q8_0)
    f32_bytes = sum(len(b) for n, b in raw.items() if TENSORS[n][1] == F32)
    assert res["bytes_uploaded"] == q8_bytes + f32_bytes


def test_write_bytes_pads_the_tail_and_refuses_strided_views(loaded):
    _, result = loaded
    assert bytes.fromhex(result["write_bytes"]) == bytes(range(100, 104)) + bytes(range(1, 8)) + b"\0" + bytes(
        range(112, 116))
    assert "contiguous" in result["strided"]


def test_band_went_in_several_pieces_and_scratch_is_freed(loaded):
    raw, result = loaded
    q8 = [n for n in TENSORS if TENSORS[n][1] == Q8_0]
    blocks = [len(b) // 34 for _, _, b in (x for n in q8 for x in _expected_bands(n, raw, MAX_BAND))]
    assert max(blocks) > 10 and sum(b % 2 for b in blocks) >= 2  # bands over one piece; odd bands
    assert result["pieces"]["pieces"] == sum((b + 9) // 10 for b in blocks)  # pieces of 10 blocks (SCRATCH)
    assert result["defaults"]["pieces"] == len(q8)  # one band, one piece each
    for name in ("pieces", "2d_grid", "defaults"):
        res = result[name]
        assert res["scratch_after_load"] and res["scratch_freed"]


# Stacking (WeightLoader.stacked and StoreWeightLoader.stacked): a stacked matrix holds its parts' planes side by
# side, and each row view addresses exactly its part's rows of the shared buffers.
STACK_MODELS = ["micro-qwen35moe", "micro-qwen35moe-f32"]
STACKS = {"dn_in": ["blk.0.ssm_beta.weight", "blk.0.ssm_alpha.weight", "blk.0.attn_qkv.weight",
                    "blk.0.attn_gate.weight"],
          "attn_in": ["blk.3.attn_q.weight", "blk.3.attn_k.weight", "blk.3.attn_v.weight"]}
MIXED = ["blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_shexp.weight"]  # F32 then Q8_0 (Q8_0 file): refused

STACK_CODE = r'''
import asyncio
from pathlib import Path
from py_engine.gguf import read_gguf_file
from py_engine.gpu.device import open_gpu
from py_engine.gpu.buffers import Readback
from py_engine.engine.gpu_weights import WeightLoader
from py_engine.engine.store_weights import StoreWeightLoader, open_store
from py_engine.engine.weight_source import FileWeightSource
from py_engine.store.local import DirectorySink

async def main(args):
    gpu = await open_gpu()
    rb = Readback(gpu)
    out = {}
    for m in args["models"]:
        header = read_gguf_file(m["gguf"])
        source = FileWeightSource(m["gguf"])
        sink = DirectorySink(Path(m["store"]))
        manifest, store_header = await open_store(sink)
        for tag, loader in (("gguf", WeightLoader(gpu, header, source)),
                            ("store", StoreWeightLoader(gpu, manifest, store_header, sink))):
            stacks = {}
            for key, parts in args["stacks"].items():
                shapes = [(n, tuple(header.tensor(n).shape)) for n in parts]
                stacks[key] = loader.stacked(key, shapes)
            nbytes = getattr(loader, "bytes_planned", loader.bytes_uploaded)  # the store's fill comes later
            try:
                loader.stacked("mixed", [(n, tuple(header.tensor(n).shape)) for n in args["mixed"]])
                refused = ""
            except ValueError as e:
                refused = str(e)
            if tag == "store":
                await loader.fill()
            await asyncio.sleep(0)
            got = {"refused": refused, "bytes": nbytes}
            for key, (stack, views) in stacks.items():
                (r0, rows, bufs), = stack.bands
                planes = {k: (await rb.read(b, 0, int(b.size))).hex() for k, b in bufs.items()}
                got[key] = {"fmt": stack.fmt, "rows": rows, "cols": stack.cols, "planes": planes,
                            "views": {n: {"row_base": v.row_base, "rows": v.rows, "cols": v.cols,
                                          "bands": [(b[0], b[1]) for b in v.bands],
                                          "shared": all(v.bands[0][2][k] is bufs[k] for k in bufs)}
                                      for n, v in views.items()}}
            out[m["stem"] + "." + tag] = got
            loader.release()
        source.close()
    return out
'''


@pytest.fixture(scope="module")
def stacked_loads(fixture_models, tmp_path_factory):
    import asyncio

    from py_engine.store import ingest
    from py_engine.store.local import DirectoryStorage, FileSource

    root = tmp_path_factory.mktemp("stack_stores")
    storage = DirectoryStorage(root)
    models = []
    for stem in STACK_MODELS:
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
        models.append({"stem": stem, "gguf": str(fixture_models / f"{stem}.gguf"), "store": str(root / stem)})
    result = run_in_node(STACK_CODE, {"models": models, "stacks": STACKS, "mixed": MIXED},
                         mounts=[fixture_models, root], timeout=300)
    return result


def _file_planes(path, name):
    """(fmt, rows, cols, [plane bytes]) of a GGUF matrix as the kernels bind it, from the file."""
    from py_engine.gguf import read_gguf_file

    t = read_gguf_file(path).tensor(name)
    with open(path, "rb") as f:
        f.seek(t.abs_offset)
        blob = f.read(t.nbytes)
    cols, rows = t.dims[0], t.dims[1]
    if t.type == Q8_0:
        return "q8", rows, cols, list(_numpy_split(blob))
    return "f32", rows, cols, [blob]


@pytest.mark.parametrize("loader", ["gguf", "store"])
@pytest.mark.parametrize("stem", STACK_MODELS)
def test_stacked_views_hold_their_parts(stacked_loads, fixture_models, stem, loader):
    got = stacked_loads[f"{stem}.{loader}"]
    path = fixture_models / f"{stem}.gguf"
    total = 0
    for key, parts in STACKS.items():
        g = got[key]
        planes = [bytes.fromhex(g["planes"][k]) for k in sorted(g["planes"])]
        row = 0
        for name in parts:
            fmt, rows, cols, want = _file_planes(path, name)
            v = g["views"][name]
            assert (g["fmt"], g["cols"]) == (fmt, cols)
            assert (v["row_base"], v["rows"], v["cols"], v["bands"]) == (row, rows, cols, [[0, rows]]), name
            assert v["shared"], f"{name}: the view does not bind the stacked buffers"
            per_row = [len(p) // rows for p in want]  # codes and scales (Q8_0) or values (F32) per row
            for plane, want_plane, n in zip(planes, want, per_row):
                assert plane[row * n:(row + rows) * n] == want_plane, f"{stem} {loader} {name}: planes differ"
            total += sum(len(p) for p in want)
            row += rows
        assert g["rows"] == row
    assert got["bytes"] == total  # the stacks' buffers only: views add none
    if stem.endswith("f32"):
        assert got["refused"] == ""  # every part F32: the "mixed" pair stacks too
    else:
        assert got["refused"].startswith("mixed: blk.0.ffn_gate_shexp.weight is Q8_0")
