"""Split Q8_0 / Q4_0 block streams into code and scale planes, and merge them back, at C speed.

The split is py_engine.gguf.planes.split_planes (bytes slicing, not memoryview slicing: ~14x faster); the merge
is its inverse, written the same way.
"""
from ..gguf.planes import split_planes
from ..gguf.types import GGMLType
from .layout import SPLIT_TYPES


def split_blocks(split_type, blocks):
    """(codes, scales) of a stream of whole blocks of `split_type` (scale bytes first in each block)."""
    blk, sb, cb = SPLIT_TYPES[split_type]
    return split_planes(blocks, blk, sb, cb, GGMLType(split_type).name)


def merge_blocks(split_type, codes, scales) -> bytearray:
    """Inverse of split_blocks: interleave the planes back into ggml blocks."""
    blk, sb, cb = SPLIT_TYPES[split_type]
    codes = codes if isinstance(codes, bytes) else bytes(codes)
    scales = scales if isinstance(scales, bytes) else bytes(scales)
    nb = len(scales) // sb
    if len(codes) != nb * cb or len(scales) != nb * sb:
        raise ValueError(f"{len(codes)} code bytes and {len(scales)} scale bytes are not the same blocks")
    out = bytearray(nb * blk)
    for j in range(sb):
        out[j::blk] = scales[j::sb]
    for j in range(cb):
        out[sb + j::blk] = codes[j::cb]
    return out
