"""Checking what a model store holds before and while a model runs from it.

A store is only trusted as far as its checksums: `check_manifest` refuses a manifest.json whose structure or
numbers are impossible (so nothing later indexes, allocates or divides by them); `open_checked` recomputes the
header's sha256, checks that the recorded layout is the one the header implies (a moved plane offset is caught here,
by name) and recomputes every dense plane's crc32, then returns a `CheckedSink`, which checks each expert record's
sub-plane crc32s as the record is read, before it reaches the GPU. A mismatch raises `StoreDamaged`, whose message
names the file and the part and says what to do: repair (re-ingest from the source, which rewrites only what is
damaged) or remove.
"""
import hashlib
import json
import time
import zlib

from .errors import StoreIntegrityError
from .layout import (DENSE_FILE, EXPERTS_FILE, FORMAT_VERSION, HEADER_FILE, MANIFEST_FILE, RECORD_PLANES,
                     StoreLayout)

# Far above any real model (a GGUF header with a 250k vocabulary is ~10 MB), far below what would exhaust memory.
MAX_HEADER_BYTES = 1 << 30
MAX_FILE_BYTES = 1 << 50
MAX_EXPERTS = 1 << 16
MAX_LAYERS = 1 << 12
REMEDY = "re-ingest the model from its source to repair it (only the damaged parts are rewritten), or remove it"


class StoreDamaged(StoreIntegrityError):
    """The store's files or manifest do not match what was recorded; the message names the part and the remedy."""


def _int(value, what, lo=0, hi=MAX_FILE_BYTES) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise StoreDamaged(f"manifest.json: {what} is {str(value)[:40]!r}, not a whole number in {lo}..{hi}")
    return value


def _dict(value, what) -> dict:
    if not isinstance(value, dict):
        raise StoreDamaged(f"manifest.json: {what} is missing or not an object")
    return value


def check_manifest(m) -> dict:
    """Raise StoreDamaged unless `m` is a structurally sound manifest of a completed ingest; returns it."""
    _dict(m, "the manifest")
    if m.get("format") != FORMAT_VERSION:
        raise StoreDamaged(f"manifest.json: format {str(m.get('format'))[:20]!r} is not {FORMAT_VERSION}; "
                           "ingest the model again")
    state = _dict(m.get("state"), "state")
    if state.get("failed"):
        raise StoreDamaged(f"the store's ingest failed ({str(state['failed'])[:200]}); ingest the model again")
    if state.get("complete") is not True:
        raise StoreDamaged("the store is incomplete: resume the ingest first")
    source = _dict(m.get("source"), "source")
    if not isinstance(source.get("header_sha256"), str):
        raise StoreDamaged("manifest.json: source.header_sha256 is missing")
    config = _dict(m.get("config"), "config")
    if not isinstance(config.get("architecture"), str) or not isinstance(config.get("metadata"), dict):
        raise StoreDamaged("manifest.json: config.architecture or config.metadata is missing")
    lay = _dict(m.get("layout"), "layout")
    _int(lay.get("header_size"), "layout.header_size", 1, MAX_HEADER_BYTES)
    dense = _dict(lay.get("dense"), "layout.dense")
    dense_size = _int(dense.get("size"), "layout.dense.size")
    planes = dense.get("planes")
    if not isinstance(planes, list):
        raise StoreDamaged("manifest.json: layout.dense.planes is not a list")
    ck = _dict(m.get("checksums"), "checksums")
    _int(ck.get("header"), "checksums.header", 0, 0xFFFFFFFF)
    dense_ck = _dict(ck.get("dense"), "checksums.dense")
    for i, p in enumerate(planes):
        _dict(p, f"dense plane #{i}")
        off, n = _int(p.get("offset"), f"dense plane #{i}'s offset"), _int(p.get("nbytes"), f"dense plane #{i}'s size")
        kind_ok = p.get("kind") in ("codes", "scales", "raw")
        if off + n > dense_size or not isinstance(p.get("tensor"), str) or not kind_ok:
            raise StoreDamaged(f"manifest.json: dense plane #{i} is malformed or lies outside dense.bin")
        _int(dense_ck.get(f"{p['tensor']}:{p['kind']}"), f"the checksum of dense plane {p['tensor']}:{p['kind']}",
             0, 0xFFFFFFFF)
    _check_experts(lay.get("experts"), ck.get("records"))
    return m


