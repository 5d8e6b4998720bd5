"""The row table (a fixed-size-row file + manifest + fingerprint) and the row cache's rules, with the store's
directory backend and a fake device: planes as bytearrays, the id -> slot map mirrored through flush()."""
import asyncio
import json
import random
import struct

import pytest

from py_engine.residency.row_cache import RowCache, RowCacheFull
from py_engine.residency.row_table import RowTable, RowTableChanged, RowTableError, write_row_table
from py_engine.store.local import DirectoryStorage, MemoryStorage

ROW = 24  # bytes per row: 6 u32 words
ROWS = 64
ABSENT_U32 = 0xFFFFFFFF


def row_bytes(r, salt=0):
    """Row r's words say which row it is (and which version of the table)."""
    return struct.pack("<6I", *[(r << 8) | (w + salt) for w in range(6)])


def table_data(rows=ROWS, salt=0):
    return b"".join(row_bytes(r, salt) for r in range(rows))


def run(coro):
    async def bounded():
        return await asyncio.wait_for(coro, 10)
    return asyncio.run(bounded())


class FakeDevice:
    """The uploader: slots live in plane buffers as the layout places them; the GPU map is a bytearray."""

    def __init__(self):
        self.cache = None
        self.planes = None
        self.uploads = []
        self.gpu_map = None

    def attach(self, cache):
        self.cache = cache
        self.planes = [bytearray(n) for n in cache.layout.buffer_sizes]
        self.gpu_map = bytearray(b"\xAA" * cache.map.nbytes)  # undefined until the first flush

    def upload(self, slot, data):
        b, off = self.cache.layout.locate(slot)
        self.planes[b][off:off + len(data)] = data
        self.uploads.append(slot)

    def flush(self):
        def write(off, data):
            self.gpu_map[off:off + len(data)] = data
        return self.cache.flush_map(write)

    def gather(self, ids):
        """What shaders/row_gather.wgsl computes: each id's row through the map and the planes (zeros if absent)."""
        lay, out, misses = self.cache.layout, [], 0
        for r in ids:
            slot = struct.unpack_from("<I", self.gpu_map, 4 * r)[0]
            if slot == ABSENT_U32:
                out.append(bytes(ROW))
                misses += 1
                continue
            b, i = divmod(slot, lay.slots_per_buffer)
            off = i * lay.slot_stride
            out.append(bytes(self.planes[b][off:off + ROW]))
        return out, misses


