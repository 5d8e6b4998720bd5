"""The model store: layout planning, ingest into a sink, checkpoint / resume, verification, quota, catalogue."""
import asyncio
import hashlib
import json
import os
import random
import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from py_engine.gguf.reader import parse_header
from py_engine.gguf.sources import read_gguf_file
from py_engine.gguf.types import GGMLType
from py_engine.store import (IngestAborted, StoreIntegrityError, StoreQuotaError, is_complete, list_models,
                             remove, verify)
from py_engine.store.blocks import merge_blocks, split_blocks
from py_engine.store.ingest import ingest
from py_engine.store.layout import (ALIGN, DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE,
                                    SPLIT_TYPES, StoreLayout, block_bytes, plan_units)
from py_engine.store.local import BytesSource, DirectoryStorage, FileSource, MemoryStorage

STORE_FILES = (HEADER_FILE, DENSE_FILE, EXPERTS_FILE)
ARCH_FIXTURES = ["micro-qwen3moe.gguf", "micro-qwen35moe.gguf", "micro-qwen3moe-f32.gguf"]


def run(coro):
    return asyncio.run(coro)


# ---- synthetic headers with the real models' dimensions (no tensor data) ----------------------------------------

def _gguf_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def synthetic_header(arch: str, tensors) -> bytes:
    """GGUF v3 header bytes: general.architecture and the tensor infos [(name, dims, type)], data 32-aligned."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), 1),
           _gguf_string("general.architecture"), struct.pack("<I", 8), _gguf_string(arch)]
    off = 0
    for name, dims, ttype in tensors:
        out += [_gguf_string(name), struct.pack("<I", len(dims)), struct.pack(f"<{len(dims)}Q", *dims),
                struct.pack("<IQ", int(ttype), off)]
        blk_elems = 32 if ttype in (GGMLType.Q8_0, GGMLType.Q4_0) else 1
        n = 1
        for d in dims:
            n *= d
        off += -(-(n // blk_elems * block_bytes(ttype)) // 32) * 32
    return b"".join(out)


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


def _ingest_mem(path, **kw):
    storage = MemoryStorage()
    src = FileSource(path)
    try:
        manifest = run(ingest(src, storage.sink("m"), **kw))
    finally:
        src.close()
    return storage, manifest


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
    storage, man = _ingest_mem(path, chunk_bytes=64 << 10)
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


# ---- abort, crash, resume ------------------------------------------------------------------------------------------

class Crash(BaseException):
    """A tab killed mid-write: nothing after it runs (the engine only checkpoints on Exception)."""


class CrashingSink:
    def __init__(self, sink, after_writes):
        self.sink, self.left = sink, after_writes

    def __getattr__(self, name):
        return getattr(self.sink, name)

    async def write(self, file, offset, data):
        self.left -= 1
        if self.left < 0:
            raise Crash()
        await self.sink.write(file, offset, data)


class FailingSource:
    def __init__(self, src, fail_at):
        self.src, self.fail_at, self.size = src, fail_at, src.size

    def identity(self):
        return self.src.identity()

    async def read(self, offset, n):
        if offset > 0 and offset <= self.fail_at < offset + n:  # the header prefix read at 0 passes
            raise OSError("connection reset")
        return await self.src.read(offset, n)


def _same_store(a: MemoryStorage, b: MemoryStorage):
    fa, fb = a.folders["m"], b.folders["m"]
    for f in STORE_FILES:
        assert fa[f] == fb[f], f"{f} differs"
    ma, mb = json.loads(fa[MANIFEST_FILE]), json.loads(fb[MANIFEST_FILE])
    assert ma["checksums"] == mb["checksums"] and ma["sha256"] == mb["sha256"] and ma["layout"] == mb["layout"]
    assert is_complete(ma) and is_complete(mb)


def _in_expert_tensor(header, offset):
    """True when `offset` falls strictly inside an expert tensor and inside one expert's slice (mid-record)."""
    for t in header.tensors:
        if "_exps." in t.name and t.abs_offset < offset < t.end:
            return (offset - t.abs_offset) % (t.nbytes // t.dims[2]) != 0
    return False


CHUNK = 100_000  # cuts the micro models' 8704-byte expert slices mid-slice
CKPT = 200 << 10


@pytest.fixture(scope="module")
def tiny35(fixture_models):
    path = fixture_models / "micro-qwen35moe.gguf"
    clean, _ = _ingest_mem(path, chunk_bytes=CHUNK, checkpoint_bytes=CKPT)
    return path, clean, read_gguf_file(path)


def test_abort_mid_record_then_resume(tiny35):
    path, clean, header = tiny35
    storage, stop = MemoryStorage(), {"at": None}

    class Flag:
        def is_set(self):
            return stop["at"] is not None

    def on_progress(p):
        if stop["at"] is None and _in_expert_tensor(header, p.done) and p.done > 500_000:
            stop["at"] = p.done

    with pytest.raises(IngestAborted):
        run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m"), chunk_bytes=CHUNK,
                   checkpoint_bytes=CKPT, progress=on_progress, abort=Flag()))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert man["state"]["next_offset"] == stop["at"] and not man["state"]["complete"]
    phases = []
    run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m"), progress=lambda p: phases.append(p)))
    assert phases[0].phase == "rehash" and phases[-1].phase == "ingest" and phases[-1].done == path.stat().st_size
    _same_store(storage, clean)


