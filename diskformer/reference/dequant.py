"""Q4_0 and Q6_K blocks to values, exactly as ggml's dequantize_row_q4_0 / dequantize_row_q6_K compute them (f32).

Q4_0 (18 bytes per 32 values): a float16 scale d, then 16 bytes of 4-bit codes; byte j holds value j in its low
nibble and value j + 16 in its high nibble; value = d * (code - 8).

Q6_K (210 bytes per 256 values): ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8, one per 16 values),
d (float16). Per half of 128 values (ql advancing 64 bytes, qh 32, scales 8), for l in 0..31 and is = l // 16:
    v[l]      = d * sc[is]     * ((ql[l]      & 15 | (qh[l] >> 0 & 3) << 4) - 32)
    v[l + 32] = d * sc[is + 2] * ((ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4) - 32)
    v[l + 64] = d * sc[is + 4] * ((ql[l]      >> 4 | (qh[l] >> 4 & 3) << 4) - 32)
    v[l + 96] = d * sc[is + 6] * ((ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4) - 32)
evaluated left to right in float32 (d * sc first), as ggml does, so the values match llama.cpp bit for bit.
"""
from __future__ import annotations

import numpy as np

QK4_0 = 32
Q4_0_BLOCK_BYTES = 2 + QK4_0 // 2
QK_K = 256
Q6_K_BLOCK_BYTES = QK_K // 2 + QK_K // 4 + QK_K // 16 + 2


def _blocks(raw: np.ndarray, block_bytes: int, kind: str) -> np.ndarray:
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.shape[-1] % block_bytes:
        raise ValueError(f"{kind} row of {raw.shape[-1]} bytes is not a multiple of {block_bytes}")
    return raw.reshape(*raw.shape[:-1], raw.shape[-1] // block_bytes, block_bytes)


def q4_0_planes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw Q4_0 bytes (..., n_blocks * 18) -> codes int8 in -8..7 (..., n_blocks, 32) and scales f32 (..., n_blocks)."""
    blocks = _blocks(raw, Q4_0_BLOCK_BYTES, "Q4_0")
    scales = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    packed = blocks[..., 2:]
    codes = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.int8) - np.int8(8)
    return codes, scales


def dequantize_q4_0(raw: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Raw Q4_0 bytes (..., n_blocks * 18) -> values (..., n_blocks * 32) (exact in f32 and f64)."""
    codes, scales = q4_0_planes(raw)
    values = codes.astype(np.float32) * scales[..., None]
    return values.reshape(*codes.shape[:-2], codes.shape[-2] * QK4_0).astype(dtype)


def dequantize_q6_k(raw: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Raw Q6_K bytes (..., n_blocks * 210) -> values (..., n_blocks * 256), rounded as ggml rounds them in f32."""
    blocks = _blocks(raw, Q6_K_BLOCK_BYTES, "Q6_K")
    ql = blocks[..., :128].astype(np.int32)
    qh = blocks[..., 128:192].astype(np.int32)
    sc = blocks[..., 192:208].view(np.int8).astype(np.float32)
    d = blocks[..., 208:210].copy().view(np.float16)[..., 0].astype(np.float32)
    out = np.empty(blocks.shape[:-1] + (QK_K,), dtype=np.float32)
    for half in range(2):
        lo = ql[..., 64 * half:64 * half + 64]
        hi = qh[..., 32 * half:32 * half + 32]
        s = sc[..., 8 * half:8 * half + 8]
        quarters = (
            (lo[..., :32] & 15) | (hi & 3) << 4,
            (lo[..., 32:] & 15) | (hi >> 2 & 3) << 4,
            (lo[..., :32] >> 4) | (hi >> 4 & 3) << 4,
            (lo[..., 32:] >> 4) | (hi >> 6 & 3) << 4,
        )
        for quarter, q in enumerate(quarters):
            # sc index is + 2 * quarter, for l < 16 and is + 1 for l >= 16
            scale = np.repeat(s[..., 2 * quarter:2 * quarter + 2], 16, axis=-1)
            ds = d[..., None] * scale  # float32, as ggml's d * sc[is]
            out[..., 128 * half + 32 * quarter:128 * half + 32 * quarter + 32] = ds * (q - 32).astype(np.float32)
    return out.reshape(*blocks.shape[:-2], blocks.shape[-2] * QK_K).astype(dtype)
