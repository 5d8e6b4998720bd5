"""The store with gemma4 files: the fused gate|up expert tensor fills the same records as separate gate and up
tensors (Q4_0 blocks split into nibble and scale planes), Q6_K and F32 tensors stay raw, the ingest round-trips
every byte, an interrupted ingest resumes, and the real model's record size follows from its dimensions."""
import asyncio
import hashlib
import json

import numpy as np
import pytest
from gguf import GGUFReader

from diskformer.reference.dequant import dequantize_q4_0
from py_engine.gguf.reader import parse_header
from py_engine.gguf.sources import read_gguf_file
from py_engine.gguf.types import GGMLType
from py_engine.store import IngestAborted, is_complete, verify
from py_engine.store.blocks import merge_blocks
from py_engine.store.fused_experts import fused_gate_up_halves
from py_engine.store.ingest import ingest
from py_engine.store.layout import (DENSE_FILE, EXPERTS_FILE, HEADER_FILE, StoreLayout, StoreLayoutError,
                                    plan_units)
from py_engine.store.local import BytesSource, FileSource, MemoryStorage
from store_craft import synthetic_header


def run(coro):
    return asyncio.run(coro)


def ingest_to_memory(path, **options):
    storage, source = MemoryStorage(), FileSource(path)
    try:
        manifest = run(ingest(source, storage.sink("m"), **options))
    finally:
        source.close()
    return storage, manifest


def record_plane(files, ex, layer, expert, plane) -> bytes:
    base = (layer * ex["n_experts"] + expert) * ex["record_size"]
    o, n = ex["planes"][plane]
    return bytes(files[EXPERTS_FILE][base + o:base + o + n])


@pytest.mark.parametrize("name", ["micro-gemma4", "micro-gemma4-f32"])
def test_ingest_splits_fused_gate_up_into_records(gemma4_models, name):
    path = gemma4_models / f"{name}.gguf"
    storage, man = ingest_to_memory(path, chunk_bytes=50_000)
    files, raw = storage.folders["m"], path.read_bytes()
    assert man["sha256"] == hashlib.sha256(raw).hexdigest() and is_complete(man)
    assert bytes(files[HEADER_FILE]) == raw[:man["layout"]["header_size"]]
    ex = man["layout"]["experts"]
    assert ex["n_experts"] == 8 and ex["layers"] == [0, 1, 2, 3]
    dense = {(p["tensor"], p["kind"]): p for p in man["layout"]["dense"]["planes"]}
    checked = 0
    for t in GGUFReader(path).tensors:
        data = raw[t.data_offset:t.data_offset + t.n_bytes]
        layer = int(t.name.split(".")[1]) if t.name.startswith("blk.") else None
        if t.name.endswith("ffn_gate_up_exps.weight") or t.name.endswith("ffn_down_exps.weight"):
            per = t.n_bytes // 8
            halves = (("gate", 0, per // 2), ("up", per // 2, per // 2)) if "gate_up" in t.name else \
                (("down", 0, per),)
            for e in range(8):
                for part, start, n in halves:
                    codes = record_plane(files, ex, layer, e, f"{part}_codes")
                    scales = record_plane(files, ex, layer, e, f"{part}_scales")
                    src = data[e * per + start:e * per + start + n]
                    if t.tensor_type.name == "Q4_0":
                        assert bytes(merge_blocks(GGMLType.Q4_0, codes, scales)) == src
                    else:
                        assert codes == src and scales == b""
            checked += 1
        else:
            assert (t.name, "raw") in dense or (t.name, "codes") in dense, t.name
            kind = "raw" if (t.name, "raw") in dense else "codes"
            p = dense[(t.name, kind)]
            if kind == "raw":
                assert bytes(files[DENSE_FILE][p["offset"]:p["offset"] + p["nbytes"]]) == data
            else:
                s = dense[(t.name, "scales")]
                codes = bytes(files[DENSE_FILE][p["offset"]:p["offset"] + p["nbytes"]])
                scales = bytes(files[DENSE_FILE][s["offset"]:s["offset"] + s["nbytes"]])
                assert bytes(merge_blocks(GGMLType(int(t.tensor_type)), codes, scales)) == data
    assert checked == 8  # 4 layers x (gate_up, down)
    assert ("token_embd.weight", "raw") in dense  # Q6_K is stored raw
    assert ("blk.0.ffn_down_exps.scale", "raw") in dense
    assert run(verify(storage.sink("m"))).ok


def test_gate_half_of_a_record_is_the_gate_matrix(gemma4_models):
    # the gate rows of expert 3 in layer 1, read back from its record's planes, equal the dequantised fused rows
    path = gemma4_models / "micro-gemma4.gguf"
    storage, man = ingest_to_memory(path)
    ex = man["layout"]["experts"]
    fused = next(t for t in GGUFReader(path).tensors if t.name == "blk.1.ffn_gate_up_exps.weight")
    want = dequantize_q4_0(fused.data[3])  # (2 x ffn, hidden): gate rows, then up rows
    for part, rows in (("gate", want[:64]), ("up", want[64:])):
        merged = merge_blocks(GGMLType.Q4_0, record_plane(storage.folders["m"], ex, 1, 3, f"{part}_codes"),
                              record_plane(storage.folders["m"], ex, 1, 3, f"{part}_scales"))
        got = dequantize_q4_0(np.frombuffer(bytes(merged), np.uint8).reshape(64, -1))
        assert np.array_equal(got, rows)
    assert ex["dims"]["gate"] == [256, 64] and ex["dims"]["down"] == [64, 256]


def test_interrupted_ingest_resumes_to_the_same_store(gemma4_models):
    path = gemma4_models / "micro-gemma4.gguf"
    clean, _ = ingest_to_memory(path, chunk_bytes=100_000, checkpoint_bytes=200 << 10)
    storage, seen = MemoryStorage(), {"stop": False}

    class StopHalfway:
        def is_set(self):
            return seen["stop"]

    def on_progress(p):
        seen["stop"] = seen["stop"] or p.done > path.stat().st_size // 2

    with pytest.raises(IngestAborted):
        run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m"), chunk_bytes=100_000,
                   checkpoint_bytes=200 << 10, progress=on_progress, abort=StopHalfway()))
    run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m")))
    for name in (HEADER_FILE, DENSE_FILE, EXPERTS_FILE):
        assert bytes(storage.folders["m"][name]) == bytes(clean.folders["m"][name]), name