def test_crash_after_checkpoint_resumes_from_it(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(Crash):
        run(ingest(BytesSource(path.read_bytes()), CrashingSink(storage.sink("m"), 220), chunk_bytes=CHUNK,
                   checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ck = man["state"]["next_offset"]
    assert ck >= CKPT and len(man["state"]["checkpoints"]) >= 1
    # Bytes written after the checkpoint but never recorded: scribble over them; the resume rewrites them.
    exps = storage.folders["m"][EXPERTS_FILE]
    exps[-100:] = b"\xff" * 100
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any(f"resuming at byte {ck}" in m for m in logs)
    _same_store(storage, clean)


def test_source_error_checkpoints_then_resumes(tiny35):
    path, clean, header = tiny35
    storage = MemoryStorage()
    exps = [t for t in header.tensors if t.name == "blk.2.ffn_up_exps.weight"][0]
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes()), exps.abs_offset + 5000), storage.sink("m"),
                   chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    fail_at = exps.abs_offset + 5000  # the frontier is the start of the unit whose read failed
    assert 0 < man["state"]["next_offset"] <= fail_at < man["state"]["next_offset"] + CHUNK
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m")))
    _same_store(storage, clean)


def test_damaged_prefix_is_detected_and_restarted(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes()), 900_000), storage.sink("m"), chunk_bytes=CHUNK))
    storage.folders["m"][DENSE_FILE][100] ^= 0x40  # damage a plane the checkpoint covers
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any("cannot resume" in m and "no longer matches" in m for m in logs)
    _same_store(storage, clean)


def test_changed_source_starts_over(fixture_models, tiny35):
    path, _, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes(), etag="A"), 900_000), storage.sink("m"),
                   chunk_bytes=CHUNK))
    logs = []  # same bytes, new ETag: the server says it is another file
    run(ingest(BytesSource(path.read_bytes(), etag="B"), storage.sink("m"), chunk_bytes=CHUNK, log=logs.append))
    assert any("starting over" in m for m in logs) and not any("resuming" in m for m in logs)
    other = fixture_models / "micro-qwen3moe.gguf"  # another model into the same folder
    logs.clear()
    run(ingest(BytesSource(other.read_bytes(), etag="B"), storage.sink("m"), log=logs.append))
    assert any("starting over" in m for m in logs)
    clean, _ = _ingest_mem(other)
    _same_store(storage, clean)


def test_flipped_source_byte_fails_sha256_and_never_completes(tiny35):
    path, clean, header = tiny35
    good = path.read_bytes()
    want = hashlib.sha256(good).hexdigest()
    bad = bytearray(good)
    bad[header.data_offset + 12345] ^= 1
    storage = MemoryStorage()
    with pytest.raises(StoreIntegrityError, match="sha256"):
        run(ingest(BytesSource(bytes(bad)), storage.sink("m"), expected_sha256=want))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert not is_complete(man) and man["state"]["failed"] and man["sha256"] is None
    assert not run(verify(storage.sink("m"))).ok
    logs = []  # the right file then restarts from zero (a failed store is never resumed)
    run(ingest(BytesSource(good), storage.sink("m"), expected_sha256=want, log=logs.append))
    assert any("starting over" in m for m in logs)
    _same_store(storage, clean)


def test_verify_finds_corrupted_record_and_plane(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}
    sink = storage.sink("m")
    assert run(verify(sink)).ok
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ex = man["layout"]["experts"]
    base = (2 * ex["n_experts"] + 5) * ex["record_size"]
    storage.folders["m"][EXPERTS_FILE][base + ex["planes"]["down_scales"][0] + 3] ^= 0x10
    plane = man["layout"]["dense"]["planes"][7]
    storage.folders["m"][DENSE_FILE][plane["offset"]] ^= 0x01
    rep = run(verify(sink))
    assert not rep.ok and rep.header_ok
    assert rep.bad_records == [(2, 5, ["down_scales"])]
    assert rep.bad_planes == [f"{plane['tensor']}:{plane['kind']}"]


