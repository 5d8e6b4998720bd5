"""A GPU cache of S rows of a row table (row_table.py), with an id -> slot map kernels read.

`RowCache` decides which row lives in which slot; `GpuRowCache` puts it on a device: the slots split over several
storage buffers ("planes", each under the binding limit: SlotPoolLayout), the map as a u32 buffer (0xFFFFFFFF for
an absent row), uploads through the staging ring (or writeBuffer), and the gather kernel (shaders/row_gather.wgsl).

Rules (tests/unit/test_row_cache.py checks each):
- `await lookup(ids)` returns the slot of each id (a duplicate id gets the same slot). Every distinct row is pinned
  once; call `release(set(slots))` after submitting the work that reads them. Claims happen before the first
  await, so lookups may run concurrently: a row another lookup is still loading is a late hit (no second read).
- Missing rows of one lookup are read in one batch (neighbouring rows merged into one read) and uploaded; a row's
  map entry is set once its upload is submitted (queue order: a dispatch submitted after the map flush sees it).
- Eviction is O(1) LRU over unpinned resident rows (recency.LruPolicy: a row counts as used when its last pin is
  released). A pinned or loading row is never evicted; a lookup that needs more slots than are evictable raises
  RowCacheFull and keeps no pins. A failed read frees the slots it claimed and fails every waiter.
- The cache belongs to one table fingerprint: `attach(table)` with a changed table clears every row.
"""
import asyncio
from inspect import isawaitable

from .recency import LruPolicy
from .residency_map import ABSENT, ResidencyMap
from .slot_pool import SlotPoolLayout


class RowCacheFull(RuntimeError):
    """A lookup needs more slots than the cache can free (too many distinct rows, or the rest pinned)."""


def _retrieve(fut):
    if not fut.cancelled():
        fut.exception()


