"""py_engine.gguf's refusals: one hand-made corrupt file per validation rule (with the message the user gets), and
the semantic checks (check_supported) on otherwise valid files edited from the fixtures."""
import struct

import pytest

from gguf_craft import ARR, BOOL, F32, I32, STR, U8, U32, U64, Craft, arr, craft_from_header, small_model_craft
from py_engine.gguf import (GGMLType, GGUFError, GGUFValueType, TensorInfo, UnsupportedGGUF, check_supported,
                            parse_header, read_gguf_file)


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