class GatedSink:
    """A store sink whose reads wait until the test opens them (or fail when told to)."""

    def __init__(self, sink):
        self.sink = sink
        self.gates = []
        self.fail = False
        self.reads = []

    async def read(self, file, offset, n):
        if file.endswith(".rows"):
            self.reads.append((offset // ROW, n // ROW))
            fut = asyncio.get_running_loop().create_future()
            self.gates.append(fut)
            await fut
            if self.fail:
                raise OSError("disk read failed")
        return await self.sink.read(file, offset, n)

    def open_all(self):
        for f in self.gates:
            if not f.done():
                f.set_result(None)
        self.gates.clear()

    def __getattr__(self, name):
        return getattr(self.sink, name)


async def make_table(tmp_path, data=None, name="emb"):
    sink = DirectoryStorage(tmp_path).sink("tables")
    await write_row_table(sink, name, table_data() if data is None else data, ROW, "u32")
    return sink, await RowTable.open(sink, name)


def make_cache(table, slots=4, max_binding_bytes=128 << 20):
    dev = FakeDevice()
    cache = RowCache(table, slots, dev, max_binding_bytes=max_binding_bytes)
    dev.attach(cache)
    return cache, dev


def check_invariants(cache, dev):
    dev.flush()
    seen = {}
    for r in range(cache.table.rows):
        s = cache.slot_of(r)
        gpu = struct.unpack_from("<I", dev.gpu_map, 4 * r)[0]
        assert gpu == (ABSENT_U32 if s < 0 else s)
        if s >= 0:
            assert s not in seen, f"slot {s} holds rows {seen[s]} and {r}"
            seen[s] = r
            assert cache.row_in(s) == r
    got, misses = dev.gather(sorted(seen.values()))
    assert misses == 0 and got == [row_bytes(r) for r in sorted(seen.values())]


def test_lookup_loads_uploads_and_maps_rows(tmp_path):
    async def go():
        _, table = await make_table(tmp_path)
        cache, dev = make_cache(table)
        slots = await cache.lookup([5, 9, 5])
        assert slots[0] == slots[2] and len(set(slots)) == 2
        assert [cache.pins(s) for s in slots[:2]] == [1, 1]
        dev.flush()
        got, misses = dev.gather([5, 9, 5, 7])
        assert got[:3] == [row_bytes(5), row_bytes(9), row_bytes(5)] and misses == 1 and got[3] == bytes(ROW)
        cache.release(set(slots))
        again = await cache.lookup([9])
        assert again == [slots[1]] and cache.stats["hits"] == 1 and cache.stats["misses"] == 2
        assert len(dev.uploads) == 2
        cache.release(set(again))
        with pytest.raises(ValueError, match="not pinned"):
            cache.release(set(again))
        check_invariants(cache, dev)
    run(go())


def test_missing_rows_of_a_lookup_are_read_in_merged_batches(tmp_path):
    async def go():
        _, table = await make_table(tmp_path)
        cache, _ = make_cache(table, slots=8)
        await cache.lookup([10, 12, 11, 40, 41, 63])
        assert table.reads == 3  # [10..12], [40..41], [63]
        assert table.bytes_read == (3 + 2 + 1) * ROW
        assert table.runs([1, 3, 30]) == [[1, 3], [30, 30]]  # a gap of 1 row is read through
    run(go())


def test_lru_evicts_the_least_recently_released_row(tmp_path):
    async def go():
        _, table = await make_table(tmp_path)
        cache, dev = make_cache(table, slots=3)
        slot = {}
        for r in (0, 1, 2):
            (slot[r],) = await cache.lookup([r])
            cache.release([slot[r]])
        cache.release(await cache.lookup([0]))  # row 0 is now the most recent: row 1 is the LRU
        (s3,) = await cache.lookup([3])
        assert s3 == slot[1] and cache.slot_of(1) == -1 and cache.stats["evictions"] == 1
        cache.release([s3])
        (s4,) = await cache.lookup([4])  # then row 2
        assert s4 == slot[2] and cache.slot_of(2) == -1 and cache.slot_of(0) == slot[0]
        cache.release([s4])
        check_invariants(cache, dev)
    run(go())


def test_pinned_rows_are_never_evicted_and_a_full_cache_keeps_no_pins(tmp_path):
    async def go():
        _, table = await make_table(tmp_path)
        cache, dev = make_cache(table, slots=3)
        held = await cache.lookup([0, 1])
        with pytest.raises(RowCacheFull, match="pinned"):
            await cache.lookup([2, 3])  # row 2 takes the last slot, row 3 finds none
        assert cache.slot_of(2) == -1 and sorted(cache.pins(s) for s in range(3)) == [0, 1, 1]
        with pytest.raises(RowCacheFull, match="cannot fit"):
            await cache.lookup([4, 5, 6, 7])
        (s2,) = await cache.lookup([2])
        cache.release([s2])
        (s3,) = await cache.lookup([3])  # evicts row 2, the only unpinned row
        assert s3 == s2 and cache.slot_of(0) == held[0] and cache.slot_of(1) == held[1]
        cache.release(held + [s3])
        check_invariants(cache, dev)
    run(go())


def test_concurrent_lookups_share_a_load_and_a_failed_read_frees_its_slots(tmp_path):
    async def go():
        sink, _ = await make_table(tmp_path)
        gated = GatedSink(sink)
        table = await RowTable.open(gated, "emb", verify=False)
        cache, dev = make_cache(table, slots=4)
        a = asyncio.ensure_future(cache.lookup([1, 2]))
        await asyncio.sleep(0)
        b = asyncio.ensure_future(cache.lookup([2, 3]))
        await asyncio.sleep(0)
        assert cache.stats == dict(cache.stats, misses=3, late_hits=1) and cache.slot_of(2) == -1
        gated.open_all()
        await asyncio.sleep(0)
        gated.open_all()
        sa, sb = await a, await b
        assert sa[1] == sb[0] and cache.pins(sa[1]) == 2 and len(gated.reads) == 2
        cache.release(set(sa))
        cache.release(set(sb))
        check_invariants(cache, dev)

        gated.fail = True
        c = asyncio.ensure_future(cache.lookup([7, 8]))
        await asyncio.sleep(0)
        d = asyncio.ensure_future(cache.lookup([8]))  # a late hit on the failing load
        await asyncio.sleep(0)
        gated.open_all()
        with pytest.raises(OSError, match="disk read failed"):
            await c
        with pytest.raises(OSError, match="disk read failed"):
            await d
        assert cache.slot_of(7) == cache.slot_of(8) == -1 and not any(cache.pins(s) for s in range(4))
        gated.fail = False
        task = asyncio.ensure_future(cache.lookup([7, 8, 9, 1]))  # row 1 was evicted by 8: two reads
        while not task.done():
            await asyncio.sleep(0)
            gated.open_all()
        slots = task.result()
        assert len(set(slots)) == 4
        cache.release(slots)
        check_invariants(cache, dev)
    run(go())


def test_fingerprint_detects_changed_data_size_and_manifest(tmp_path):
    async def go():
        sink, table = await make_table(tmp_path)
        fp = table.fingerprint
        assert len(fp) == 64 and (await RowTable.open(sink, "emb", expected_fingerprint=fp)).rows == ROWS
        path = tmp_path / "tables" / "emb.rows"
        raw = bytearray(path.read_bytes())
        raw[5 * ROW + 3] ^= 1
        path.write_bytes(raw)
        sink = DirectoryStorage(tmp_path).sink("tables")
        with pytest.raises(RowTableChanged, match="changed on disk"):
            await RowTable.open(sink, "emb")
        path.write_bytes(raw[:-ROW])
        with pytest.raises(RowTableChanged, match="holds"):
            await RowTable.open(sink, "emb", verify=False)
        man = json.loads((tmp_path / "tables" / "emb.json").read_text())
        man["rows"] = ROWS - 1
        (tmp_path / "tables" / "emb.json").write_text(json.dumps(man))
        with pytest.raises(RowTableChanged, match="manifest was edited"):
            await RowTable.open(sink, "emb")
        with pytest.raises(RowTableError, match="no manifest"):
            await RowTable.open(sink, "other")
        # a rewritten table has a new fingerprint: the old one is refused, and a cache attached to it empties
        await write_row_table(sink, "emb", table_data(salt=100), ROW, "u32")
        new = await RowTable.open(sink, "emb")
        assert new.fingerprint != fp
        with pytest.raises(RowTableChanged, match="not the expected one"):
            await RowTable.open(sink, "emb", expected_fingerprint=fp)
    run(go())


def test_a_cache_attached_to_a_changed_table_serves_the_new_rows(tmp_path):
    async def go():
        storage = MemoryStorage()
        sink = storage.sink("t")
        await write_row_table(sink, "emb", table_data(), ROW, "u32")
        cache, dev = make_cache(await RowTable.open(sink, "emb"), slots=4)
        cache.release(await cache.lookup([1, 2]))
        assert cache.attach(await RowTable.open(sink, "emb")) is False and cache.resident == 2
        await write_row_table(sink, "emb", table_data(salt=100), ROW, "u32")
        held = await cache.lookup([1])
        with pytest.raises(RuntimeError, match="pinned"):
            cache.attach(await RowTable.open(sink, "emb"))
        cache.release(held)
        assert cache.attach(await RowTable.open(sink, "emb")) is True and cache.resident == 0
        dev.flush()
        assert dev.gather([1, 2])[1] == 2
        slots = await cache.lookup([1])
        dev.flush()
        assert dev.gather([1])[0] == [row_bytes(1, salt=100)]
        cache.release(slots)
        await write_row_table(sink, "small", table_data(rows=8), ROW, "u32")
        with pytest.raises(ValueError, match="make a new cache"):
            cache.attach(await RowTable.open(sink, "small"))
    run(go())


def test_rows_split_over_planes_under_the_binding_limit(tmp_path):
    async def go():
        data = table_data()
        _, table = await make_table(tmp_path, data)
        cache, dev = make_cache(table, slots=10, max_binding_bytes=3 * ROW + 5)
        lay = cache.layout
        assert (lay.slot_stride, lay.slots_per_buffer, lay.buffer_count) == (ROW, 3, 4)
        assert lay.buffer_sizes == [3 * ROW] * 3 + [ROW]
        ids = [3, 14, 15, 9, 26, 37, 48, 59, 60, 61]
        slots = await cache.lookup(ids)
        assert sorted(slots) == list(range(10))
        dev.flush()
        got, misses = dev.gather(ids)
        assert misses == 0 and got == [row_bytes(r) for r in ids]
        for b, plane in enumerate(dev.planes):  # every plane holds exactly its slots' rows
            for i in range(lay.slots_in_buffer(b)):
                slot = b * lay.slots_per_buffer + i
                assert bytes(plane[i * ROW:(i + 1) * ROW]) == row_bytes(cache.row_in(slot))
        cache.release(slots)
    run(go())


def test_table_writer_refuses_bad_shapes(tmp_path):
    async def go():
        sink = MemoryStorage().sink("t")
        with pytest.raises(ValueError, match="multiple of 4"):
            await write_row_table(sink, "x", bytes(12), 6, "u8")
        with pytest.raises(ValueError, match="whole number"):
            await write_row_table(sink, "x", bytes(30), ROW, "u32")
        with pytest.raises(ValueError, match="unknown dtype"):
            await write_row_table(sink, "x", bytes(24), ROW, "f64")
        man = await write_row_table(sink, "h", bytes(48), ROW, "f16")
        assert (man["rows"], man["columns"], man["dtype"]) == (2, 12, "f16")
    run(go())


def test_random_schedules_keep_every_invariant(tmp_path):
    async def go():
        _, table = await make_table(tmp_path)
        rng = random.Random(7)
        cache, dev = make_cache(table, slots=6, max_binding_bytes=4 * ROW)
        held = []
        for step in range(400):
            if held and (rng.random() < 0.5 or len(held) > 3):
                cache.release(held.pop(rng.randrange(len(held))))
                continue
            ids = [rng.randrange(20) for _ in range(rng.randint(1, 4))]
            try:
                slots = await cache.lookup(ids)
            except RowCacheFull:
                assert sum(1 for s in range(6) if cache.pins(s)) + len(set(ids)) > 6
                continue
            assert [cache.row_in(s) for s in slots] == ids
            held.append(set(slots))
            if step % 25 == 0:
                check_invariants(cache, dev)
        for h in held:
            cache.release(h)
        assert not any(cache.pins(s) for s in range(6))
        check_invariants(cache, dev)
        s = cache.stats
        assert s["misses"] == s["uploads"] and s["hits"] > 0 and s["evictions"] > 0
    run(go())
