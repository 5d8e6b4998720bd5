"""The model store's ingest when it is cut short: abort, crash and source errors then resume from the checkpoint,
damaged or changed sources, sha256 and verify, quota, the catalogue, truncated files, concurrent writes."""
import asyncio
import hashlib
import json
import os
import random

import pytest

from py_engine.gguf.sources import read_gguf_file
from py_engine.store import (IngestAborted, StoreIntegrityError, StoreQuotaError, is_complete, list_models,
                             remove, verify)
from py_engine.store.ingest import ingest
from py_engine.store.layout import DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE
from py_engine.store.local import BytesSource, DirectoryStorage, FileSource, MemoryStorage
from store_craft import ingest_into_memory, run

STORE_FILES = (HEADER_FILE, DENSE_FILE, EXPERTS_FILE)


# ---- abort, crash, resume ------------------------------------------------------------------------------------------

class Crash(BaseException):
    """A tab killed mid-write: nothing after it runs (the engine only checkpoints on Exception)."""


class CrashingSink:
    def __init__(self, sink, after_writes):
        self.sink, self.left = sink, after_writes

    def __getattr__(self, name):
        return getattr(self.sink, name)

    async def write(self, file, offset, data):
        self.left -= 1
        if self.left < 0:
            raise Crash()
        await self.sink.write(file, offset, data)


class FailingSource:
    def __init__(self, src, fail_at):
        self.src, self.fail_at, self.size = src, fail_at, src.size

    def identity(self):
        return self.src.identity()

    async def read(self, offset, n):
        if offset > 0 and offset <= self.fail_at < offset + n:  # the header prefix read at 0 passes
            raise OSError("connection reset")
        return await self.src.read(offset, n)


def _same_store(a: MemoryStorage, b: MemoryStorage):
    fa, fb = a.folders["m"], b.folders["m"]
    for f in STORE_FILES:
        assert fa[f] == fb[f], f"{f} differs"
    ma, mb = json.loads(fa[MANIFEST_FILE]), json.loads(fb[MANIFEST_FILE])
    assert ma["checksums"] == mb["checksums"] and ma["sha256"] == mb["sha256"] and ma["layout"] == mb["layout"]
    assert is_complete(ma) and is_complete(mb)


def _in_expert_tensor(header, offset):
    """True when `offset` falls strictly inside an expert tensor and inside one expert's slice (mid-record)."""
    for t in header.tensors:
        if "_exps." in t.name and t.abs_offset < offset < t.end:
            return (offset - t.abs_offset) % (t.nbytes // t.dims[2]) != 0
    return False


CHUNK = 100_000  # cuts the micro models' 8704-byte expert slices mid-slice
CKPT = 200 << 10


@pytest.fixture(scope="module")
def tiny35(fixture_models):
    path = fixture_models / "micro-qwen35moe.gguf"
    clean, _ = ingest_into_memory(path, chunk_bytes=CHUNK, checkpoint_bytes=CKPT)
    return path, clean, read_gguf_file(path)


def test_abort_mid_record_then_resume(tiny35):
    path, clean, header = tiny35
    storage, stop = MemoryStorage(), {"at": None}

    class Flag:
        def is_set(self):
            return stop["at"] is not None

    def on_progress(p):
        if stop["at"] is None and _in_expert_tensor(header, p.done) and p.done > 500_000:
            stop["at"] = p.done

    with pytest.raises(IngestAborted):
        run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m"), chunk_bytes=CHUNK,
                   checkpoint_bytes=CKPT, progress=on_progress, abort=Flag()))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert man["state"]["next_offset"] == stop["at"] and not man["state"]["complete"]
    phases = []
    run(ingest(BytesSource(path.read_bytes(), etag="v1"), storage.sink("m"), progress=lambda p: phases.append(p)))
    assert phases[0].phase == "rehash" and phases[-1].phase == "ingest" and phases[-1].done == path.stat().st_size
    _same_store(storage, clean)


