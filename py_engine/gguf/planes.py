"""Split Q8_0 / Q4_0 block streams bit-exactly into a code plane and an f16 scale plane (no numpy).

A Q8_0 block is 34 bytes: a little-endian f16 scale then 32 int8 codes. A Q4_0 block is 18 bytes: an f16 scale
then 16 bytes of packed 4-bit codes. The planes are the blocks' codes concatenated and their scales concatenated,
so block b's codes are codes[b*32:(b+1)*32] (Q8_0) or codes[b*16:(b+1)*16] (Q4_0) and its scale scales[2b:2b+2].
"""
from .errors import GGUFError

Q8_0_BLOCK, Q8_0_CODES = 34, 32
Q4_0_BLOCK, Q4_0_CODES = 18, 16


def split_planes(blocks, block_bytes: int, scale_bytes: int, code_bytes: int, kind: str) -> tuple:
    """(codes, scales) bytearrays of a stream of whole blocks, each `scale_bytes` of scale then `code_bytes` of codes.

    It slices a `bytes` object rather than a memoryview: a strided slice of bytes is one C loop, while a strided
    memoryview slice assigned into a bytearray goes element by element, ~14x slower (70 vs 960 MB/s). At tens of
    GB per model that is minutes. py_engine.store.blocks uses this too.
    """
    data = blocks if isinstance(blocks, bytes) else bytes(memoryview(blocks))
    if len(data) % block_bytes:
        raise GGUFError(f"{kind} data of {len(data)} bytes is not a whole number of {block_bytes}-byte blocks")
    n = len(data) // block_bytes
    scales = bytearray(scale_bytes * n)
    codes = bytearray(code_bytes * n)
    # One strided copy per byte position of the block: C-speed loops, no per-block Python work.
    for j in range(scale_bytes):
        scales[j::scale_bytes] = data[j::block_bytes]
    for j in range(code_bytes):
        codes[j::code_bytes] = data[scale_bytes + j::block_bytes]
    return codes, scales


def split_q8_0(blocks) -> tuple:
    """(codes: 32 int8 per block, scales: 2-byte f16 per block) of a Q8_0 byte stream."""
    codes, scales = split_planes(blocks, Q8_0_BLOCK, 2, Q8_0_CODES, "Q8_0")
    return bytes(codes), bytes(scales)


def split_q4_0(blocks) -> tuple:
    """(codes: 16 packed-nibble bytes per block, scales: 2-byte f16 per block) of a Q4_0 byte stream."""
    codes, scales = split_planes(blocks, Q4_0_BLOCK, 2, Q4_0_CODES, "Q4_0")
    return bytes(codes), bytes(scales)
