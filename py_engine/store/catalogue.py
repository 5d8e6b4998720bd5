"""What is stored and whether it is intact: list, remove, is_complete and verify (every checksum recomputed)."""
import zlib

from .layout import DENSE_FILE, EXPERTS_FILE, RECORD_PLANES
from .manifest import load_manifest

READ_CHUNK = 8 << 20


def is_complete(manifest) -> bool:
    """The ingest ran to the end and the source hash is recorded (and equals the pinned one, if any)."""
    if not manifest or not manifest["state"]["complete"] or manifest["state"]["failed"]:
        return False
    want = manifest["source"].get("sha256_expected")
    return bool(manifest["sha256"]) and (not want or want == manifest["sha256"])


async def list_models(storage) -> list:
    """[{name, bytes, complete, architecture, source}] of every model folder."""
    out = []
    for name in await storage.models():
        sink = storage.sink(name)
        files = await sink.files()
        m = await load_manifest(sink)
        try:
            complete, arch, source = is_complete(m), m["config"]["architecture"], m["source"]
        except (KeyError, TypeError, AttributeError):  # no manifest, or one edited out of shape
            complete, arch, source = False, None, None
        out.append({"name": name, "bytes": sum(files.values()), "complete": complete,
                    "architecture": arch, "source": source})
    return out


async def remove(storage, model: str):
    await storage.remove(model)


class VerifyReport:
    def __init__(self):
        self.complete = False
        self.header_ok = False
        self.bad_planes = []      # dense plane keys ("tensor:codes")
        self.bad_records = []     # (layer, expert, [sub-planes])
        self.problem = None       # why nothing could be checked

    @property
    def ok(self) -> bool:
        return (self.problem is None and self.complete and self.header_ok
                and not self.bad_planes and not self.bad_records)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "complete": self.complete, "header_ok": self.header_ok,
                "bad_planes": self.bad_planes, "bad_records": [list(r) for r in self.bad_records],
                "problem": self.problem}


async def crc_ranges(sink, file: str, ranges, progress=None) -> dict:
    """{key: crc32} of byte ranges [(offset, n, key)] of a file, read front to back in READ_CHUNK pieces.

    One large read serves many planes or records: a read costs ~0.5 ms per call in OPFS (File.slice or a sync
    handle), so reading record by record would take longer than the bytes themselves. A range past the end of the
    file gets None.
    """
    ranges = sorted(r for r in ranges if r[1] > 0)
    crcs = {key: 0 for _, n, key in ranges}
    if not ranges:
        return crcs
    end = max(o + n for o, n, _ in ranges)
    i, pos = 0, ranges[0][0]
    active = []  # ranges overlapping the current chunk
    while pos < end and (active or i < len(ranges)):
        if not active and ranges[i][0] > pos:
            pos = ranges[i][0]  # skip a hole no range covers
        chunk = await sink.read(file, pos, min(READ_CHUNK, end - pos))
        stop = pos + len(chunk)
        while i < len(ranges) and ranges[i][0] < stop:
            active.append(ranges[i])
            i += 1
        keep = []
        for o, n, key in active:
            a, b = max(o, pos), min(o + n, stop)
            if crcs[key] is not None:
                crcs[key] = zlib.crc32(memoryview(chunk)[a - pos:b - pos], crcs[key])
            if o + n > stop:
                if not chunk:
                    crcs[key] = None
                else:
                    keep.append((o, n, key))
        active = keep
        if not chunk:
            for o, n, key in ranges[i:]:
                crcs[key] = None
            break
        pos = stop
        if progress:
            progress(pos, end)
    return crcs


async def verify(sink, progress=None) -> VerifyReport:
    """Recompute every checksum of a completed folder: header sha256, each dense plane, each record sub-plane.
    progress(file, done, total) is called per chunk read."""
    from .check import LayoutMismatch, StoreDamaged, check_header, check_manifest

    rep = VerifyReport()
    m = await load_manifest(sink)
    if m is None:
        rep.problem = "no manifest.json: nothing stored here"
        return rep
    try:
        check_manifest(m)
    except StoreDamaged as e:
        rep.problem = str(e)
        return rep
    rep.complete = is_complete(m)
    if not rep.complete:
        rep.problem = "the ingest has not completed"
        return rep
    lay, ck = m["layout"], m["checksums"]
    try:
        try:
            await check_header(sink, m)
            rep.header_ok = True
        except LayoutMismatch as e:  # the header is sound, the manifest's offsets are not: nothing below is trusted
            rep.header_ok = True
            rep.problem = e.what
            return rep
        except StoreDamaged:
            pass
        planes = [(p["offset"], p["nbytes"], f"{p['tensor']}:{p['kind']}") for p in lay["dense"]["planes"]]
        got = await crc_ranges(sink, DENSE_FILE, planes,
                               progress and (lambda d, t: progress(DENSE_FILE, d, t)))
        rep.bad_planes = [key for _, n, key in planes if got.get(key, 0) != ck["dense"][key]]
        ex = lay["experts"]
        if ex:
            k, ranges = len(RECORD_PLANES), []
            for li, layer in enumerate(ex["layers"]):
                for e in range(ex["n_experts"]):
                    base = (layer * ex["n_experts"] + e) * ex["record_size"]
                    r = (li * ex["n_experts"] + e) * k
                    ranges += [(base + ex["planes"][name][0], ex["planes"][name][1], r + j)
                               for j, name in enumerate(RECORD_PLANES)]
            got = await crc_ranges(sink, EXPERTS_FILE, ranges,
                                   progress and (lambda d, t: progress(EXPERTS_FILE, d, t)))
            for r in range(len(ck["records"]) // k):
                bad = [name for j, name in enumerate(RECORD_PLANES) if got.get(r * k + j, 0) != ck["records"][r * k + j]]
                if bad:
                    li, e = divmod(r, ex["n_experts"])
                    rep.bad_records.append((ex["layers"][li], e, bad))
    except FileNotFoundError as e:
        rep.problem = f"a store file is missing: {e}"
    return rep