class RowCache:
    def __init__(self, table, slots, uploader, max_binding_bytes=128 << 20, alignment=4):
        self.table = table
        self.fingerprint = table.fingerprint
        self.layout = SlotPoolLayout(table.row_bytes, slots, max_binding_bytes, alignment)
        self.slots = slots
        self.uploader = uploader
        self.map = ResidencyMap(1, table.rows)  # entry r: slot of row r, or ABSENT
        self.policy = LruPolicy()
        self.stats = {"hits": 0, "late_hits": 0, "misses": 0, "evictions": 0, "lookups": 0, "uploads": 0}
        self._reset_slots()

    def _reset_slots(self):
        self._slot_of = {}  # row -> slot, resident or loading
        self._row_in = [-1] * self.slots
        self._pins = [0] * self.slots
        self._loading = {}  # row -> future resolved when its upload has been submitted
        self._free = list(range(self.slots - 1, -1, -1))  # pop() hands out low slots first

    # ---- queries -------------------------------------------------------------------------------------------
    def slot_of(self, row):
        """The slot of a resident row (upload submitted), or -1."""
        s = self._slot_of.get(row, -1)
        return -1 if row in self._loading else s

    def row_in(self, slot):
        return self._row_in[slot]

    def pins(self, slot):
        return self._pins[slot]

    @property
    def resident(self):
        return len(self._slot_of) - len(self._loading)

    # ---- lookup --------------------------------------------------------------------------------------------
    async def lookup(self, ids):
        ids = [int(r) for r in ids]
        for r in ids:
            if not 0 <= r < self.table.rows:
                raise IndexError(f"row {r} outside table {self.table.name!r} of {self.table.rows} rows")
        unique = list(dict.fromkeys(ids))
        if len(unique) > self.slots:
            raise RowCacheFull(f"a lookup of {len(unique)} distinct rows cannot fit a cache of {self.slots} slots")
        self.stats["lookups"] += 1
        slot_of, pinned, missing, waits = self._claim(unique)
        try:
            if missing:
                await self._load(missing)
            for fut in waits:  # shield: a cancelled lookup must not cancel another lookup's load
                await asyncio.shield(fut)
        except BaseException:
            self.release(pinned)
            raise
        return [slot_of[r] for r in ids]

    def _claim(self, unique):
        """Pin every row (claiming slots for missing ones) without awaiting; undoes everything on error."""
        slot_of, pinned, missing, waits = {}, [], [], []
        hits = 0
        try:
            for r in unique:
                s = self._slot_of.get(r)
                if s is not None:
                    fut = self._loading.get(r)
                    if fut is not None:
                        waits.append(fut)
                    else:
                        hits += 1
                else:
                    s = self._take_slot()
                    if s is None:
                        raise RowCacheFull(f"no slot for row {r}: all {self.slots} slots of the row cache are pinned "
                                           f"or loading ({len(unique)} rows asked)")
                    self._slot_of[r], self._row_in[s] = s, r
                    fut = self._loading[r] = asyncio.get_event_loop().create_future()
                    fut.add_done_callback(_retrieve)
                    missing.append((r, s))
                self._pin(s)
                pinned.append(s)
                slot_of[r] = s
        except BaseException:
            for r, s in missing:
                self._forget(r, s)
            self.release(pinned)
            raise
        # counted only for a lookup that got all its slots (a refused one keeps no claims; its evictions stand)
        self.stats["hits"] += hits
        self.stats["late_hits"] += len(waits)
        self.stats["misses"] += len(missing)
        return slot_of, pinned, missing, waits

    def _take_slot(self):
        if self._free:
            return self._free.pop()
        victim = self.policy.victim()
        if victim is None:
            return None
        self.policy.withdraw(victim)
        row = self._row_in[victim]
        del self._slot_of[row]
        self._row_in[victim] = -1
        self.map.set(0, row, ABSENT)
        self.stats["evictions"] += 1
        return victim

    def _pin(self, slot):
        if self._pins[slot] == 0:
            self.policy.withdraw(slot)
        self._pins[slot] += 1

    def _forget(self, row, slot, exc=None):
        """Drop a claimed row that never became resident; its waiters get `exc`. The slot stays pinned by its
        claimers and returns to the free list when the last of them releases it (release sees no row in it)."""
        fut = self._loading.pop(row, None)
        if fut is not None and not fut.done():
            fut.set_exception(exc or RuntimeError(f"row {row} of {self.table.name!r} was not loaded"))
        del self._slot_of[row]
        self._row_in[slot] = -1

    async def _load(self, missing):
        pending = list(missing)
        try:
            data = await self.table.read_rows([r for r, _ in missing])
            while pending:
                r, s = pending[0]
                up = self.uploader.upload(s, data[r])
                if isawaitable(up):
                    await up
                pending.pop(0)
                self.stats["uploads"] += 1
                self.map.set(0, r, s)
                self._loading.pop(r).set_result(True)
        except BaseException as exc:
            for r, s in pending:
                self._forget(r, s, exc if isinstance(exc, Exception) else None)
            raise

    def release(self, slots):
        """Unpin the distinct slots of a lookup; an unpinned resident row becomes the most recently used."""
        for s in slots:
            if self._pins[s] == 0:
                raise ValueError(f"slot {s} of the row cache is not pinned (released twice?)")
            self._pins[s] -= 1
            if self._pins[s]:
                continue
            row = self._row_in[s]
            if row < 0:
                self._free.append(s)  # its row failed to load
            elif row not in self._loading:
                self.policy.admit(s, row, 0)

    # ---- table changes -------------------------------------------------------------------------------------
    def clear(self):
        """Forget every row (all map entries become ABSENT). Refused while rows are pinned or loading."""
        if any(self._pins) or self._loading:
            raise RuntimeError("the row cache cannot be cleared while rows are pinned or loading")
        self.map.reset()
        self.policy.reset()
        self._reset_slots()

    def attach(self, table):
        """Serve `table` from now on; a different fingerprint (changed data or shape) empties the cache."""
        if table.fingerprint == self.fingerprint:
            self.table = table
            return False
        if table.rows != self.table.rows or table.row_bytes != self.table.row_bytes:
            raise ValueError(f"table {table.name!r} has {table.rows} rows x {table.row_bytes} B, this cache was built"
                             f" for {self.table.rows} x {self.table.row_bytes} B: make a new cache")
        self.clear()
        self.table, self.fingerprint = table, table.fingerprint
        return True

    def flush_map(self, write):
        """Send the changed map entries: write(byte_offset, memoryview of u32 words)."""
        return self.map.flush(write)


