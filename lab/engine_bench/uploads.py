"""Expert-record upload throughput: the staging ring (mapped MAP_WRITE + copyBufferToBuffer) against writeBuffer.

Run inside Pyodide with WebGPU (`diskformer bench-uploads` starts it in Node + Dawn). Each method uploads `count`
records of `record_bytes` into a pool buffer, cycling over its slots, then waits for the queue to finish; the
figure is bytes / wall time of that whole sequence, the way the expert streamer uses it.
"""
import time

import js

from py_engine.gpu.buffers import COPY_DST, Readback, storage_buffer
from py_engine.gpu.device import open_gpu
from py_engine.gpu.staging_ring import StagingRing, WriteBufferUploads


def _record(record_bytes: int, seed: int) -> bytes:
    # distinct content per record so no layer of the stack can shortcut identical uploads
    pattern = bytes((i * 131 + seed * 17) & 0xFF for i in range(4096))
    return (pattern * (record_bytes // len(pattern) + 1))[:record_bytes]


async def _time_uploads(gpu, uploader, pool, slots: int, records: list, count: int) -> float:
    record_bytes = len(records[0])
    t0 = time.perf_counter()
    for i in range(count):
        await uploader.upload(pool, (i % slots) * record_bytes, records[i % len(records)])
    await uploader.drain()
    await gpu.queue.onSubmittedWorkDone()
    return time.perf_counter() - t0


async def run(args: dict) -> dict:
    record_bytes = int(args.get("record_bytes", 3_342_336))  # one qwen35moe Q8_0 expert record
    count = int(args.get("count", 64))
    ring = int(args.get("ring", 4))
    gpu = await open_gpu()
    slots = max(1, min(16, gpu.max_binding // record_bytes))
    pool = storage_buffer(gpu, slots * record_bytes, "bench.pool", extra_usage=COPY_DST)
    records = [_record(record_bytes, s) for s in range(4)]
    methods = {"staging_ring": StagingRing(gpu, record_bytes, n=ring), "write_buffer": WriteBufferUploads(gpu)}
    out = {"adapter": gpu.describe()["info"], "record_bytes": record_bytes, "count": count, "ring": ring, "results": {}}
    for name, uploader in methods.items():
        await _time_uploads(gpu, uploader, pool, slots, records, min(count, 8))  # warm-up
        best = min([await _time_uploads(gpu, uploader, pool, slots, records, count) for _ in range(3)])
        # every slot must hold the record last uploaded into it, or the figure means nothing
        landed = True
        for slot in range(min(slots, count)):
            last = max(i for i in range(count) if i % slots == slot)
            got = await Readback(gpu).read(pool, slot * record_bytes, record_bytes)
            landed = landed and got == records[last % len(records)]
        out["results"][name] = {"seconds": round(best, 5), "GBps": round(count * record_bytes / best / 1e9, 3),
                                "records_per_s": round(count / best, 1), "bytes_landed": landed}
        uploader.release()
    pool.destroy()
    return out
