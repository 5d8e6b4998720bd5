"""py_engine.gguf against gguf-py (the pinned `gguf` package) on every fixture model, range-only sources, v2 and
big-endian files, bit-exact Q8_0/Q4_0 planes, and one hand-made corrupt file per validation rule."""
import asyncio
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from gguf_craft import ARR, BOOL, F32, I32, STR, U8, U32, U64, Craft, arr, small_model_craft
from py_engine.gguf import (BLOCK_LAYOUTS, GGMLType, GGUFError, GGUFHeader, GGUFValueType, NeedMoreBytes,
                            TensorInfo, TruncatedGGUF, UnsupportedGGUF, check_supported, parse_header,
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


def craft_from_header(h: GGUFHeader) -> Craft:
    c = Craft(version=h.version, order=h.byte_order, alignment=h.alignment)
    for key, value in h.metadata.items():
        types = h.metadata_types[key]
        c.kv(key, arr(int(types[1])) if types[0] == ARR else int(types[0]), value)
    for t in h.tensors:
        c.tensor(t.name, t.dims, int(t.type), t.offset)
    return c


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


# -- corrupt files: one per rule, with the message ------------------------------------------------------------

def _parse(c_or_bytes):
    data = c_or_bytes.build() if isinstance(c_or_bytes, Craft) else c_or_bytes
    return parse_header(data, len(data))


def _small(**changes):
    c = small_model_craft()
    for k, v in changes.items():
        setattr(c, k, v)
    return c


def _patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


CORRUPT = {
    "wrong magic": (lambda: b"GGML" + small_model_craft().build()[4:],
                    r"not a GGUF file: the first 4 bytes are b'GGML' \(hex 47 47 4d 4c\)"),
    "version 1": (lambda: _small(version=1).build(), "GGUF version 1 is not supported"),
    "version 4": (lambda: _small(version=4).build(), "unsupported GGUF version 4"),
    "version 0": (lambda: _small(version=0).build(), "unsupported GGUF version 0"),
    "unknown value type": (lambda: Craft().kv_raw("x.bad", 13, b"\0" * 8).build(),
                           "metadata key 'x.bad' has unknown value type 13"),
    "unknown array element type": (lambda: Craft().kv_raw("x.arr", ARR, struct.pack("<IQ", 42, 1)).build(),
                                   "array 'x.arr' has unknown element type 42"),
    "absurd string length": (lambda: Craft().kv_raw("x.s", STR, struct.pack("<Q", 2**62) + b"abc").build(),
                             r"the string value of 'x.s' declares 4611686018427387904 bytes at offset \d+, "
                             r"but only \d+ bytes remain in the file"),
    "absurd key length": (lambda: _patched(Craft().kv("k", U8, 1).build(), 24, struct.pack("<Q", 2**64 - 1)),
                          "metadata key #0 declares 18446744073709551615 bytes"),
    "absurd array length": (lambda: Craft().kv_raw("x.a", ARR, struct.pack("<IQ", U32, 10**12)).build(),
                            "array 'x.a' declares 1000000000000 items"),
    "absurd string array length": (lambda: Craft().kv_raw("x.a", ARR, struct.pack("<IQ", STR, 2**40)).build(),
                                   "array 'x.a' declares 1099511627776 items"),
    "absurd kv count": (lambda: _patched(small_model_craft().build(), 16, struct.pack("<Q", 2**63)),
                        "the metadata key/value count declares 9223372036854775808 items"),
    "absurd tensor count": (lambda: _patched(small_model_craft().build(), 8, struct.pack("<Q", 10**9)),
                            "the tensor count declares 1000000000 items"),
    "tensor past end of file": (lambda: _small(data=bytes(100)).build(),
                                r"tensor 'b.weight' occupies bytes \d+\.\.\d+ but the file has only \d+ bytes"),
    "overlapping tensors": (lambda: Craft(data=bytes(96)).tensor("a", (8,), 0, 0).tensor("b", (16,), 0, 32)
                            .tensor("c", (4,), 0, 0).build(), r"tensors 'a' .* and 'c' .* overlap"),
    "overlap behind an empty tensor": (lambda: Craft(data=bytes(96)).tensor("a", (16,), 0, 0)
                                       .tensor("z", (0,), 0, 32).tensor("b", (4,), 0, 32).build(),
                                       "tensors 'a' .* and 'b' .* overlap"),
    "misaligned tensor": (lambda: _small(tensors=[("a", (4,), 0, 16)]).build(),
                          "tensor 'a' has data offset 16, not a multiple of the alignment 64"),
    "unknown tensor type": (lambda: Craft(data=bytes(64)).tensor("a", (4,), 99, 0).build(),
                            "tensor 'a' has unknown ggml type id 99"),
    "removed tensor type": (lambda: Craft(data=bytes(64)).tensor("a", (32,), 4, 0).build(),
                            r"tensor 'a' has type Q4_2 \(id 4\), which has no known block size"),
    "too many dims": (lambda: Craft(data=bytes(64)).tensor("a", (1, 1, 1, 1, 1), 0, 0).build(),
                      "tensor 'a' has 5 dimensions; ggml allows at most 4"),
    "huge dim": (lambda: Craft(data=bytes(64)).tensor("a", (2**63,), 0, 0).build(),
                 "tensor 'a' has an impossible dimension"),
    "partial block row": (lambda: Craft(data=bytes(64)).tensor("a", (33,), 8, 0).build(),
                          "tensor 'a' of type Q8_0 has rows of 33 elements, not a multiple of the block size 32"),
    "duplicate key": (lambda: Craft().kv("k", U8, 1).kv("k", U8, 2).build(), "metadata key 'k' appears twice"),
    "duplicate tensor": (lambda: Craft(data=bytes(64)).tensor("a", (4,), 0, 0).tensor("a", (4,), 0, 32).build(),
                         "tensor name 'a' appears twice"),
    "alignment not a power of two": (lambda: Craft().kv("general.alignment", U32, 48).build(),
                                     "general.alignment is 48; it must be a power of two"),
    "alignment zero": (lambda: Craft().kv("general.alignment", U32, 0).build(), "general.alignment is 0"),
    "alignment of wrong type": (lambda: Craft().kv("general.alignment", U64, 32).build(),
                                "general.alignment must be a uint32, found type UINT64"),
    "bool of value 2": (lambda: Craft().kv_raw("b", BOOL, b"\x02").build(),
                        "metadata key 'b' holds a bool of value 2"),
    "bool array of value 3": (lambda: Craft().kv_raw("b", ARR, struct.pack("<IQ", BOOL, 2) + b"\x01\x03").build(),
                              "metadata key 'b' holds a bool of value 3"),
    "arrays nested too deep": (lambda: Craft().kv("d", arr(arr(arr(arr(arr(arr(arr(arr(arr(U8))))))))),
                                                  [[[[[[[[[1]]]]]]]]]).build(),
                               "metadata key 'd' nests arrays deeper than 8 levels"),
    "truncated in metadata": (lambda: small_model_craft().build()[:300], "truncated GGUF: the file ends at byte 300"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_file_message(case):
    make, message = CORRUPT[case]
    with pytest.raises(GGUFError, match=message):
        _parse(make())


def test_nesting_at_the_limit_is_fine():
    h = _parse(Craft().kv("d", arr(arr(arr(arr(arr(arr(arr(arr(U8)))))))), [[[[[[[[1]]]]]]]]))
    assert h.metadata["d"] == [[[[[[[[1]]]]]]]]


def test_absurd_lengths_are_errors_even_on_a_short_prefix():
    data = Craft().kv_raw("x.s", STR, struct.pack("<Q", 2**62)).build() + bytes(1000)
    with pytest.raises(GGUFError, match="declares"):
        parse_header(data[:50], len(data))  # not NeedMoreBytes: no file this size could hold it


# -- check_supported: semantic checks on otherwise valid files ---------------------------------------------

def _fixture_variant(fixture_models, name, edit):
    """Parse a fixture, change its metadata or tensor infos, write the header again and parse that."""
    c = craft_from_header(read_gguf_file(fixture_models / name))
    edit(c)
    return parse_header(c.build(), None)


def _set(key, value):
    def edit(c):
        c.kvs = [(k, s, value if k == key else v) for k, s, v in c.kvs]
    return edit


def _retype(tensor, ggml_type):
    def edit(c):
        c.tensors = [(n, d, ggml_type if n == tensor else t, o) for n, d, t, o in c.tensors]
    return edit


def _drop_last_token(c):
    c.kvs = [(k, s, v[:-1] if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type") else v)
             for k, s, v in c.kvs]


UNSUPPORTED = {
    "architecture": ("micro-qwen3moe.gguf", _set("general.architecture", "llama"),
                     "unsupported architecture 'llama': the engine runs qwen3moe, qwen35moe"),
    "tensor type": ("micro-qwen3moe.gguf", _retype("token_embd.weight", int(GGMLType.IQ4_NL)),
                    "tensor 'token_embd.weight' has type IQ4_NL, which the engine does not support"),
    "vocab size": ("micro-qwen3moe.gguf", _drop_last_token,
                   r"tensor 'token_embd.weight' has dims \[128, 461\] \(GGUF ne order\) but the metadata implies "
                   r"\[128, 460\]"),
    "embedding length": ("micro-qwen35moe.gguf", _set("qwen35moe.embedding_length", 64),
                         r"tensor 'token_embd.weight' has dims \[128, 461\] .* implies \[64, 461\]"),
    "layer beyond block_count": ("micro-qwen3moe.gguf", _set("qwen3moe.block_count", 3),
                                 "tensor 'blk.3.attn_norm.weight' belongs to layer 3 but qwen3moe.block_count is 3"),
    "missing layer": ("micro-qwen3moe.gguf", _set("qwen3moe.block_count", 5),
                      "tensor 'blk.4.ffn_gate_inp.weight' is missing"),
    "expert ffn length": ("micro-qwen35moe.gguf", _set("qwen35moe.expert_feed_forward_length", 32),
                          r"tensor 'blk.0.ffn_gate_exps.weight' has dims \[128, 64, 8\] .* implies \[128, 32, 8\]"),
    "expert count": ("micro-qwen3moe.gguf", _set("qwen3moe.expert_count", 16),
                     r"tensor 'blk.0.ffn_gate_inp.weight' has dims \[128, 8\] .* implies \[128, 16\]"),
    "experts used": ("micro-qwen3moe.gguf", _set("qwen3moe.expert_used_count", 9),
                     "qwen3moe.expert_used_count is 9, more than qwen3moe.expert_count 8"),
    "shared expert length": ("micro-qwen35moe.gguf", _set("qwen35moe.expert_shared_feed_forward_length", 96),
                             r"tensor 'blk.0.ffn_gate_shexp.weight' has dims \[128, 64\] .* implies \[128, 96\]"),
    "hyper-parameter of wrong type": ("micro-qwen3moe.gguf", lambda c: c.kvs.__setitem__(
        next(i for i, kv in enumerate(c.kvs) if kv[0] == "qwen3moe.block_count"),
        ("qwen3moe.block_count", STR, "four")), "'qwen3moe.block_count' must be a positive integer, found 'four'"),
    "missing hyper-parameter": ("micro-qwen3moe.gguf",
                                lambda c: c.kvs.__setitem__(slice(None), [kv for kv in c.kvs
                                                                          if kv[0] != "qwen3moe.expert_count"]),
                                "metadata key 'qwen3moe.expert_count' is missing"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_model_message(fixture_models, case):
    name, edit, message = UNSUPPORTED[case]
    header = _fixture_variant(fixture_models, name, edit)  # a generic read still works
    with pytest.raises(UnsupportedGGUF, match=message):
        check_supported(header)


def test_unedited_variant_is_supported(fixture_models):
    check_supported(_fixture_variant(fixture_models, "micro-qwen35moe.gguf", lambda c: None))


def test_tensor_info_is_plain_data():
    t = TensorInfo(name="x", dims=(32, 3), type=GGMLType.Q8_0, offset=0, abs_offset=64, nbytes=102)
    assert t.shape == (3, 32) and t.end == 166 and t.n_elements == 96 and t.type.name == "Q8_0"


def test_craft_type_ids_agree_with_the_reader():
    assert [U8, I32, F32, BOOL, STR, ARR, U64] == [int(GGUFValueType[n]) for n in
                                                   ("UINT8", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64")]
