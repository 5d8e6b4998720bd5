"""Read tensors and metadata from a GGUF file (via the `gguf` package's GGUFReader) and dequantise them.

Only the tensor types of the target models are handled: F32, F16, Q8_0, and for gemma4 Q4_0 and Q6_K (dequant.py).
Q8_0 is decoded here rather than with `gguf.quants` so the layout is written down once (a test checks both agree):
each block is 34 bytes, a float16 scale `d` followed by 32 int8 codes `q`, and the value is `d * q` (ggml
`dequantize_row_q8_0`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .dequant import dequantize_q4_0, dequantize_q6_k

QK8_0 = 32  # values per Q8_0 block
Q8_0_BLOCK_BYTES = 2 + QK8_0


def q8_0_planes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split raw Q8_0 bytes (..., n_blocks * 34) into codes int8 (..., n_blocks, 32) and scales f32 (..., n_blocks)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.shape[-1] % Q8_0_BLOCK_BYTES:
        raise ValueError(f"Q8_0 row of {raw.shape[-1]} bytes is not a multiple of {Q8_0_BLOCK_BYTES}")
    n_blocks = raw.shape[-1] // Q8_0_BLOCK_BYTES
    blocks = raw.reshape(*raw.shape[:-1], n_blocks, Q8_0_BLOCK_BYTES)
    scales = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = blocks[..., 2:].copy().view(np.int8)
    return codes, scales


def dequantize_q8_0(raw: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Raw Q8_0 bytes (..., n_blocks * 34) -> values (..., n_blocks * 32) as `dtype` (exact in f32 and f64)."""
    codes, scales = q8_0_planes(raw)
    values = codes.astype(dtype) * scales.astype(dtype)[..., None]
    return values.reshape(*codes.shape[:-2], codes.shape[-2] * QK8_0)


class GGUFWeights:
    """One GGUF file: metadata by key, tensors by their GGUF name, numpy axis order (GGUF `ne` reversed)."""

    def __init__(self, path):
        import gguf  # imported here so `diskformer` commands that never load a model don't need it

        self._gguf = gguf
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no GGUF file at {self.path}")
        self.reader = gguf.GGUFReader(str(self.path))
        self._tensors = {t.name: t for t in self.reader.tensors}
        self.arch = self.get("general.architecture")

    # metadata -------------------------------------------------------------------------------------------------
    def has_key(self, key: str) -> bool:
        return key in self.reader.fields

    def get(self, key: str, default=...):
        field = self.reader.fields.get(key)
        if field is None:
            if default is ...:
                raise KeyError(f"{self.path.name}: GGUF key {key!r} is missing")
            return default
        return field.contents()

    def arch_key(self, name: str, default=...):
        """`{arch}.{name}`, e.g. arch_key("block_count") -> qwen35moe.block_count."""
        return self.get(f"{self.arch}.{name}", default)

    # tensors --------------------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._tensors

    def type_name(self, name: str) -> str:
        return self._tensor(name).tensor_type.name

    def _tensor(self, name: str):
        t = self._tensors.get(name)
        if t is None:
            raise KeyError(f"{self.path.name}: tensor {name!r} is missing")
        return t

    def raw(self, name: str) -> np.ndarray:
        """The stored data in numpy order: float arrays for F32/F16, bytes (..., row_bytes) for Q8_0."""
        return np.asarray(self._tensor(name).data)

    def tensor(self, name: str, dtype=np.float64) -> np.ndarray:
        """Dequantised values in numpy order (a GGUF `ne` of (in, out) gives an (out, in) matrix)."""
        t = self._tensor(name)
        kind = t.tensor_type.name
        if kind == "Q8_0":
            return dequantize_q8_0(t.data, dtype)
        if kind == "Q4_0":
            return dequantize_q4_0(t.data, dtype)
        if kind == "Q6_K":
            return dequantize_q6_k(t.data, dtype)
        if kind in ("F32", "F16"):
            return np.asarray(t.data).astype(dtype)
        raise NotImplementedError(f"{self.path.name}: tensor {name!r} has type {kind}; "
                                  "only F32, F16, Q8_0, Q4_0 and Q6_K are read")

    def q8_0(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Codes and scales of a Q8_0 tensor (for the activation-quantisation emulation)."""
        t = self._tensor(name)
        if t.tensor_type.name != "Q8_0":
            raise ValueError(f"{self.path.name}: tensor {name!r} is {t.tensor_type.name}, not Q8_0")
        return q8_0_planes(t.data)
