"""Synthetic GGUF headers with the real models' dimensions (no tensor data) and an ingest into memory, for the store
tests (tests/unit/test_store*.py)."""
import asyncio
import struct

from py_engine.gguf.types import GGMLType
from py_engine.store.ingest import ingest
from py_engine.store.layout import block_bytes
from py_engine.store.local import FileSource, MemoryStorage


def run(coro):
    return asyncio.run(coro)


def gguf_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def synthetic_header(arch: str, tensors) -> bytes:
    """GGUF v3 header bytes: general.architecture and the tensor infos [(name, dims, type)], data 32-aligned."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), 1),
           gguf_string("general.architecture"), struct.pack("<I", 8), gguf_string(arch)]
    off = 0
    for name, dims, ttype in tensors:
        out += [gguf_string(name), struct.pack("<I", len(dims)), struct.pack(f"<{len(dims)}Q", *dims),
                struct.pack("<IQ", int(ttype), off)]
        blk_elems = 32 if ttype in (GGMLType.Q8_0, GGMLType.Q4_0) else 1
        n = 1
        for d in dims:
            n *= d
        off += -(-(n // blk_elems * block_bytes(ttype)) // 32) * 32
    return b"".join(out)


def ingest_into_memory(path, **kw):
    """Ingest the GGUF file at `path` into a MemoryStorage folder "m"; returns (storage, manifest)."""
    storage = MemoryStorage()
    src = FileSource(path)
    try:
        manifest = run(ingest(src, storage.sink("m"), **kw))
    finally:
        src.close()
    return storage, manifest
