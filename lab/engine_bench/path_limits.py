"""The miss path's limits, measured in the engine's own process beside the streamed cases (`diskformer bench`).

Stages a missed expert record passes through, each measured on its own with real records of experts.bin:
- read: the engine's own reader (Node's fs, node_reader.py) with 1, 2, 4, ... reads in flight at once; its
  best rate is the read limit (in a tab: the page's reader workers on OPFS, as many reads gathered). A reader
  without parallel reads (a sink) is measured with one.
- upload: the staging ring (mapped MAP_WRITE + copyBufferToBuffer, the engine's ring size) at the engine's batch
  sizes: 1 record, a layer's top-k and twice that, uploaded together, then a queue sync per batch as a layer's
  submit does; its best rate is the upload limit (it includes filling the mapped range from the record).
- host copy: a JS memory copy of a record-sized array (Uint8Array.set), what filling a staging buffer costs.
The serial figure (read, then upload, one record at a time) is kept for comparison with the old path.
"""
import asyncio
import time

from pyodide.code import run_js

from py_engine.gpu.buffers import COPY_DST, storage_buffer
from py_engine.gpu.staging_ring import StagingRing

READERS = (1, 2, 4, 8, 16)
COPY_JS = r"""
((n, reps) => {
  const a = new Uint8Array(n), b = new Uint8Array(n);
  for (let i = 0; i < n; i += 4096) a[i] = i & 255;
  b.set(a);
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) b.set(a);
  return performance.now() - t0;
})
"""


def _rate(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds > 0 else None


async def read_limits(reader, keys) -> list:
    """[{"readers": n, "GBps"}] for n reads in flight at once (waves of n records of one layer's span)."""
    size = reader.record_size
    if getattr(reader, "pool", None) is not None:  # a tab's reader workers (OPFS)
        return await pool_read_limits(reader, keys)
    if not hasattr(reader, "measure"):  # a sink reader: one record at a time
        t0 = time.perf_counter()
        for layer, e in keys:
            await reader.read_record(layer, e)
        return [{"readers": 1, "GBps": _rate(len(keys) * size, time.perf_counter() - t0)}]
    offsets = [reader.offset(layer, e) for layer, e in keys]
    out = []
    await reader.measure(offsets[:2], 2)  # warm: opens the thread pool
    for n in READERS:
        if n > len(offsets):
            break
        s = await reader.measure(offsets, n)
        out.append({"readers": n, "GBps": _rate(len(offsets) * size, s)})
    return out


async def pool_read_limits(reader, keys) -> list:
    """As read_limits, through a tab's pool of reader workers (py_engine/store/reader_pool.py): waves of n records
    read at once (gathered as the engine reads a layer's misses); more than the pool's workers queue on them."""
    size = reader.record_size
    await asyncio.gather(*(reader.read_record(layer, e) for layer, e in keys[:2]))  # warm: the workers' handles
    out = []
    for n in READERS:
        if n > len(keys):
            break
        t0 = time.perf_counter()
        for i in range(0, len(keys), n):
            await asyncio.gather(*(reader.read_record(layer, e) for layer, e in keys[i:i + n]))
        out.append({"readers": n, "GBps": _rate(len(keys) * size, time.perf_counter() - t0)})
    return out


async def upload_limits(gpu, records, batch_sizes, ring_buffers) -> list:
    """[{"batch": b, "GBps"}]: batches of b records uploaded together through a ring of `ring_buffers`, a queue sync
    after each batch."""
    size = max(int(r.byteLength) if hasattr(r, "byteLength") else len(r) for r in records)
    stride = -(-size // 256) * 256
    slots = max(batch_sizes)
    scratch = storage_buffer(gpu, slots * stride, "bench.limit_scratch", extra_usage=COPY_DST)
    ring = StagingRing(gpu, size, n=ring_buffers, label="bench.limit_staging")
    out = []
    try:
        await ring.upload(scratch, 0, records[0])
        await ring.drain()
        await gpu.queue.onSubmittedWorkDone()
        for b in batch_sizes:
            t0, n = time.perf_counter(), 0
            for start in range(0, len(records) - b + 1, b):
                await asyncio.gather(*(ring.upload(scratch, i * stride, records[start + i]) for i in range(b)))
                await gpu.queue.onSubmittedWorkDone()
                n += b
            out.append({"batch": b, "GBps": _rate(n * size, time.perf_counter() - t0)})
    finally:
        await ring.drain()
        ring.release()
        scratch.destroy()
    return out


def host_copy_GBps(nbytes, reps=16) -> float:
    ms = run_js(COPY_JS)(nbytes, reps)
    return nbytes * reps / max(ms, 1e-6) / 1e6


async def measure(gpu, reader, n_layers, n_experts, top_k, ring_buffers, count) -> dict:
    size = reader.record_size
    count = max(2, min(count, n_layers * n_experts))
    # records spread over the layers as misses are: every layer's first experts in turn
    keys = [(i % n_layers, (i // n_layers) % n_experts) for i in range(count)]
    reads = await read_limits(reader, keys)
    records = [await reader.read_record(layer, e) for layer, e in keys]
    batches = sorted({1, min(top_k, count), min(2 * top_k, count)})
    uploads = await upload_limits(gpu, records, batches, ring_buffers)
    # the same batches through a ring of twice a layer's top-k, for comparison (the limit is the engine's ring's)
    wide = 2 * top_k
    uploads_wide = await upload_limits(gpu, records, batches, wide) if wide > ring_buffers else None
    copy = host_copy_GBps(size)
    limits = {"read": max(r["GBps"] for r in reads), "upload": max(u["GBps"] for u in uploads), "host_copy": copy}
    return {"records": count, "record_bytes": size, "reader": type(reader).__name__, "ring_buffers": ring_buffers,
            "read": reads, "upload": uploads, "upload_ring_2k": uploads_wide, "host_copy_GBps": copy,
            "limits_GBps": limits}
