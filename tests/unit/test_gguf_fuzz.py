"""Fuzz the GGUF header parser: mutated headers (flipped bytes, hostile length/count/type fields, truncation,
splices) of a fixture model and of a hand-made file must give a valid header or a GGUFError, never another
exception, a hang or a large allocation; and a prefix must parse exactly like the whole buffer or ask for more."""
import signal
import struct
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
from gguf import GGUFReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguf_craft import small_model_craft
from py_engine.gguf import GGUFError, GGUFHeader, NeedMoreBytes, parse_header, read_gguf_file, read_header_sync

HANG_SECONDS = 5  # per example: the parser of a header this small finishes in milliseconds
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HOSTILE = [0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 31, 32, 33, 64, 255, 256, 2**31, 2**32 - 1, 2**32, 2**40, 2**62,
           2**63 - 1, 2**63, 2**64 - 1]


@contextmanager
def hang_guard(seconds=HANG_SECONDS):
    def timeout(signum, frame):
        raise TimeoutError(f"parser still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, timeout)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def structural_fields(path):
    """(offset, size) of every u32/u64 in the header as gguf-py lays it out: counts, string and array lengths,
    value and element types, dims, tensor types and offsets; the fields a hostile file would lie in."""
    ref = GGUFReader(path)
    out = []
    for f in list(ref.fields.values()) + [t.field for t in ref.tensors]:
        pos = f.offset
        for part in f.parts:
            if part.dtype in (np.uint32, np.uint64) and part.size == 1:
                out.append((pos, part.itemsize))
            pos += part.nbytes
    return sorted(set(out))


class Seed:
    def __init__(self, data: bytes, file_size: int, fields):
        self.data, self.file_size, self.fields = data, file_size, fields


@pytest.fixture(scope="module")
def micro_seed(fixture_models):
    path = fixture_models / "micro-qwen3moe.gguf"
    header = read_gguf_file(path)
    prefix = path.read_bytes()[:header.data_offset]
    return Seed(prefix, header.file_size, structural_fields(path))


@pytest.fixture(scope="module")
def craft_seed(tmp_path_factory):
    data = small_model_craft().build()
    path = tmp_path_factory.mktemp("seed") / "craft.gguf"
    path.write_bytes(data)
    return Seed(data, len(data), structural_fields(path))


op = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 2**20), st.integers(1, 255)),
    st.tuples(st.just("field"), st.integers(0, 2**20), st.sampled_from(HOSTILE) | st.integers(0, 2**64 - 1)),
    st.tuples(st.just("field"), st.integers(0, 2**20), st.sampled_from(["remaining", "file_size"])),
    st.tuples(st.just("truncate"), st.integers(0, 2**20)),
    st.tuples(st.just("splice"), st.integers(0, 2**20), st.integers(0, 2**20), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.integers(0, 2**20), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 2**20), st.integers(1, 64)),
)


def mutate(seed: Seed, ops):
    """Apply ops to the seed's bytes; returns (bytes, file size). Positions are taken modulo the current length
    so every op lands somewhere."""
    data, file_size = bytearray(seed.data), seed.file_size
    for kind, *args in ops:
        if not data:
            break
        n = len(data)
        if kind == "flip":
            data[args[0] % n] ^= args[1]
        elif kind == "field":
            pos, size = seed.fields[args[0] % len(seed.fields)]
            if pos + size > n:
                continue
            value = args[1]
            if value == "remaining":
                value = file_size - pos
            elif value == "file_size":
                value = file_size
            data[pos:pos + size] = (value % 2 ** (8 * size)).to_bytes(size, "little")
        elif kind == "truncate":
            # Cut the file itself: what follows the cut no longer exists.
            cut = args[0] % n
            del data[cut:]
            file_size = cut
        elif kind == "splice":
            src, dst, length = args[0] % n, args[1] % n, args[2]
            chunk = bytes(data[src:src + length])
            data[dst:dst + len(chunk)] = chunk
            del data[n:]
        elif kind == "insert":
            data[args[0] % n:args[0] % n] = args[1]
            file_size += len(args[1])
        elif kind == "delete":
            pos = args[0] % n
            removed = len(data[pos:pos + args[1]])
            del data[pos:pos + args[1]]
            file_size -= removed
    return bytes(data), max(file_size, len(data))