def test_units_cover_the_file_and_the_fused_halves(gemma4_models):
    path = gemma4_models / "micro-gemma4.gguf"
    header = read_gguf_file(path)
    layout = StoreLayout(header)
    units = plan_units(layout, path.stat().st_size, 40_000)
    assert units[0].start == 0 and units[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in zip(units, units[1:]))
    fused = header.tensors_by_name["blk.0.ffn_gate_up_exps.weight"]
    covered = sum(op.n for u in units for op in u.ops if fused.abs_offset <= op.src < fused.abs_offset + fused.nbytes)
    assert covered == fused.nbytes


def test_real_gemma4_record_size():
    # Gemma 4 26B-A4B: hidden 2816, 128 experts of ffn 704, Q4_0: 3 x 704 x 2816 x 18/32 bytes per record
    q4, f32 = GGMLType.Q4_0, GGMLType.F32
    tensors = [("blk.0.ffn_gate_inp.weight", [2816, 128], f32),
               ("blk.0.ffn_gate_up_exps.weight", [2816, 1408, 128], q4),
               ("blk.0.ffn_down_exps.weight", [704, 2816, 128], q4),
               ("blk.0.ffn_down_exps.scale", [128], f32)]
    layout = StoreLayout(parse_header(synthetic_header("gemma4", tensors)))
    assert layout.experts.record_size == 3_345_408 == 3 * 704 * 2816 * 18 // 32
    assert layout.experts.types == {"gate": int(q4), "up": int(q4), "down": int(q4)}
    assert [p.tensor for p in layout.dense] == ["blk.0.ffn_gate_inp.weight", "blk.0.ffn_down_exps.scale"]
    assert json.loads(json.dumps(layout.to_json()))["experts"]["record_size"] == 3_345_408


def test_odd_fused_tensors_are_refused():
    class Tensor:
        def __init__(self, name, dims, nbytes):
            self.name, self.dims, self.nbytes, self.type, self.abs_offset = name, dims, nbytes, GGMLType.Q4_0, 0

    assert fused_gate_up_halves(Tensor("blk.0.ffn_down_exps.weight", [64, 256, 8], 8 * 256 * 36)) is None
    with pytest.raises(StoreLayoutError, match="2 x ffn"):
        fused_gate_up_halves(Tensor("blk.0.ffn_gate_up_exps.weight", [256, 63, 8], 8 * 63 * 144))
    halves = fused_gate_up_halves(Tensor("blk.2.ffn_gate_up_exps.weight", [256, 128, 8], 8 * 128 * 144))
    gate, up = halves[(2, "gate")], halves[(2, "up")]
    assert (gate.dims, gate.nbytes, gate.expert_stride) == ([256, 64, 8], 8 * 64 * 144, 128 * 144)
    assert up.abs_offset == 64 * 144
