"""The model store: layout planning on real-dimension synthetic headers and on the fixtures, ingest into a sink
(bit-exact planes against gguf-py), the block split. Ingest cut short and resumed, verify, quota, catalogue:
test_store_resume.py."""
import hashlib
import json
import random

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from py_engine.gguf.reader import parse_header
from py_engine.gguf.sources import read_gguf_file
from py_engine.gguf.types import GGMLType
from py_engine.store import is_complete, verify
from py_engine.store.blocks import merge_blocks, split_blocks
from py_engine.store.layout import (ALIGN, DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE,
                                    SPLIT_TYPES, StoreLayout, plan_units)
from store_craft import ingest_into_memory, run, synthetic_header

ARCH_FIXTURES = ["micro-qwen3moe.gguf", "micro-qwen35moe.gguf", "micro-qwen3moe-f32.gguf"]


def real_dims_tensors(layers, hidden, experts, ffn, vocab, shared_ffn=None):
    q8, f32 = GGMLType.Q8_0, GGMLType.F32
    t = [("token_embd.weight", [hidden, vocab], q8)]
    for i in range(layers):
        p = f"blk.{i}."
        t += [(p + "attn_norm.weight", [hidden], f32), (p + "attn_q.weight", [hidden, 4096], q8),
              (p + "ffn_gate_inp.weight", [hidden, experts], f32),
              (p + "ffn_gate_exps.weight", [hidden, ffn, experts], q8),
              (p + "ffn_up_exps.weight", [hidden, ffn, experts], q8),
              (p + "ffn_down_exps.weight", [ffn, hidden, experts], q8)]
        if shared_ffn:
            t += [(p + "ffn_gate_shexp.weight", [hidden, shared_ffn], q8)]
    return t + [("output_norm.weight", [hidden], f32), ("output.weight", [hidden, vocab], q8)]


REAL = {  # arch: (layers, hidden, experts, expert ffn, vocab, shared ffn, record bytes)
    "qwen35moe": (40, 2048, 256, 512, 248320, 512, 3_342_336),
    "qwen3moe": (48, 2048, 128, 768, 151936, None, 5_013_504),
}