def test_crash_after_checkpoint_resumes_from_it(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(Crash):
        run(ingest(BytesSource(path.read_bytes()), CrashingSink(storage.sink("m"), 220), chunk_bytes=CHUNK,
                   checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ck = man["state"]["next_offset"]
    assert ck >= CKPT and len(man["state"]["checkpoints"]) >= 1
    # Bytes written after the checkpoint but never recorded: scribble over them; the resume rewrites them.
    exps = storage.folders["m"][EXPERTS_FILE]
    exps[-100:] = b"\xff" * 100
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any(f"resuming at byte {ck}" in m for m in logs)
    _same_store(storage, clean)


def test_source_error_checkpoints_then_resumes(tiny35):
    path, clean, header = tiny35
    storage = MemoryStorage()
    exps = [t for t in header.tensors if t.name == "blk.2.ffn_up_exps.weight"][0]
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes()), exps.abs_offset + 5000), storage.sink("m"),
                   chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    fail_at = exps.abs_offset + 5000  # the frontier is the start of the unit whose read failed
    assert 0 < man["state"]["next_offset"] <= fail_at < man["state"]["next_offset"] + CHUNK
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m")))
    _same_store(storage, clean)


def test_damaged_prefix_is_detected_and_restarted(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes()), 900_000), storage.sink("m"), chunk_bytes=CHUNK))
    storage.folders["m"][DENSE_FILE][100] ^= 0x40  # damage a plane the checkpoint covers
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any("cannot resume" in m and "no longer matches" in m for m in logs)
    _same_store(storage, clean)


def test_changed_source_starts_over(fixture_models, tiny35):
    path, _, _ = tiny35
    storage = MemoryStorage()
    with pytest.raises(OSError):
        run(ingest(FailingSource(BytesSource(path.read_bytes(), etag="A"), 900_000), storage.sink("m"),
                   chunk_bytes=CHUNK))
    logs = []  # same bytes, new ETag: the server says it is another file
    run(ingest(BytesSource(path.read_bytes(), etag="B"), storage.sink("m"), chunk_bytes=CHUNK, log=logs.append))
    assert any("starting over" in m for m in logs) and not any("resuming" in m for m in logs)
    other = fixture_models / "micro-qwen3moe.gguf"  # another model into the same folder
    logs.clear()
    run(ingest(BytesSource(other.read_bytes(), etag="B"), storage.sink("m"), log=logs.append))
    assert any("starting over" in m for m in logs)
    clean, _ = ingest_into_memory(other)
    _same_store(storage, clean)


def test_flipped_source_byte_fails_sha256_and_never_completes(tiny35):
    path, clean, header = tiny35
    good = path.read_bytes()
    want = hashlib.sha256(good).hexdigest()
    bad = bytearray(good)
    bad[header.data_offset + 12345] ^= 1
    storage = MemoryStorage()
    with pytest.raises(StoreIntegrityError, match="sha256"):
        run(ingest(BytesSource(bytes(bad)), storage.sink("m"), expected_sha256=want))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert not is_complete(man) and man["state"]["failed"] and man["sha256"] is None
    assert not run(verify(storage.sink("m"))).ok
    logs = []  # the right file then restarts from zero (a failed store is never resumed)
    run(ingest(BytesSource(good), storage.sink("m"), expected_sha256=want, log=logs.append))
    assert any("starting over" in m for m in logs)
    _same_store(storage, clean)


def test_verify_finds_corrupted_record_and_plane(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}
    sink = storage.sink("m")
    assert run(verify(sink)).ok
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ex = man["layout"]["experts"]
    base = (2 * ex["n_experts"] + 5) * ex["record_size"]
    storage.folders["m"][EXPERTS_FILE][base + ex["planes"]["down_scales"][0] + 3] ^= 0x10
    plane = man["layout"]["dense"]["planes"][7]
    storage.folders["m"][DENSE_FILE][plane["offset"]] ^= 0x01
    rep = run(verify(sink))
    assert not rep.ok and rep.header_ok
    assert rep.bad_records == [(2, 5, ["down_scales"])]
    assert rep.bad_planes == [f"{plane['tensor']}:{plane['kind']}"]


def test_quota_error_is_clear_and_resumable(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage(quota=700_000)
    with pytest.raises(StoreQuotaError, match=r"out of storage space: this model needs .* resume"):
        run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    assert man["state"]["next_offset"] > 0 and not man["state"]["complete"]
    storage.quota = None  # the user freed space
    logs = []
    run(ingest(BytesSource(path.read_bytes()), storage.sink("m"), log=logs.append))
    assert any("resuming" in m for m in logs)
    _same_store(storage, clean)


def test_completed_store_is_not_reingested(tiny35):
    path, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}

    class HeaderOnlySource(FileSource):  # same identity as the clean ingest's FileSource
        async def read(self, offset, n):
            assert offset + n <= 1 << 20, "a complete store must not download tensor data again"
            return await super().read(offset, n)

    src = HeaderOnlySource(path)
    man = run(ingest(src, storage.sink("m")))
    assert is_complete(man)
    with pytest.raises(StoreIntegrityError):
        run(ingest(src, storage.sink("m"), expected_sha256="00" * 32))
    src.close()


