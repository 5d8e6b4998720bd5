"""Resuming an ingest: rebuild the source prefix a checkpoint covers from the store itself.

The pinned sha256 is of the whole source file, and hashlib cannot save a running hash, so a resumed ingest must
feed the hash every source byte before the checkpoint again. Re-downloading that prefix could mean tens of GB; the
store already holds it, transformed reversibly (a split plane merges back into the blocks bit-exactly, padding is
zeros or recorded in `state.gaps`). So the prefix is rebuilt from OPFS (local, GB/s) and hashed. On the way, every
checksum of the rebuilt prefix is recomputed and must equal the checkpoint's: a prefix damaged after it was written
is caught here and the ingest starts over instead of producing a store that fails verification later.
"""
import zlib

from .blocks import merge_blocks
from .layout import SPLIT_TYPES


def part_sizes(op):
    """Byte counts of an op's destinations: (n,) for a copy, (codes, scales) for a split."""
    if op.split is None:
        return (op.n,)
    blk, sb, cb = SPLIT_TYPES[op.split]
    nb = op.n // blk
    return nb * cb, nb * sb


def crc_get(checksums: dict, key):
    if isinstance(key, int):
        return checksums["records"][key]
    if key == "header":
        return checksums["header"]
    return checksums["dense"][key]


def crc_set(checksums: dict, key, value: int):
    if isinstance(key, int):
        checksums["records"][key] = value
    elif key == "header":
        checksums["header"] = value
    else:
        checksums["dense"][key] = value


async def rebuild_unit(unit, sink, gaps: dict, fresh: dict) -> "bytearray | None":
    """The source bytes of one unit rebuilt from the store (None if the store is short); updates `fresh`
    with the checksums of what was read."""
    buf = bytearray(unit.end - unit.start)
    for op in unit.ops:
        parts = []
        for (file, off, key), n in zip(op.dst, part_sizes(op)):
            part = await sink.read(file, off, n)
            if len(part) != n:
                return None
            fresh[key] = zlib.crc32(part, fresh.get(key, 0))
            parts.append(part)
        at = op.src - unit.start
        buf[at:at + op.n] = merge_blocks(op.split, *parts) if op.split is not None else parts[0]
    for off, hexbytes in gaps.items():
        off = int(off)
        if unit.start <= off < unit.end:
            raw = bytes.fromhex(hexbytes)
            buf[off - unit.start:off - unit.start + len(raw)] = raw
    return buf


async def rehash_prefix(units, sink, manifest: dict, sha, on_unit=None) -> "str | None":
    """Feed `sha` the source bytes of `units` rebuilt from the store. None when all is well, else why the
    prefix cannot be trusted (then the caller starts over)."""
    fresh = {}
    gaps = manifest["state"]["gaps"]
    for unit in units:
        try:
            buf = await rebuild_unit(unit, sink, gaps, fresh)
        except FileNotFoundError as e:
            return f"a stored file is missing ({e})"
        if buf is None:
            return f"the store is shorter than its checkpoint at source bytes {unit.start}..{unit.end}"
        sha.update(buf)
        if on_unit:
            on_unit(unit)
    ck = manifest["checksums"]
    for key, value in fresh.items():
        if crc_get(ck, key) != value:
            return f"stored data for {key!r} no longer matches its checksum"
    return None