def _check_experts(ex, records):
    if ex is None:
        return
    _dict(ex, "layout.experts")
    n_exp = _int(ex.get("n_experts"), "layout.experts.n_experts", 1, MAX_EXPERTS)
    size = _int(ex.get("record_size"), "layout.experts.record_size", 1, 1 << 40)
    layers = ex.get("layers")
    if (not isinstance(layers, list) or not layers or not all(type(x) is int and 0 <= x < MAX_LAYERS for x in layers)
            or layers != sorted(set(layers))):
        raise StoreDamaged("manifest.json: layout.experts.layers is not a sorted list of layer numbers")
    sub = _dict(ex.get("planes"), "layout.experts.planes")
    for name in RECORD_PLANES:
        pl = sub.get(name)
        if not isinstance(pl, list) or len(pl) != 2:
            raise StoreDamaged(f"manifest.json: record sub-plane {name} is missing")
        if _int(pl[0], f"{name}'s offset") + _int(pl[1], f"{name}'s size") > size:
            raise StoreDamaged(f"manifest.json: record sub-plane {name} lies outside the {size}-byte record")
    want = len(layers) * n_exp * len(RECORD_PLANES)
    if not isinstance(records, list) or len(records) != want:
        raise StoreDamaged(f"manifest.json: checksums.records should hold {want} checksums")
    if not all(type(c) is int and 0 <= c <= 0xFFFFFFFF for c in records):
        raise StoreDamaged("manifest.json: checksums.records holds a value that is not a crc32")


def read_store_manifest(folder) -> dict:
    """The checked manifest of a store folder on disk (CPython); StoreDamaged when there is none or it is unsound."""
    from pathlib import Path

    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        raise StoreDamaged(f"{folder} is not a model store (no {MANIFEST_FILE}); make one with `diskformer ingest`")
    try:
        m = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise StoreDamaged(f"{path} is not valid JSON; ingest the model again") from None
    return check_manifest(m)


class LayoutMismatch(StoreDamaged):
    """manifest.json places planes or records where its own header.bin does not."""


def damaged(name: str, what: str, kind=StoreDamaged) -> StoreDamaged:
    exc = kind(f"the model store{' ' + name if name else ''} is damaged: {what}; {REMEDY}")
    exc.what = what
    return exc


async def check_header(sink, manifest, name: str = "") -> bytes:
    """header.bin against its sha256, and the recorded layout against the one its header implies."""
    from ..gguf import GGUFError, parse_header

    lay = manifest["layout"]
    head = await sink.read(HEADER_FILE, 0, lay["header_size"])
    if (len(head) != lay["header_size"] or hashlib.sha256(head).hexdigest() != manifest["source"]["header_sha256"]
            or zlib.crc32(head) != manifest["checksums"]["header"]):
        raise damaged(name, f"{HEADER_FILE} does not match its checksum")
    try:
        planned = StoreLayout(parse_header(head)).to_json()
    except (GGUFError, ValueError) as exc:
        raise damaged(name, f"{HEADER_FILE} cannot be laid out ({exc})") from None
    recorded = {k: lay.get(k) for k in planned}
    if json.loads(json.dumps(planned)) != recorded:
        raise damaged(name, f"{MANIFEST_FILE}'s layout differs from the one {HEADER_FILE} implies "
                            f"({_first_difference(json.loads(json.dumps(planned)), recorded)})", LayoutMismatch)
    return head


def _first_difference(want, got, path="layout") -> str:
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            if want[k] != got.get(k):
                return _first_difference(want[k], got.get(k), f"{path}.{k}")
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return f"{path}: {str(got)[:60]} instead of {str(want)[:60]}"


async def check_dense(sink, manifest, name: str = ""):
    """Every dense plane's crc32, read front to back in large pieces."""
    from .catalogue import crc_ranges

    planes = [(p["offset"], p["nbytes"], f"{p['tensor']}:{p['kind']}") for p in manifest["layout"]["dense"]["planes"]]
    got = await crc_ranges(sink, DENSE_FILE, planes)
    want = manifest["checksums"]["dense"]
    for off, n, key in planes:
        if got.get(key, 0) != want[key]:
            short = " (the file is too short)" if got.get(key, 0) is None else ""
            raise damaged(name, f"{DENSE_FILE} plane {key} (bytes {off}..{off + n}) does not match its checksum{short}")


async def mark_damaged(sink, what: str):
    """Note in the manifest that a check failed, so the next ingest from the source repairs instead of skipping a
    'complete' store. Best effort: the damage is reported either way."""
    from .manifest import load_manifest, save_manifest

    try:
        m = await load_manifest(sink)
        if isinstance(m, dict) and isinstance(m.get("state"), dict):
            m["state"]["damaged"] = what
            await save_manifest(sink, m)
    except Exception:  # noqa: BLE001 - a read-only or vanished folder: nothing more to do than report
        pass


