"""py_engine.gguf against gguf-py (the pinned `gguf` package) on every fixture model, range-only sources, v2 and
big-endian files, bit-exact Q8_0/Q4_0 planes. Corrupt and unsupported files: test_gguf_errors.py."""
import asyncio
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from gguf_craft import STR, Craft, arr, craft_from_header, small_model_craft
from py_engine.gguf import (BLOCK_LAYOUTS, GGMLType, GGUFError, GGUFHeader, GGUFValueType, NeedMoreBytes,
                            TruncatedGGUF, UnsupportedGGUF, check_supported, parse_header,
                            read_gguf_file, read_header_async, read_header_sync, split_q4_0, split_q8_0,
                            tensor_byte_range)

REPO = Path(__file__).resolve().parents[2]
SUMS = REPO.parent / "shared" / "fixtures" / "models" / "SHA256SUMS"
FIXTURE_NAMES = sorted(line.split()[1] for line in SUMS.read_text().splitlines() if line.strip())


# -- comparison with gguf-py --------------------------------------------------------------------------------

def _flatten(v):
    if isinstance(v, list):
        return [x for item in v for x in (_flatten(item) if isinstance(item, list) else [item])]
    return v


def _assert_plain(v, where):
    """Metadata holds plain Python values only (no numpy scalars), lists for arrays."""
    if isinstance(v, list):
        for x in v:
            _assert_plain(x, where)
    else:
        assert type(v) in (int, float, bool, str), (where, type(v))


def assert_matches_gguf_py(header: GGUFHeader, path: Path):
    ref = GGUFReader(path)
    assert header.version == ref.fields["GGUF.version"].contents()
    # gguf-py records byte order relative to the host: "I" same, "S" swapped (these tests run on little-endian)
    assert header.byte_order == {"I": "<", "S": ">"}[ref.byte_order] and sys.byteorder == "little"
    fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(header.metadata) == list(fields)  # same keys in file order
    for key, f in fields.items():
        got = header.metadata[key]
        _assert_plain(got, key)
        assert [int(t) for t in header.metadata_types[key]] == [int(t) for t in f.types][:2], key
        want = f.contents()
        if f.types[0] == GGUFValueType.ARRAY:  # gguf-py flattens nested arrays
            got = _flatten(got)
            assert len(got) == len(want), key
            for a, b in zip(got, want):
                assert type(a) is type(b) and a == b, (key, a, b)
        else:
            assert type(got) is type(want) and got == want, (key, got, want)
    assert header.data_offset == ref.data_offset == header.header_size
    assert header.alignment == ref.alignment
    assert [t.name for t in header.tensors] == [t.name for t in ref.tensors]
    for mine, theirs in zip(header.tensors, ref.tensors):
        assert mine.dims == tuple(int(d) for d in theirs.shape), mine.name
        assert mine.shape == tuple(reversed(mine.dims))
        assert mine.type == int(theirs.tensor_type) and mine.type.name == theirs.tensor_type.name
        assert mine.abs_offset == theirs.data_offset
        assert mine.offset == int(theirs.field.parts[-1][0]) == mine.abs_offset - header.data_offset
        assert mine.nbytes == theirs.n_bytes and mine.n_elements == theirs.n_elements
        if theirs.tensor_type == GGMLQuantizationType.F32:
            assert mine.shape == theirs.data.shape
    return ref


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_matches_gguf_py(fixture_models, name):
    path = fixture_models / name
    header = read_gguf_file(path)
    assert header.file_size == path.stat().st_size
    assert_matches_gguf_py(header, path)
    check_supported(header)
    assert header.architecture in ("qwen3moe", "qwen35moe")
    assert header.arch_key("block_count") == header.metadata[f"{header.architecture}.block_count"]


def test_fixture_header_round_trips_byte_for_byte(fixture_models):
    """Re-encoding what was parsed (types, values, tensor infos) gives back the file's header bytes exactly."""
    path = fixture_models / "micro-qwen35moe.gguf"
    header = read_gguf_file(path)
    head = path.read_bytes()[:header.data_offset]
    assert craft_from_header(header).build()[:header.data_offset] == head