class GpuRowCache:
    """A RowCache on a WebGPU device (Pyodide only): planes, map buffer, uploads and the gather kernel."""

    def __init__(self, gpu, table, slots, upload="staging", ring_buffers=4, pipelines=None, max_binding_bytes=None):
        from ..gpu.buffers import storage_buffer, write_buffer
        from ..gpu.pipelines import Pipelines
        from ..gpu.staging_ring import StagingRing, WriteBufferUploads

        if upload not in ("staging", "writebuffer"):
            raise ValueError(f"upload must be 'staging' or 'writebuffer', got {upload!r}")
        self.gpu = gpu
        self._write = write_buffer
        self.cache = RowCache(table, slots, self, max_binding_bytes or gpu.max_binding)
        lay = self.cache.layout
        self.planes = [storage_buffer(gpu, lay.buffer_bytes(b), f"{table.name}.rows.{b}")
                       for b in range(lay.buffer_count)]
        self.map_buffer = storage_buffer(gpu, self.cache.map.nbytes, f"{table.name}.slot_map")
        self.uploads = (StagingRing(gpu, table.row_bytes, ring_buffers, f"{table.name}.staging")
                        if upload == "staging" else WriteBufferUploads(gpu))
        self.pipelines = pipelines or Pipelines(gpu)
        self._params = {}  # (plane, n_ids) -> uniform buffer of the gather
        self.flush_map()

    def upload(self, slot, data):  # RowCache's uploader
        b, offset = self.cache.layout.locate(slot)
        return self.uploads.upload(self.planes[b], offset, data)

    def flush_map(self):
        return self.cache.flush_map(lambda off, data: self._write(self.gpu, self.map_buffer, off, data))

    def gather_ops(self, dispatches, ids_buffer, n_ids, out_buffer, status_buffer):
        """Append to a DispatchList the gather of `n_ids` rows named in `ids_buffer` into `out_buffer` (row i at
        i * row_bytes), one dispatch per plane; absent rows come out zero and are counted in status[0]."""
        from ..gpu.buffers import uniform_buffer

        limit = int(self.gpu.limits.get("maxComputeWorkgroupsPerDimension", 65535))
        if not 0 < n_ids <= limit:
            raise ValueError(f"a gather covers 1..{limit} ids per call, got {n_ids}")
        lay, table = self.cache.layout, self.cache.table
        row_words, pipe = table.row_bytes // 4, self.pipelines.get("row_gather.wgsl")
        for b, plane in enumerate(self.planes):
            params = self._params.get((b, n_ids))
            if params is None:
                words = self.pipelines.params_layout("row_gather.wgsl").pack({
                    "n_ids": n_ids, "row_words": row_words, "stride_words": lay.slot_stride // 4,
                    "slots_per_plane": lay.slots_per_buffer, "plane": b, "table_rows": table.rows})
                params = self._params[b, n_ids] = uniform_buffer(self.gpu, words, f"row_gather.params.{b}")
            bg = self.pipelines.bind_group(pipe, {0: params,
                                                  1: ids_buffer, 2: self.map_buffer, 3: plane, 4: out_buffer,
                                                  5: status_buffer}, f"row_gather.{b}")
            dispatches.dispatch(pipe, bg, -(-row_words // 64), n_ids, 1, f"row_gather plane {b}")
        return dispatches

    def release(self):
        for b in self.planes + [self.map_buffer] + list(self._params.values()):
            b.destroy()
        self.planes, self._params = [], {}
        self.uploads.release()
