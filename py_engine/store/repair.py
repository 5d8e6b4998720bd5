"""Repairing a completed store from its source: rewrite only the parts `verify` found damaged.

The source must be the file the store was made from: same size and same header (sha256). The layout is planned
again from that header, so a manifest whose offsets were edited gets the planned layout back. Each damaged part
(header.bin, a dense plane, an expert record's sub-planes) is read from the source, split as the ingest splits it,
written, and its checksum recomputed from those bytes; then the whole store is verified again.
"""
import hashlib
import json
import zlib

from .blocks import split_blocks
from .catalogue import verify
from .check import StoreDamaged
from .errors import StoreError
from .ingest import read_source_header
from .layout import HEADER_FILE, RECORD_PLANES, StoreLayout, _segments, record_key
from .manifest import load_manifest, save_manifest


async def repair(source, sink, report=None, log=None):
    """Rewrite the damaged parts of `sink`'s store from `source`; returns the new VerifyReport (ok when repaired).
    `report` is a VerifyReport from verify() (computed when not given)."""
    say = log or (lambda msg: None)
    report = report or await verify(sink)
    if report.ok:
        return report
    manifest = await load_manifest(sink)
    header = await read_source_header(source)
    head = await source.read(0, header.data_offset)
    sound = isinstance(manifest, dict) and isinstance(manifest.get("source"), dict)
    if (not sound or manifest["source"].get("header_sha256") != hashlib.sha256(head).hexdigest()
            or manifest["source"].get("size") != source.size or not report.complete):
        raise StoreError("this store cannot be repaired from that file (it was made from another file, or its "
                         "manifest is unreadable or unfinished); remove the store and ingest the model again")
    layout = StoreLayout(header)
    planned = json.loads(json.dumps(layout.to_json()))
    if manifest["layout"] != planned:
        say("the manifest's layout was edited: restoring the one the header implies")
        manifest["layout"] = planned
        report = None  # every part is suspect: rewrite all of it
    ck = manifest["checksums"]
    if report is None or not report.header_ok:
        await sink.write(HEADER_FILE, 0, head)
        ck["header"] = zlib.crc32(head)
    want = _damaged_keys(layout, report)
    n = 0
    for src, nbytes, _blk, split, dst in _segments(layout):
        if src == 0 and dst[0][0] == HEADER_FILE:
            continue
        if want is not None and not any(key in want for _, _, key in dst):
            continue
        data = await source.read(src, nbytes)
        if len(data) != nbytes:
            raise StoreError(f"the source returned {len(data)} of {nbytes} bytes at offset {src}")
        parts = split_blocks(split, data) if split is not None else (data,)
        for (file, off, key), part in zip(dst, parts):
            await sink.write(file, off, part)
            _set_checksum(ck, key, zlib.crc32(part))
        n += 1
    await sink.flush()
    manifest["state"].pop("damaged", None)
    await save_manifest(sink, manifest)
    say(f"rewrote {n} damaged part(s) from the source")
    again = await verify(sink)
    if not again.ok:
        raise StoreDamaged(f"the store is still damaged after the repair ({_summary(again)}); remove it and ingest "
                           "the model again")
    return again


def _damaged_keys(layout, report):
    """Checksum keys of the damaged parts; None means every part."""
    if report is None or report.problem:
        return None
    keys = set(report.bad_planes)
    for layer, expert, planes in report.bad_records:
        keys.update(record_key(layout.experts, layer, expert, p) for p in planes if p in RECORD_PLANES)
    return keys


def _set_checksum(ck, key, value):
    if isinstance(key, int):
        ck["records"][key] = value
    else:
        ck["dense"][key] = value


def _summary(rep) -> str:
    bits = []
    if rep.problem:
        bits.append(rep.problem)
    if rep.complete and not rep.header_ok:
        bits.append("header.bin")
    bits += [f"dense plane {k}" for k in rep.bad_planes[:3]]
    bits += [f"record layer {l} expert {e}" for l, e, _ in rep.bad_records[:3]]
    more = len(rep.bad_planes) + len(rep.bad_records) - min(len(rep.bad_planes), 3) - min(len(rep.bad_records), 3)
    return ", ".join(bits) + (f" and {more} more" if more > 0 else "")


def summary(rep) -> str:
    """One line naming what verify() found damaged."""
    return _summary(rep)