def test_directory_storage_catalogue(fixture_models, tmp_path, tiny35):
    path, clean, _ = tiny35
    storage = DirectoryStorage(tmp_path / "models")
    src = FileSource(path)
    run(ingest(src, storage.sink("micro"), chunk_bytes=CHUNK))
    src.close()
    for f in STORE_FILES:
        assert (tmp_path / "models" / "micro" / f).read_bytes() == bytes(clean.folders["m"][f])
    listed = run(list_models(storage))
    assert [(m["name"], m["complete"], m["architecture"]) for m in listed] == [("micro", True, "qwen35moe")]
    assert listed[0]["bytes"] == sum(os.path.getsize(p) for p in (tmp_path / "models" / "micro").iterdir())
    assert run(verify(storage.sink("micro"))).ok
    run(remove(storage, "micro"))
    assert run(list_models(storage)) == []
    mem = MemoryStorage()
    mem.folders["m"] = clean.folders["m"]
    assert [m["bytes"] for m in run(list_models(mem))] == [sum(len(b) for b in clean.folders["m"].values())]


def test_crc_ranges_streams_across_chunks_holes_and_eof(monkeypatch):
    import zlib

    from py_engine.store import catalogue
    monkeypatch.setattr(catalogue, "READ_CHUNK", 100)
    rng = random.Random(5)
    data = bytes(rng.randrange(256) for _ in range(1000))
    storage = MemoryStorage()
    run(storage.sink("m").write("f", 0, data))
    ranges = [(0, 10, "a"), (5, 300, "overlap"), (350, 1, "b"), (600, 250, "c"), (990, 10, "end"),
              (995, 10, "past"), (2000, 5, "beyond"), (40, 0, "empty")]
    got = run(catalogue.crc_ranges(storage.sink("m"), "f", ranges))
    for o, n, key in ranges:
        want = None if o + n > len(data) else zlib.crc32(data[o:o + n])
        assert got.get(key, 0) == want, key


def test_verify_reports_a_truncated_expert_file(tiny35):
    _, clean, _ = tiny35
    storage = MemoryStorage()
    storage.folders["m"] = {k: bytearray(v) for k, v in clean.folders["m"].items()}
    man = json.loads(storage.folders["m"][MANIFEST_FILE])
    ex = man["layout"]["experts"]
    del storage.folders["m"][EXPERTS_FILE][-ex["record_size"]:]
    rep = run(verify(storage.sink("m")))
    assert rep.bad_records == [(ex["layers"][-1], ex["n_experts"] - 1, list(ex["planes"]))]


def test_asynchronous_sink_gets_concurrent_writes_and_the_same_store(tiny35):
    path, clean, _ = tiny35

    class SlowSink:
        """Writes that complete later and out of order, as a promise-based backend's do."""
        writes_block = False

        def __init__(self, sink):
            self.sink, self.in_flight, self.most = sink, 0, 0
            self.rng = random.Random(1)

        def __getattr__(self, name):
            return getattr(self.sink, name)

        async def write(self, file, offset, data):
            data = bytes(data)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            for _ in range(self.rng.randrange(3)):
                await asyncio.sleep(0)
            await self.sink.write(file, offset, data)
            self.in_flight -= 1

    storage = MemoryStorage()
    slow = SlowSink(storage.sink("m"))
    run(ingest(BytesSource(path.read_bytes()), slow, chunk_bytes=CHUNK, checkpoint_bytes=CKPT))
    assert slow.most > 1
    # the clean store was made through a FileSource (another identity): compare data and checksums
    a, b = storage.folders["m"], clean.folders["m"]
    assert all(a[f] == b[f] for f in STORE_FILES)
    assert json.loads(a[MANIFEST_FILE])["checksums"] == json.loads(b[MANIFEST_FILE])["checksums"]
