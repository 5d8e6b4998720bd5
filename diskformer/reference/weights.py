"""Read tensors and metadata from a GGUF file (through py_engine.gguf's checked parser) and dequantise them.

Only the tensor types of the target models are handled: F32, F16, Q8_0, and for gemma4 Q4_0 and Q6_K (dequant.py).
Q8_0 is decoded here rather than with `gguf.quants` so the layout is written down once (a test checks both agree):
each block is 34 bytes, a float16 scale `d` followed by 32 int8 codes `q`, and the value is `d * q` (ggml
`dequantize_row_q8_0`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .dequant import (Q4_0_BLOCK_BYTES, Q6_K_BLOCK_BYTES, QK4_0, QK_K, dequantize_q4_0,
                      dequantize_q6_k)

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


# architectures the reference runs before the engine does: the engine's model checks do not know them yet (none
# now: gemma4 joined the engine's registry)
REFERENCE_ONLY = ()


def _check_tensor_types(header, types) -> None:
    from py_engine.gguf import UnsupportedGGUF

    for t in header.tensors:
        if t.type not in types:
            raise UnsupportedGGUF(f"tensor {t.name!r} has type {t.type.name}, which the reference does not read")


_NUMPY_TYPES = {"F32": np.float32, "F16": np.float16}
READ_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "Q6_K")
# quantised types: (values, bytes) per block, and how a row of blocks becomes values
_BLOCKS = {"Q8_0": (QK8_0, Q8_0_BLOCK_BYTES), "Q4_0": (QK4_0, Q4_0_BLOCK_BYTES), "Q6_K": (QK_K, Q6_K_BLOCK_BYTES)}
_DEQUANTIZE = {"Q8_0": dequantize_q8_0, "Q4_0": dequantize_q4_0, "Q6_K": dequantize_q6_k}


class GGUFWeights:
    """One GGUF file: metadata by key, tensors by their GGUF name, numpy axis order (GGUF `ne` reversed).

    Read through the engine's own parser (py_engine.gguf), which checks every count, length, offset, alignment and
    overlap against the file before anything is mapped, then the model checks (architecture, hyper-parameters,
    tensor dimensions); tensor data is a read-only memory map of the checked byte ranges.
    """

    def __init__(self, path):
        from py_engine.gguf import GGUFError, GGMLType, check_supported, read_gguf_file

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no GGUF file at {self.path}")
        try:
            self.header = read_gguf_file(self.path)
            types = frozenset(GGMLType[t] for t in READ_TYPES)
            if self.header.architecture in REFERENCE_ONLY:
                _check_tensor_types(self.header, types)  # its config checks the hyper-parameters
            else:
                check_supported(self.header, types)
        except GGUFError as exc:
            raise ValueError(f"{self.path.name}: {exc}") from None
        self._tensors = self.header.tensors_by_name
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if self.header.file_size else np.zeros(0, np.uint8)
        self.arch = self.header.architecture

    # metadata -------------------------------------------------------------------------------------------------
    def has_key(self, key: str) -> bool:
        return key in self.header.metadata

    def get(self, key: str, default=...):
        if key not in self.header.metadata:
            if default is ...:
                raise KeyError(f"{self.path.name}: GGUF key {key!r} is missing")
            return default
        return self.header.metadata[key]

    def arch_key(self, name: str, default=...):
        """`{arch}.{name}`, e.g. arch_key("block_count") -> qwen35moe.block_count."""
        return self.get(f"{self.arch}.{name}", default)

    # tensors --------------------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._tensors

    def type_name(self, name: str) -> str:
        return self._tensor(name).type.name

    def _tensor(self, name: str):
        t = self._tensors.get(name)
        if t is None:
            raise KeyError(f"{self.path.name}: tensor {name!r} is missing")
        return t

    def raw(self, name: str) -> np.ndarray:
        """The stored data in numpy order: float arrays for F32/F16, bytes (..., row_bytes) for Q8_0."""
        t = self._tensor(name)
        data = self._map[t.abs_offset:t.end]
        kind = t.type.name
        if kind in _NUMPY_TYPES:
            return data.view(_NUMPY_TYPES[kind]).reshape(t.shape)
        if kind in _BLOCKS:
            values, nbytes = _BLOCKS[kind]
            return data.reshape(*t.shape[:-1], t.dims[0] // values * nbytes)
        raise NotImplementedError(f"{self.path.name}: tensor {name!r} has type {kind}; "
                                  f"only {', '.join(READ_TYPES)} are read")

    def tensor(self, name: str, dtype=np.float64) -> np.ndarray:
        """Dequantised values in numpy order (a GGUF `ne` of (in, out) gives an (out, in) matrix)."""
        raw = self.raw(name)
        kind = self.type_name(name)
        if kind in _DEQUANTIZE:
            return _DEQUANTIZE[kind](raw, dtype)
        return np.asarray(raw).astype(dtype)

    def q8_0(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Codes and scales of a Q8_0 tensor (for the activation-quantisation emulation)."""
        kind = self.type_name(name)
        if kind != "Q8_0":
            raise ValueError(f"{self.path.name}: tensor {name!r} is {kind}, not Q8_0")
        return q8_0_planes(self.raw(name))