def test_quota_error_is_clear_and_resumable(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage(quota=700_000)
    with pytest.raises(StoreQuotaError, match=r"out of storage space: this model needs .* resume"):
        run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert man["state"]["next_offset"] > 0 and not man["state"]["complete"]
    storage.quota = None  # the user freed space
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any("resuming" in m for m in logs)
    _same_store(storage, clean)


def test_completed_store_is_not_reingested(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}

    class HeaderOnlySource(FileSource):  # same identity as the clean ingest's FileSource
        async def read(self, offset, n):
            assert offset + n <= 1 << 20, "a complete store must not download tensor data again"
            return await super().read(offset, n)

    src = HeaderOnlySource(path)
    man = run(ingest(src, storage.sink("m")))
    assert is_complete(man)
    with pytest.raises(StoreIntegrityError):
        run(ingest(src, storage.sink("m"), expected_sha256="00" * 32))
    src.close()


def test_directory_storage_catalogue(fixture_models, tmp_path, tiny35):
    path, clean, _ = tiny35
    storage = DirectoryStorage(tmp_path / "models")
    src = FileSource(path)
    run(ingest(src, storage.sink("micro"), chunk_bytes=CHUNK))
    src.close()
    for f in STORE_FILES:
        assert (tmp_path / "models" / "micro" / f).read_bytes() == bytes(clean.folders["m"][f])
    listed = run(list_models(storage))
    assert [(m["name"], m["complete"], m["architecture"]) for m in listed] == [("micro", True, "qwen35moe")]
    assert listed[0]["bytes"] == sum(os.path.getsize(p) for p in (tmp_path / "models" / "micro").iterdir())
    assert run(verify(storage.sink("micro"))).ok
    run(remove(storage, "micro"))
    assert run(list_models(storage)) == []
    mem = MemoryStorage()
    mem.folders["m"] = clean.folders["m"]
    assert [m["bytes"] for m in run(list_models(mem))] == [sum(len(b) for b in clean.folders["m"].values())]


def test_crc_ranges_streams_across_chunks_holes_and_eof(monkeypatch):
    import zlib

    from py_engine.store import catalogue
    monkeypatch.setattr(catalogue, "READ_CHUNK", 100)
    rng = random.Random(5)
    data = bytes(rng.randrange(256) for _ in range(1000))
    storage = MemoryStorage()
    run(storage.sink("m").write("f", 0, data))
    ranges = [(0, 10, "a"), (5, 300, "overlap"), (350, 1, "b"), (600, 250, "c"), (990, 10, "end"),
              (995, 10, "past"), (2000, 5, "beyond"), (40, 0, "empty")]
    got = run(catalogue.crc_ranges(storage.sink("m"), "f", ranges))
    for o, n, key in ranges:
        want = None if o + n > len(data) else zlib.crc32(data[o:o + n])
        assert got.get(key, 0) == want, key


def test_verify_reports_a_truncated_expert_file(tiny35):
    _, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ex = man["layout"]["experts"]
    del storage.folders["m"][EXPERTS_FILE][-ex["record_size"]:]
    rep = run(verify(storage.sink("m")))
    assert rep.bad_records == [(ex["layers"][-1], ex["n_experts"] - 1, list(ex["planes"]))]


def test_asynchronous_sink_gets_concurrent_writes_and_the_same_store(tiny35):
    path, clean, _ = tiny35

    class SlowSink:
        """Writes that complete later and out of order, as a promise-based backend's do."""
        writes_block = False

        def __init__(self, sink):
            self.sink, self.in_flight, self.most = sink, 0, 0
            self.rng = random.Random(1)

        def __getattr__(self, name):
            return getattr(self.sink, name)

        async def write(self, file, offset, data):
            data = bytes(data)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            for _ in range(self.rng.randrange(3)):
                await asyncio.sleep(0)
            await self.sink.write(file, offset, data)
            self.in_flight -= 1

    storage = MemoryStorage()
    slow = SlowSink(storage.sink("m"))
    run(ingest(BytesSource(path.read_bytes()), slow, chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    assert slow.most > 1
    # the clean store was made through a FileSource (another identity): compare data and checksums
    a, b = storage.folders["m"], clean.folders["m"]
    assert all(a[f] == b[f] for f in STORE_FILES)
    assert json.loads(a[MANIFEST_FILE])["checksums"] == json.loads(b[MANIFEST_FILE])["checksums"]