@pytest.mark.parametrize("arch", sorted(REAL))
def test_real_dimension_record_sizes_and_units(arch):
    layers, hidden, experts, ffn, vocab, shared, record = REAL[arch]
    header = parse_header(synthetic_header(arch, real_dims_tensors(layers, hidden, experts, ffn, vocab, shared)))
    lay = StoreLayout(header)
    ex = lay.experts
    assert ex.record_size == record
    assert (ex.n_experts, ex.layers) == (experts, list(range(layers)))
    assert ex.planes["gate_codes"] == (0, ffn * hidden) and ex.planes["up_codes"] == (ffn * hidden, ffn * hidden)
    assert all(off % ALIGN == 0 for off, _ in ex.planes.values())
    assert all(p.offset % ALIGN == 0 for p in lay.dense)
    emb = lay.dense_by_tensor["token_embd.weight"]
    assert [(p.kind, p.nbytes) for p in emb] == [("codes", hidden * vocab), ("scales", hidden * vocab // 16)]
    size = max(t.end for t in header.tensors)
    chunk = 16 << 20
    units = plan_units(lay, size, chunk)
    _check_units(lay, units, size, chunk)


# ---- planning on the fixture files --------------------------------------------------------------------------------

def _check_units(lay, units, size, chunk):
    """Units tile [0, size) in order, each <= chunk, ops inside their unit and cut at whole blocks; every
    destination byte of every plane / record sub-plane is written exactly once."""
    assert units[0].start == 0 and units[-1].end == size
    written = {}
    for a, b in zip(units, units[1:]):
        assert a.end == b.start
    for u in units:
        assert 0 < u.end - u.start <= chunk
        pos = u.start
        for op in u.ops:
            assert pos <= op.src and op.src + op.n <= u.end
            pos = op.src + op.n
            if op.split is not None:
                blk, sb, cb = SPLIT_TYPES[op.split]
                assert op.n % blk == 0
                sizes = (op.n // blk * cb, op.n // blk * sb)
            else:
                sizes = (op.n,)
            for (f, o, key), n in zip(op.dst, sizes):
                written.setdefault((f, key), []).append((o, n))
    want = {HEADER_FILE: [(0, lay.header_size)], DENSE_FILE: [(p.offset, p.nbytes) for p in lay.dense]}
    if lay.experts:
        ex = lay.experts
        want[EXPERTS_FILE] = [(ex.record_offset(l, e) + off, n) for l in ex.layers for e in range(ex.n_experts)
                              for off, n in ex.planes.values() if n]
    got = {}
    for (f, key), pieces in written.items():  # each destination's pieces follow each other without holes
        pieces.sort()
        for (o1, n1), (o2, _) in zip(pieces, pieces[1:]):
            assert o1 + n1 == o2, f"{f} {key}: hole or overlap at {o1 + n1}"
        total = sum(n for _, n in pieces)
        if total:
            got.setdefault(f, []).append((pieces[0][0], total))
    for f, ranges in want.items():
        got_f = sorted(got[f])
        assert got_f == sorted(r for r in ranges if r[1]), f
        for (o1, n1), (o2, _) in zip(got_f, got_f[1:]):
            assert o1 + n1 <= o2, f"{f}: planes overlap at {o2}"


@pytest.mark.parametrize("name", ARCH_FIXTURES + ["wide-qwen35moe.gguf"])
@pytest.mark.parametrize("chunk", [4099 * 8, 1 << 20])
def test_units_plan_fixture(fixture_models, name, chunk):
    header = read_gguf_file(fixture_models / name)
    lay = StoreLayout(header)
    units = plan_units(lay, header.file_size, chunk)
    _check_units(lay, units, header.file_size, chunk)


# ---- full ingest compared with the GGUF ---------------------------------------------------------------------------

def _dequant_planes(ttype, codes: bytes, scales: bytes, dims):
    d = np.frombuffer(scales, dtype="<f2").astype(np.float32)
    if ttype == GGMLType.Q8_0:
        q = np.frombuffer(codes, dtype=np.int8).reshape(-1, 32).astype(np.float32)
    else:  # Q4_0: low nibbles are elements 0..15, high nibbles 16..31, each minus 8
        b = np.frombuffer(codes, dtype=np.uint8).reshape(-1, 16)
        q = np.concatenate([b & 15, b >> 4], axis=1).astype(np.float32) - 8
    return (q * d[:, None]).reshape(tuple(reversed(dims)))


@pytest.fixture(scope="module")
def q4_model(tmp_path_factory):
    """A small GGUF with Q4_0 matrices and experts, a raw Q6_K embedding, F16 and F32 tensors (gemma4-like types)."""
    from gguf import GGUFWriter
    from gguf.quants import quantize
    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("q4") / "q4-moe.gguf"
    w = GGUFWriter(str(path), "gemma4")
    w.add_tensor("token_embd.weight", rng.integers(0, 256, (8, 210), dtype=np.uint8),
                 raw_dtype=GGMLQuantizationType.Q6_K)
    for i in range(2):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", rng.standard_normal(64).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", quantize(rng.standard_normal((48, 64)).astype(np.float32),
                                                   GGMLQuantizationType.Q4_0),
                     raw_dtype=GGMLQuantizationType.Q4_0)
        w.add_tensor(p + "attn_k.weight", rng.standard_normal((16, 64)).astype(np.float16))
        for part, (o, n) in (("gate", (32, 64)), ("up", (32, 64)), ("down", (64, 32))):
            x = rng.standard_normal((4, o, n)).astype(np.float32)
            w.add_tensor(p + f"ffn_{part}_exps.weight", quantize(x, GGMLQuantizationType.Q4_0),
                         raw_dtype=GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("name", ARCH_FIXTURES + ["q4"])
def test_ingest_matches_gguf(fixture_models, q4_model, name):
    path = q4_model if name == "q4" else fixture_models / name
    storage, man = ingest_into_memory(path, chunk_bytes=64 << 10)
    files = storage.folders["m"]
    raw = path.read_bytes()
    assert man["sha256"] == hashlib.sha256(raw).hexdigest() and is_complete(man)
    assert bytes(files[HEADER_FILE]) == raw[:man["layout"]["header_size"]]
    assert json.loads(files[MANIFEST_FILE]) == man
    ex = man["layout"]["experts"]
    dense = {(p["tensor"], p["kind"]): p for p in man["layout"]["dense"]["planes"]}
    n_checked = 0
    for t in GGUFReader(path).tensors:
        tbytes = raw[t.data_offset:t.data_offset + t.n_bytes]
        ttype = GGMLType(int(t.tensor_type))
        dims = [int(d) for d in t.shape]
        want = dequantize(t.data, GGMLQuantizationType(int(ttype))) if ttype in SPLIT_TYPES else None
        if "_exps." in t.name:
            layer, part = int(t.name.split(".")[1]), t.name.split(".")[2][4:-5]
            per = t.n_bytes // ex["n_experts"]
            for e in range(ex["n_experts"]):
                base = (layer * ex["n_experts"] + e) * ex["record_size"]
                o, n = ex["planes"][f"{part}_codes"]
                codes = bytes(files[EXPERTS_FILE][base + o:base + o + n])
                o, n = ex["planes"][f"{part}_scales"]
                scales = bytes(files[EXPERTS_FILE][base + o:base + o + n])
                src = tbytes[e * per:(e + 1) * per]
                if ttype in SPLIT_TYPES:
                    assert bytes(merge_blocks(ttype, codes, scales)) == src
                    np.testing.assert_array_equal(_dequant_planes(ttype, codes, scales, dims[:2]), want[e])
                else:
                    assert codes == src and scales == b""
                n_checked += 1
        elif ttype in SPLIT_TYPES:
            c, s = dense[(t.name, "codes")], dense[(t.name, "scales")]
            codes = bytes(files[DENSE_FILE][c["offset"]:c["offset"] + c["nbytes"]])
            scales = bytes(files[DENSE_FILE][s["offset"]:s["offset"] + s["nbytes"]])
            assert bytes(merge_blocks(ttype, codes, scales)) == tbytes
            np.testing.assert_array_equal(_dequant_planes(ttype, codes, scales, dims), want)
            n_checked += 1
        else:
            p = dense[(t.name, "raw")]
            assert bytes(files[DENSE_FILE][p["offset"]:p["offset"] + p["nbytes"]]) == tbytes
            n_checked += 1
    assert n_checked > 0
    assert len(files[EXPERTS_FILE]) == ex["file_size"]
    assert run(verify(storage.sink("m"))).ok


def test_split_matches_the_block_layout():
    # expected planes built block by block here, independently of the split code: a block is a 2-byte f16 scale
    # followed by its codes (32 int8 for Q8_0, 16 nibble bytes for Q4_0)
    rng = random.Random(7)
    for t in (GGMLType.Q8_0, GGMLType.Q4_0):
        blk = SPLIT_TYPES[t][0]
        data = bytes(rng.randrange(256) for _ in range(blk * 37))
        blocks = [data[i:i + blk] for i in range(0, len(data), blk)]
        want = (b"".join(b[2:] for b in blocks), b"".join(b[:2] for b in blocks))
        codes, scales = split_blocks(t, data)
        assert (bytes(codes), bytes(scales)) == want
        assert bytes(merge_blocks(t, codes, scales)) == data
        with pytest.raises(ValueError):
            split_blocks(t, data[:-1])