def test_tensor_byte_range_reads_gguf_py_tensor_bytes(fixture_models):
    path = fixture_models / "micro-qwen3moe.gguf"
    header = read_gguf_file(path)
    ref = {t.name: t for t in GGUFReader(path).tensors}
    raw = path.read_bytes()
    for name in ("token_embd.weight", "blk.0.attn_norm.weight", "blk.3.ffn_down_exps.weight", "output.weight"):
        start, n = tensor_byte_range(header, name)
        assert raw[start:start + n] == ref[name].data.tobytes()
    with pytest.raises(GGUFError, match="no tensor named 'nope'"):
        tensor_byte_range(header, "nope")


def test_type_table_matches_gguf_py():
    for q in GGMLQuantizationType:
        assert GGMLType(q.value).name == q.name
        if q == GGMLQuantizationType.Q8_1:
            # activation-only; gguf-py records its old 40-byte layout, ggml's is 36: we refuse to guess.
            assert GGMLType.Q8_1 not in BLOCK_LAYOUTS
            continue
        assert BLOCK_LAYOUTS[GGMLType(q.value)] == GGML_QUANT_SIZES[q], q.name
    assert BLOCK_LAYOUTS[GGMLType.Q8_0] == (32, 34) and BLOCK_LAYOUTS[GGMLType.Q4_0] == (32, 18)
    assert BLOCK_LAYOUTS[GGMLType.Q6_K] == (256, 210) and BLOCK_LAYOUTS[GGMLType.BF16] == (1, 2)


def test_engine_package_imports_no_numpy():
    code = "import sys, py_engine.gguf; assert 'numpy' not in sys.modules, 'numpy imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# -- crafted files: every value type, v2, big-endian, gguf-py's writer ------------------------------------

def test_crafted_every_value_type(tmp_path):
    c = small_model_craft()
    data = c.build()
    h = parse_header(data, len(data))
    m = h.metadata
    assert m["t.u8"] == 255 and m["t.i8"] == -128 and m["t.u16"] == 65535 and m["t.i16"] == -32768
    assert m["t.u32"] == 2**32 - 1 and m["t.i32"] == -2**31 and m["t.bool"] is True
    assert m["t.u64"] == 2**64 - 1 and m["t.i64"] == -2**63 and m["t.f64"] == 1e300
    assert m["t.f32"] == struct.unpack("<f", struct.pack("<f", 0.1))[0] and m["t.str"] == "héllo"
    assert m["t.arr_str"] == ["a", "", "ü"] and m["t.arr_bool"] == [True, False] and m["t.empty"] == []
    assert m["t.nested"] == [[1, 2], [], [3]] and m["t.deep"] == [[["x"], []], [["y", "z"]]]
    assert h.metadata_types["t.nested"] == (GGUFValueType.ARRAY, GGUFValueType.ARRAY)
    assert h.metadata_types["t.arr_u8"] == (GGUFValueType.ARRAY, GGUFValueType.UINT8)
    assert h.alignment == 64 and h.data_offset % 64 == 0
    assert [(t.name, t.nbytes, t.shape) for t in h.tensors] == [
        ("a.weight", 32, (2, 4)), ("b.weight", 68, (2, 32)), ("c.weight", 16, (8,))]
    assert h.get("t.missing", 7) == 7 and h.arch_key("missing", None) is None
    with pytest.raises(GGUFError, match="'toy.missing' is missing"):
        h.arch_key("missing")
    path = tmp_path / "craft.gguf"
    path.write_bytes(data)
    assert read_gguf_file(path) == h
    with pytest.raises(UnsupportedGGUF, match="unsupported architecture 'toy'"):
        check_supported(h)


def test_crafted_matches_gguf_py(tmp_path):
    c = small_model_craft()
    c.kvs = [kv for kv in c.kvs if kv[0] != "t.empty"]  # gguf-py reads an empty array without its element type
    path = tmp_path / "craft.gguf"
    path.write_bytes(c.build())
    assert_matches_gguf_py(read_gguf_file(path), path)


