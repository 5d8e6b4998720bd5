"""The ingest engine: stream a GGUF once, front to back, into a model folder (sans-IO over a source and a sink).

    manifest = await ingest(source, sink, expected_sha256=..., progress=cb, abort=event)

The source is read in units of at most `chunk_bytes` (cut at block boundaries, layout.plan_units), `read_ahead`
units ahead of the one being written; each unit's writes (dense planes, expert record parts) are issued together
(concurrently for a sink whose writes are asynchronous; in order for one whose writes complete in the call).
A unit counts as done only when all its writes have succeeded; only then do its checksums, its sha256 bytes and
its padding enter the manifest state. So the state always describes a prefix of whole units, which is what a
checkpoint saves: every `checkpoint_bytes`, on abort, and on any error (flush first, then manifest). A crash
loses at most the bytes since the last checkpoint.

Resume: a folder whose manifest names the same source (size, ETag, header sha256) continues from its checkpoint
after rebuilding and re-hashing the prefix from the store (resume.py); a different source, another format version
or a failed store starts over. The sha256 of the whole source is computed while streaming and checked against
`expected_sha256` (pinned sources); without one it is recorded. A mismatch marks the store failed, never complete.
"""
import asyncio
import hashlib
import time
import zlib
from collections import deque

from ..gguf.sources import read_header_async
from .blocks import split_blocks
from .errors import IngestAborted, QuotaExceeded, StoreError, StoreIntegrityError, StoreQuotaError
from .layout import EXPERTS_FILE, StoreLayout, plan_units
from .manifest import add_checkpoint, load_manifest, new_manifest, same_source, save_manifest, store_bytes
from .resume import crc_get, crc_set, rehash_prefix

DEFAULT_CHUNK = 8 << 20
DEFAULT_CHECKPOINT = 1 << 30


class Progress:
    """What a progress callback receives: bytes done of total in this phase, rate (bytes/s), eta (s)."""
    __slots__ = ("phase", "done", "total", "rate", "eta")

    def __init__(self, phase, done, total, rate, eta):
        self.phase, self.done, self.total, self.rate, self.eta = phase, done, total, rate, eta

    def to_dict(self) -> dict:
        return {s: getattr(self, s) for s in self.__slots__}

    def __repr__(self):
        return f"Progress({self.phase} {self.done}/{self.total} {self.rate / 1e6:.1f} MB/s eta {self.eta:.0f} s)"


class _Meter:
    def __init__(self, phase, start, total, callback):
        self.phase, self.start, self.total, self.callback = phase, start, total, callback
        self.t0 = time.monotonic()

    def __call__(self, done):
        if not self.callback:
            return
        dt = max(time.monotonic() - self.t0, 1e-9)
        rate = (done - self.start) / dt
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        self.callback(Progress(self.phase, done, self.total, rate, eta))


def _aborted(abort) -> bool:
    if abort is None:
        return False
    return abort.is_set() if hasattr(abort, "is_set") else bool(abort())


def transform_unit(unit, data, checksums: dict):
    """Writes [(file, offset, bytes)], checksum updates {key: crc} and non-zero padding {offset: hex} of a unit."""
    writes, updates, gaps = [], {}, {}
    mv = memoryview(data)
    pos = unit.start

    def note_gap(a, b):
        chunk = mv[a - unit.start:b - unit.start]
        if chunk.tobytes().count(0) != len(chunk):
            gaps[str(a)] = chunk.hex()

    for op in unit.ops:
        if op.src > pos:
            note_gap(pos, op.src)
        piece = mv[op.src - unit.start:op.src - unit.start + op.n]
        parts = split_blocks(op.split, piece) if op.split is not None else (piece,)
        for (file, off, key), part in zip(op.dst, parts):
            writes.append((file, off, part))
            updates[key] = zlib.crc32(part, updates.get(key, crc_get(checksums, key)))
        pos = op.src + op.n
    if unit.end > pos:
        note_gap(pos, unit.end)
    return writes, updates, gaps


async def read_source_header(source):
    async def read_range(start, end):
        return await source.read(start, end - start)
    return await read_header_async(read_range, source.size)


