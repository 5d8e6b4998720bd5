"""GGUF metadata value types and ggml tensor types with their block layouts (facts from ggml / the GGUF spec)."""
from enum import IntEnum

from .errors import GGUFError


class GGUFValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format character of each fixed-size value type (BOOL is a byte that must be 0 or 1).
SCALAR_FORMATS = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "B",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}
SCALAR_SIZES = {t: {"B": 1, "b": 1, "H": 2, "h": 2, "I": 4, "i": 4, "f": 4, "Q": 8, "q": 8, "d": 8}[f]
                for t, f in SCALAR_FORMATS.items()}
# Smallest encoding of a string (u64 length, no bytes) and of an array (u32 element type, u64 count, no elements):
# used to reject a declared count before allocating anything for it.
MIN_STRING_BYTES = 8
MIN_ARRAY_BYTES = 12


class GGMLType(IntEnum):
    """ggml tensor type ids as stored in GGUF tensor infos (ggml.h `enum ggml_type`)."""
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q4_2 = 4  # removed from ggml; kept so a message can name it
    Q4_3 = 5  # removed
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    Q4_0_4_4 = 31  # removed (repacking moved into the CPU backend)
    Q4_0_4_8 = 32  # removed
    Q4_0_8_8 = 33  # removed
    TQ1_0 = 34
    TQ2_0 = 35
    IQ4_NL_4_4 = 36  # removed
    IQ4_NL_4_8 = 37  # removed
    IQ4_NL_8_8 = 38  # removed
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41


# (elements per block, bytes per block). Types absent here cannot appear in a readable file: the removed ids, and
# Q8_1, which ggml uses only for activations (its stored size differs between ggml and older tools).
BLOCK_LAYOUTS = {
    GGMLType.F32: (1, 4),
    GGMLType.F16: (1, 2),
    GGMLType.Q4_0: (32, 18),  # f16 scale + 16 bytes of packed 4-bit codes
    GGMLType.Q4_1: (32, 20),
    GGMLType.Q5_0: (32, 22),
    GGMLType.Q5_1: (32, 24),
    GGMLType.Q8_0: (32, 34),  # f16 scale + 32 int8 codes
    GGMLType.Q2_K: (256, 84),
    GGMLType.Q3_K: (256, 110),
    GGMLType.Q4_K: (256, 144),
    GGMLType.Q5_K: (256, 176),
    GGMLType.Q6_K: (256, 210),
    GGMLType.Q8_K: (256, 292),
    GGMLType.IQ2_XXS: (256, 66),
    GGMLType.IQ2_XS: (256, 74),
    GGMLType.IQ3_XXS: (256, 98),
    GGMLType.IQ1_S: (256, 50),
    GGMLType.IQ4_NL: (32, 18),
    GGMLType.IQ3_S: (256, 110),
    GGMLType.IQ2_S: (256, 82),
    GGMLType.IQ4_XS: (256, 136),
    GGMLType.I8: (1, 1),
    GGMLType.I16: (1, 2),
    GGMLType.I32: (1, 4),
    GGMLType.I64: (1, 8),
    GGMLType.F64: (1, 8),
    GGMLType.IQ1_M: (256, 56),
    GGMLType.BF16: (1, 2),
    GGMLType.TQ1_0: (256, 54),
    GGMLType.TQ2_0: (256, 66),
    GGMLType.MXFP4: (32, 17),
    GGMLType.NVFP4: (64, 36),
    GGMLType.Q1_0: (128, 18),
}

# Tensor types the engine's kernels and store can hold.
ENGINE_TENSOR_TYPES = frozenset({
    GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q6_K,
})


def ggml_type_name(type_id: int) -> str:
    """A readable name for a type id, also for ids no ggml version has used."""
    try:
        return f"{GGMLType(type_id).name} (id {int(type_id)})"
    except ValueError:
        return f"unknown ggml type id {int(type_id)}"


def tensor_nbytes(ggml_type: GGMLType, dims, name: str = "?") -> int:
    """Bytes of a tensor of `dims` (GGUF ne order) stored as `ggml_type`; rows must hold whole blocks."""
    layout = BLOCK_LAYOUTS.get(ggml_type)
    if layout is None:
        raise GGUFError(f"tensor {name!r} has type {ggml_type_name(ggml_type)}, which has no known block size")
    block_elems, block_bytes = layout
    row = dims[0] if dims else 1  # a 0-dim tensor is one element
    if row % block_elems:
        raise GGUFError(f"tensor {name!r} of type {ggml_type.name} has rows of {row} elements, "
                        f"not a multiple of the block size {block_elems}")
    n = 1
    for d in dims:
        n *= d
    return n // block_elems * block_bytes