def test_gguf_py_writer_with_engine_tensor_types(tmp_path):
    """Files written by gguf-py itself: nested arrays, and one tensor of each type the engine stores."""
    from gguf import GGUFWriter
    path = tmp_path / "written.gguf"
    w = GGUFWriter(path, "qwen3moe")
    w.add_uint64("t.big", 2**64 - 2)
    w.add_array("t.nested", [[1, 2, 3], [4]])
    w.add_array("t.floats", [0.5, -2.25])
    w.add_string("t.s", "x" * 1000)
    rng = np.random.default_rng(0)
    w.add_tensor("f32", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((5,)).astype(np.float16))
    for name, qtype, (block, size) in [("bf16", GGMLQuantizationType.BF16, (1, 2)),
                                       ("q8", GGMLQuantizationType.Q8_0, (32, 34)),
                                       ("q4", GGMLQuantizationType.Q4_0, (32, 18)),
                                       ("q6k", GGMLQuantizationType.Q6_K, (256, 210))]:
        cols = 2 * block if block > 1 else 7  # elements per row
        raw = rng.integers(0, 256, size=(3, cols // block * size), dtype=np.uint8)  # rows of blocks, as bytes
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    h = read_gguf_file(path)
    assert_matches_gguf_py(h, path)
    assert {t.name: t.type.name for t in h.tensors} == {
        "f32": "F32", "f16": "F16", "bf16": "BF16", "q8": "Q8_0", "q4": "Q4_0", "q6k": "Q6_K"}
    assert h.tensors_by_name["q6k"].nbytes == 3 * 2 * 210
    assert h.metadata["t.nested"] == [[1, 2, 3], [4]] and h.metadata["t.big"] == 2**64 - 2


def test_version_2_file():
    # v2 has the same layout as v3 (u64 counts and lengths; v3 only added big-endian files).
    c = small_model_craft()
    c.version = 2
    data = c.build()
    h = parse_header(data, len(data))
    assert h.version == 2
    c.version = 3
    assert parse_header(c.build(), len(data)).metadata == h.metadata


def test_big_endian_file(tmp_path):
    c = small_model_craft()
    c.order = ">"
    c.kvs = [kv for kv in c.kvs if kv[0] != "t.empty"]
    path = tmp_path / "be.gguf"
    path.write_bytes(c.build())
    h = read_gguf_file(path)
    assert h.byte_order == ">" and h.version == 3 and h.metadata["t.u64"] == 2**64 - 1
    assert_matches_gguf_py(h, path)
    with pytest.raises(UnsupportedGGUF, match="big-endian"):
        check_supported(h)


def test_invalid_utf8_strings_survive_exactly():
    c = Craft().kv("t.bytes", arr(STR), [b"\xff\xfe", b"ok"])
    h = parse_header(c.build(), None)
    assert [s.encode("utf-8", "surrogateescape") for s in h.metadata["t.bytes"]] == [b"\xff\xfe", b"ok"]


# -- range-only sources -----------------------------------------------------------------------------------

class CountingSource:
    def __init__(self, data: bytes):
        self.data, self.calls = data, []

    def __call__(self, start, end):
        assert 0 <= start < end <= len(self.data)
        self.calls.append((start, end))
        return self.data[start:end]


def test_range_source_grows_prefix(fixture_models):
    path = fixture_models / "micro-qwen35moe.gguf"
    data = path.read_bytes()
    src = CountingSource(data)
    h = read_header_sync(src, len(data), initial_size=1024)
    assert h == read_gguf_file(path)
    starts = [s for s, _ in src.calls]
    ends = [e for _, e in src.calls]
    assert starts == [0] + ends[:-1]  # contiguous, each byte read once
    assert len(src.calls) > 1 and ends[-1] < 2 * h.data_offset
    assert all(b >= 2 * a for a, b in zip(ends, ends[1:-1]))  # at least doubling


def test_range_source_few_requests_for_large_vocab(fixture_models):
    path = fixture_models / "qwen3vocab-qwen3moe.gguf"
    data = path.read_bytes()
    src = CountingSource(data)
    h = read_header_sync(src, len(data))
    assert src.calls[0] == (0, 1 << 20) and len(src.calls) <= 4
    assert src.calls[-1][1] <= 2 * h.data_offset and len(h.metadata["tokenizer.ggml.tokens"]) == 151936


def test_async_source_and_small_file():
    data = small_model_craft().build()
    calls = []

    async def read(start, end):
        calls.append((start, end))
        await asyncio.sleep(0)
        return data[start:end]

    h = asyncio.run(read_header_async(read, len(data)))
    assert calls == [(0, len(data))]  # a file smaller than the first prefix is read in one request
    assert h == parse_header(data, len(data))


def test_short_reads_from_source_are_errors():
    data = small_model_craft().build()
    with pytest.raises(GGUFError, match="returned 10 bytes for range 0..64"):
        read_header_sync(lambda s, e: data[s:s + 10], len(data), initial_size=64)


def test_need_more_bytes_protocol():
    data = small_model_craft().build()
    full = parse_header(data, len(data))
    assert not issubclass(NeedMoreBytes, GGUFError)
    have, rounds = 0, 0
    while True:
        try:
            h = parse_header(data[:have], len(data))
            break
        except NeedMoreBytes as more:
            assert have < more.needed <= len(data)
            have, rounds = more.needed, rounds + 1
    assert h == full and rounds > 20  # one round per item when fed exactly what was asked
    with pytest.raises(NeedMoreBytes):  # file size unknown: a short buffer only asks for more
        parse_header(data[:100])


def test_truncated_file_is_an_error(tmp_path):
    data = small_model_craft().build()
    head_end = len(small_model_craft().header_bytes())
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:head_end - 3])
    with pytest.raises(TruncatedGGUF, match=r"truncated GGUF: the file ends at byte \d+ while reading the data "
                                            r"offset of tensor 'c.weight'"):
        read_gguf_file(path)
    path.write_bytes(data[:2])
    with pytest.raises(TruncatedGGUF, match="while reading the magic"):
        read_gguf_file(path)