def zero_tail_source(data: bytes):
    """Serves data, then zeros up to the file size: a fixture's header prefix stands for its whole file."""
    def read(start, end):
        part = data[start:end]
        return part + bytes(end - start - len(part))
    return read


def check_valid(h: GGUFHeader, file_size: int):
    assert isinstance(h, GGUFHeader) and h.data_offset % h.alignment == 0
    ends = sorted((t.abs_offset, t.end) for t in h.tensors if t.nbytes)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(ends, ends[1:]))
    assert all(t.end <= file_size and t.offset % h.alignment == 0 for t in h.tensors)


def outcome(parse):
    """The parse's result: a header, or the error's class and message. Any other exception escapes."""
    try:
        with hang_guard():
            return parse()
    except GGUFError as e:
        assert str(e)
        return (type(e), str(e))


@settings(FUZZ, max_examples=900)
@given(ops=st.lists(op, min_size=1, max_size=3))
def test_fuzz_fixture_header_through_range_source(micro_seed, ops):
    data, file_size = mutate(micro_seed, ops)
    result = outcome(lambda: read_header_sync(zero_tail_source(data), file_size, initial_size=1 << 14))
    if isinstance(result, GGUFHeader):
        check_valid(result, file_size)


@settings(FUZZ, max_examples=1500)
@given(ops=st.lists(op, min_size=1, max_size=4), cut=st.integers(0, 2**20))
def test_fuzz_crafted_file_and_its_prefixes(craft_seed, ops, cut):
    data, file_size = mutate(craft_seed, ops)
    data = data[:file_size]
    whole = outcome(lambda: parse_header(data, len(data)))  # NeedMoreBytes here would escape and fail
    if isinstance(whole, GGUFHeader):
        check_valid(whole, len(data))
    # Any prefix parses exactly like the whole buffer, or asks for more bytes within the file.
    k = cut % (len(data) + 1)
    try:
        part = outcome(lambda: parse_header(data[:k], len(data)))
    except NeedMoreBytes as more:
        assert k < more.needed <= len(data)
    else:
        assert part == whole


def test_every_truncation_of_the_crafted_file(craft_seed):
    data = craft_seed.data
    full = parse_header(data, len(data))
    for k in range(len(data)):
        try:
            assert parse_header(data[:k], len(data)) == full
        except NeedMoreBytes as more:
            assert k < more.needed <= len(data)
        with pytest.raises(GGUFError):  # the file really ends at k: before its header or its last tensor ends
            parse_header(data[:k], k)


def test_hostile_lengths_allocate_little(micro_seed):
    """Write huge values into a spread of length/count fields; parsing a 15 KB header must stay small."""
    fields = micro_seed.fields[::max(1, len(micro_seed.fields) // 40)]
    tracemalloc.start()
    try:
        for pos, size in fields:
            for value in (2**64 - 1, 2**62, micro_seed.file_size - pos, 2**31):
                data = bytearray(micro_seed.data)
                data[pos:pos + size] = (value % 2 ** (8 * size)).to_bytes(size, "little")
                tracemalloc.reset_peak()
                try:
                    with hang_guard():
                        parse_header(bytes(data), micro_seed.file_size)
                except (GGUFError, NeedMoreBytes):
                    pass
                _, peak = tracemalloc.get_traced_memory()
                assert peak < 2 << 20, (pos, size, value, peak)
    finally:
        tracemalloc.stop()


def test_structural_fields_cover_the_header(micro_seed):
    # 4 preamble fields, and per key at least its length and type; tensor infos add name length, n_dims, dims...
    assert len(micro_seed.fields) > 500
    assert (8, 8) in micro_seed.fields and (16, 8) in micro_seed.fields  # tensor and kv counts
    assert struct.unpack_from("<Q", micro_seed.data, 8)[0] == 51