async def open_checked(sink, name: str = "", check_records: bool = True) -> "CheckedSink":
    """Check a store's manifest, header and dense planes, then return a sink that checks every record read."""
    raw = await sink.get(MANIFEST_FILE)
    if raw is None:
        raise StoreDamaged(f"{name or 'the folder'} is not a model store (no {MANIFEST_FILE})")
    try:
        manifest = check_manifest(json.loads(raw))
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, StoreDamaged):
            raise
        raise StoreDamaged(f"{MANIFEST_FILE} of {name or 'the store'} is not valid JSON; ingest the model "
                           "again") from None
    t0 = time.perf_counter()
    try:
        await check_header(sink, manifest, name)
        await check_dense(sink, manifest, name)
    except FileNotFoundError as exc:
        await mark_damaged(sink, f"a file is missing ({exc})")
        raise damaged(name, f"a file is missing ({exc})") from None
    except StoreDamaged as exc:
        await mark_damaged(sink, getattr(exc, "what", str(exc)))
        raise
    checked = CheckedSink(sink, manifest, name, check_records)
    checked.stats["load_check_ms"] = (time.perf_counter() - t0) * 1e3
    return checked


class CheckedSink:
    """A store sink whose whole-record reads of experts.bin are checked against the records' crc32s.

    A record is checked the first time it is read in a run (crc32 costs ~2 ms per 3.3 MB record in CPython,
    ~6 ms in Pyodide: checking every re-read of a hot record would add that to each token's misses); `recheck`
    checks every read."""

    def __init__(self, sink, manifest, name="", check_records=True):
        self.sink, self.manifest, self.name = sink, manifest, name
        ex = manifest["layout"]["experts"]
        self.ex = ex if check_records else None
        self.layer_index = {layer: i for i, layer in enumerate(ex["layers"])} if ex else {}
        self.stats = {"records_checked": 0, "record_check_ms": 0.0, "rereads_unchecked": 0}
        self.recheck = False
        self._checked = set()

    def __getattr__(self, attr):
        return getattr(self.sink, attr)

    async def read(self, file: str, offset: int, n: int):
        data = await self.sink.read(file, offset, n)
        ex = self.ex
        if ex is not None and file == EXPERTS_FILE and n == ex["record_size"] and offset % n == 0:
            index = offset // n
            if self.recheck or index not in self._checked:
                try:
                    self.check_record(index, data)
                except StoreDamaged as exc:
                    await mark_damaged(self.sink, exc.what)
                    raise
                self._checked.add(index)
            else:
                self.stats["rereads_unchecked"] += 1
        return data

    def check_record(self, index: int, data):
        t0 = time.perf_counter()
        ex = self.ex
        layer, expert = divmod(index, ex["n_experts"])
        li = self.layer_index.get(layer)
        if li is None:
            return
        base = (li * ex["n_experts"] + expert) * len(RECORD_PLANES)
        want = self.manifest["checksums"]["records"]
        mv = memoryview(data)
        for j, plane in enumerate(RECORD_PLANES):
            off, size = ex["planes"][plane]
            if len(data) < off + size or zlib.crc32(mv[off:off + size]) != want[base + j]:
                start = index * ex["record_size"]
                raise damaged(self.name, f"{EXPERTS_FILE} record of layer {layer}, expert {expert} (bytes "
                                         f"{start}..{start + ex['record_size']}, {plane}) does not match its checksum")
        self.stats["records_checked"] += 1
        self.stats["record_check_ms"] += (time.perf_counter() - t0) * 1e3


class CheckedRecordReader:
    """A record reader that bypasses the sink (Node's parallel reads, the browser's reader workers) with the sink's
    record checks: each record is checked against its crc32s the first time it is read in a run."""

    def __init__(self, reader, checked: CheckedSink):
        self.reader, self.checked = reader, checked
        self.n_experts = checked.manifest["layout"]["experts"]["n_experts"]

    def __getattr__(self, attr):
        return getattr(self.reader, attr)

    async def read_records(self, layer: int, experts) -> list:
        got = await self.reader.read_records(layer, experts)
        for expert, data in zip(experts, got):
            await self._check(layer * self.n_experts + int(expert), data)
        return got

    async def read_record(self, layer: int, expert: int):
        return (await self.read_records(layer, [expert]))[0]

    async def _check(self, index: int, data):
        checked = self.checked
        if not checked.recheck and index in checked._checked:
            checked.stats["rereads_unchecked"] += 1
            return
        # a JS typed array (reader workers, Node's fs) is copied out once for its first check
        raw = data.to_bytes() if hasattr(data, "to_bytes") else data
        try:
            checked.check_record(index, raw)
        except StoreDamaged as exc:
            await mark_damaged(checked.sink, exc.what)
            raise
        checked._checked.add(index)


def with_record_checks(sink, reader):
    """`reader` checked like the sink's own record reads where the sink checks records and the reader bypasses it."""
    if not isinstance(sink, CheckedSink) or sink.ex is None or getattr(reader, "sink", None) is sink:
        return reader
    return CheckedRecordReader(reader, sink)