# -- Q8_0 / Q4_0 planes ---------------------------------------------------------------------------------------

def test_split_q8_0_matches_gguf_dequantize(fixture_models):
    path = fixture_models / "micro-qwen3moe.gguf"
    header = read_gguf_file(path)
    raw = path.read_bytes()
    info = header.tensors_by_name["blk.1.ffn_up_exps.weight"]
    blocks = raw[info.abs_offset:info.end]
    codes, scales = split_q8_0(blocks)
    nb = info.nbytes // 34
    assert len(codes) == 32 * nb and len(scales) == 2 * nb
    d = np.frombuffer(scales, "<f2").astype(np.float32)[:, None]
    mine = (np.frombuffer(codes, np.int8).reshape(nb, 32).astype(np.float32) * d).reshape(info.shape)
    want = dequantize(np.frombuffer(blocks, np.uint8).reshape(info.shape[:-1] + (-1,)), GGMLQuantizationType.Q8_0)
    assert np.array_equal(mine, want)
    # and the planes interleave back into the same blocks
    rebuilt = b"".join(scales[2 * b:2 * b + 2] + codes[32 * b:32 * b + 32] for b in range(nb))
    assert rebuilt == blocks


def test_split_q4_0_matches_gguf_dequantize():
    rng = np.random.default_rng(7)
    nb = 257
    blocks = np.zeros((nb, 18), np.uint8)
    blocks[:, :2] = rng.standard_normal(nb).astype("<f2").view(np.uint8).reshape(nb, 2)
    blocks[:, 2:] = rng.integers(0, 256, (nb, 16), dtype=np.uint8)
    codes, scales = split_q4_0(bytearray(blocks.tobytes()))
    q = np.frombuffer(codes, np.uint8).reshape(nb, 16)
    nibbles = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.int8) - 8  # low nibbles are elements 0..15
    mine = nibbles.astype(np.float32) * np.frombuffer(scales, "<f2").astype(np.float32)[:, None]
    want = dequantize(blocks, GGMLQuantizationType.Q4_0)
    assert np.array_equal(mine.reshape(want.shape), want)
    with pytest.raises(GGUFError, match="not a whole number of 18-byte blocks"):
        split_q4_0(bytes(19))
    assert split_q8_0(b"") == (b"", b"")