def _fmt(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


async def ingest(source, sink, *, expected_sha256=None, chunk_bytes=DEFAULT_CHUNK,
                 checkpoint_bytes=DEFAULT_CHECKPOINT, read_ahead=2, progress=None, abort=None, log=None) -> dict:
    """Stream `source` into `sink`'s folder (resuming when possible); returns the completed manifest."""
    say = log or (lambda msg: None)
    header = await read_source_header(source)
    header_bytes = await source.read(0, header.data_offset)
    identity = dict(source.identity())
    identity["header_sha256"] = hashlib.sha256(header_bytes).hexdigest()
    layout = StoreLayout(header)
    expected = expected_sha256.lower() if expected_sha256 else None

    old = await load_manifest(sink)
    if old is not None and not (isinstance(old, dict) and isinstance(old.get("state"), dict)
                                and isinstance(old.get("source"), dict)):
        old = {}  # edited out of shape: nothing in it can be resumed
    manifest, start = None, 0
    if old is not None and same_source(old, identity) and not old["state"]["failed"]:
        if old["state"]["complete"]:
            if expected and old["sha256"] != expected:
                raise StoreIntegrityError(f"the stored model's sha256 {old['sha256']} is not the pinned {expected}")
            if old["state"].get("damaged"):  # a check failed when it was run: rewrite what is damaged
                from .repair import repair
                say(f"the stored model is damaged ({old['state']['damaged']}): repairing it from the source")
                await repair(source, sink, log=say)
                old = await load_manifest(sink)
                old["state"].pop("damaged", None)
                await save_manifest(sink, old)
            return old
        manifest, start = old, old["state"]["next_offset"]
    elif old is not None:
        say("the stored folder is from another source or failed: starting over")

    units, first, sha = None, 0, hashlib.sha256()
    if manifest is not None:
        units = plan_units(layout, source.size, manifest["state"]["chunk_bytes"])
        first = next((i for i, u in enumerate(units) if u.start == start), None)
        meter = _Meter("rehash", 0, start, progress)
        why = "its checkpoint is not a unit boundary" if first is None else await rehash_prefix(
            units[:first], sink, manifest, sha, lambda u: meter(u.end))
        if why:
            say(f"cannot resume ({why}): starting over")
            manifest = None
        else:
            say(f"resuming at byte {start} of {source.size}")
    if manifest is None:
        await sink.clear()
        manifest = new_manifest(header, layout, identity, chunk_bytes, expected)
        units, first, sha = plan_units(layout, source.size, chunk_bytes), 0, hashlib.sha256()
        await save_manifest(sink, manifest)
    manifest["source"]["sha256_expected"] = expected
    await _run_units(source, sink, manifest, units, first, sha, checkpoint_bytes, read_ahead, progress, abort)

    digest = sha.hexdigest()
    await _pad_experts(sink, layout)
    await sink.flush()
    st = manifest["state"]
    if expected and digest != expected:
        st["failed"] = f"sha256 of the source is {digest}, expected {expected}"
        await save_manifest(sink, manifest)
        raise StoreIntegrityError(f"the downloaded file is corrupt or not the pinned one: {st['failed']}; "
                                  "the store is not marked complete and will be downloaded again")
    manifest["sha256"] = digest
    st["complete"] = True
    add_checkpoint(manifest, source.size)
    await save_manifest(sink, manifest)
    return manifest


async def _pad_experts(sink, layout):
    """Grow experts.bin to whole records: the last record's tail padding is never written otherwise."""
    ex = layout.experts
    if ex is None:
        return
    want = ex.n_layers * ex.n_experts * ex.record_size
    have = (await sink.files()).get(EXPERTS_FILE, 0)
    if have < want:
        await sink.write(EXPERTS_FILE, have, bytes(want - have))


async def _run_units(source, sink, manifest, units, first, sha, checkpoint_bytes, read_ahead, progress, abort):
    ck, st = manifest["checksums"], manifest["state"]
    frontier = units[first].start if first < len(units) else source.size
    meter = _Meter("ingest", frontier, source.size, progress)
    pending, nxt, since = deque(), first, 0

    async def read(unit):
        data = await source.read(unit.start, unit.end - unit.start)
        if len(data) != unit.end - unit.start:
            raise StoreError(f"the source returned {len(data)} bytes at offset {unit.start}, expected "
                             f"{unit.end - unit.start} (did the file change or the connection drop?)")
        return data

    async def checkpoint():
        await sink.flush()
        if not st["checkpoints"] or st["checkpoints"][-1]["offset"] != frontier:
            add_checkpoint(manifest, frontier)
        await save_manifest(sink, manifest)

    try:
        for i in range(first, len(units)):
            if _aborted(abort):
                raise IngestAborted(f"stopped at byte {frontier} of {source.size}; it resumes from there")
            while nxt < len(units) and len(pending) < read_ahead:
                pending.append(asyncio.ensure_future(read(units[nxt])))
                nxt += 1
            unit = units[i]
            data = await pending.popleft()
            writes, updates, gaps = transform_unit(unit, data, ck)
            if getattr(sink, "writes_block", False):
                # The write completes inside the call (OPFS sync handles, files, memory): a task per write would
                # only add event-loop turns, which cost milliseconds in a browser (setTimeout clamping).
                for f, o, b in writes:
                    await sink.write(f, o, b)
            else:
                results = await asyncio.gather(*(sink.write(f, o, b) for f, o, b in writes),
                                               return_exceptions=True)
                for r in results:
                    if isinstance(r, BaseException):
                        raise r
            for key, value in updates.items():
                crc_set(ck, key, value)
            st["gaps"].update(gaps)
            sha.update(data)
            frontier = unit.end
            since += unit.end - unit.start
            if since >= checkpoint_bytes:
                await checkpoint()
                since = 0
            meter(frontier)
    except Exception as e:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        try:
            await checkpoint()
        except Exception:
            pass  # the previous checkpoint stays valid
        if isinstance(e, QuotaExceeded):
            raise StoreQuotaError(
                f"out of storage space: this model needs {_fmt(store_bytes(manifest))}, and the browser refused "
                f"to store more after {_fmt(frontier)} of {_fmt(source.size)}. Free space (remove other models) "
                f"or allow persistent storage, then resume: it continues from that point. ({e})") from e
        raise
