"""The streaming cases of `diskformer bench`: the engine run from a model store with a GPU pool holding a fraction
of all experts (StoreDecoder), the rest paged in from experts.bin on demand.

Per case, in the same process: the store's disk read and the staging-ring upload measured on their own (N records
of experts.bin read in order, then the same records uploaded into a scratch buffer through a StagingRing: the
serial path), the miss path's stage limits (path_limits.py: parallel reads, ring uploads at the engine's batch
sizes, host copy), then 2 warm-up tokens, `reset`, a P-token prefill and N greedy decode steps, with the
streamer's counters (hits, misses, bytes read for demands and for prefetches, prefetches wasted) and the syncs
taken between the phases. With a routing trace (trace_routing.py) the decode's routed ids follow the trace.
The host derives the pipelined bound from them.
"""
import time
from dataclasses import dataclass

from py_engine.engine.store_decoder import StoreDecoder
from py_engine.gpu.buffers import COPY_DST, storage_buffer
from py_engine.gpu.staging_ring import StagingRing
from . import path_limits, store_access
from .timing import time_prefill_and_decode
from .trace_routing import TraceStoreDecoder

IO_RECORDS = 64  # records read and uploaded for the throughput figures (fewer when the store holds fewer)
IO_SCRATCH_SLOTS = 4  # the uploads cycle over this many record-sized places of one buffer
STREAM_FIELDS = ("hits", "late_hits", "misses", "bytes_read", "bytes_demand", "bytes_prefetch", "prefetch_issued",
                 "prefetch_used", "prefetch_wasted", "prefetch_throttled", "read_batches", "read_ms", "upload_ms",
                 "wait_ms", "placed_elsewhere")


async def measure_io(gpu, reader, n_layers: int, n_experts: int, count: int = IO_RECORDS) -> dict:
    """Read `count` records of experts.bin in file order (timed), then upload them through a staging ring (timed,
    until the queue has run every copy). Record contents are real model bytes."""
    size = reader.record_size
    count = max(1, min(count, n_layers * n_experts))
    keys = [(i // n_experts, i % n_experts) for i in range(count)]
    t0 = time.perf_counter()
    records = [await reader.read_record(layer, e) for layer, e in keys]
    read_s = time.perf_counter() - t0
    slots, stride = IO_SCRATCH_SLOTS, -(-size // 256) * 256
    scratch = storage_buffer(gpu, slots * stride, "bench.io_scratch", extra_usage=COPY_DST)
    ring = StagingRing(gpu, size, n=4, label="bench.io_staging")
    try:
        await ring.upload(scratch, 0, records[0])  # warm: the first map and copy
        await ring.drain()
        await gpu.queue.onSubmittedWorkDone()
        t0 = time.perf_counter()
        for i, data in enumerate(records):
            await ring.upload(scratch, (i % slots) * stride, data)
        await ring.drain()
        await gpu.queue.onSubmittedWorkDone()
        upload_s = time.perf_counter() - t0
    finally:
        ring.release()
        scratch.destroy()
    nbytes = count * size
    both_s = read_s + upload_s
    return {"records": count, "record_bytes": size, "bytes": nbytes, "read_ms": round(read_s * 1e3, 3),
            "upload_ms": round(upload_s * 1e3, 3), "read_MBps": nbytes / read_s / 1e6 if read_s else None,
            "upload_GBps": nbytes / upload_s / 1e9 if upload_s else None,
            # one record's whole path (read, then upload) when neither overlaps the other: the streamer's floor
            "read_upload_MBps": nbytes / both_s / 1e6 if both_s else None}


def _snapshot(dec) -> dict:
    st = dec.pool.streamer.counters
    out = {f: st.total(f) for f in STREAM_FIELDS}
    out["syncs"] = dec.stats["syncs"]
    out["resumes"] = dec.stats["resumes"]
    cpu = dec.cpu_tier  # misses computed on the CPU: their reads and compute, ms
    out["cpu_ms"] = cpu.counts["compute_ms"] + cpu.counts["read_ms"] if cpu is not None else 0.0
    return out


def _delta(a: dict, b: dict) -> dict:
    return {k: b[k] - a[k] for k in a}


@dataclass(frozen=True)
class StreamingRun:
    """What every streaming case of one bench run shares: the model store's folder, `make_ids(n_vocab)` giving the
    prompt (the same ids as the resident case), the decode steps, the context, the KV format, the routing lanes'
    cap, the warm-up tokens, the routing mode, the staging ring's buffers and more StoreOptions fields (the CPU
    expert tier's)."""
    store: str
    make_ids: object
    n_decode: int
    n_ctx: int
    kv: str
    lane_cap: int
    warmup: int
    routing: str = "auto"
    ring_buffers: int = 4
    store_options: dict = None


async def run_case(gpu, pipes, run: StreamingRun, fraction: float, trace=None, limits=True) -> dict:
    """One pool fraction of `run`: `trace`: the decode's routed ids per step and layer (None: the model's own
    routing); `limits`: measure the stage limits."""
    store, make_ids, n_decode, n_ctx, routing = run.store, run.make_ids, run.n_decode, run.n_ctx, run.routing
    # prefetch depth 1 with the router look-ahead, as the chat app streams (py_engine/app/store_load.py); under a
    # trace the router's look-ahead would guess the random model's picks, not the trace's: there the guesses are
    # the layer's picks for the previous token (the trace's reuse, as a real router's)
    cls = TraceStoreDecoder if trace else StoreDecoder
    sink, reader = await store_access.open_store(store)
    try:
        dec = await cls.open_store(sink, gpu, pipes, n_ctx=n_ctx, kv_format=run.kv, lane_cap=run.lane_cap,
                                   pool_fraction=fraction, routing=routing, prefetch_depth=1, reader=reader,
                                   prefetch_guess="previous" if trace else "lookahead",
                                   ring_buffers=run.ring_buffers, **(run.store_options or {}))
    except BaseException:
        if reader is not None:
            reader.release()
        raise
    if trace:
        dec.trace = trace
    try:
        if dec.cache.n_ctx < n_ctx:
            raise ValueError(f"prompt + decode = {n_ctx} tokens exceed the model's context ({dec.cache.n_ctx})")
        ids = make_ids(dec.n_vocab)
        cfg = dec.model.cfg
        io = await measure_io(gpu, dec.reader, cfg.n_layer, cfg.n_expert)
        stages = (await path_limits.measure(gpu, dec.reader, cfg.n_layer, cfg.n_expert, cfg.n_expert_used,
                                            dec.pool.uploads.n if hasattr(dec.pool.uploads, "n") else 1,
                                            IO_RECORDS) if limits else None)
        for t in ids[:run.warmup]:
            await dec.step(t)
        dec.reset()
        if trace:
            dec.trace_steps = 0  # the timed decode starts the trace over

        reps, step_ms, (s0, s1, s2), _ = await time_prefill_and_decode(dec, ids, n_decode, _snapshot)
        prefill_ms = reps[0]["ms"]
        decode_ms = sum(step_ms)
        plan = dec.plan
        return {
            "fraction": fraction,
            "routing": routing,
            "routing_source": "trace" if trace else "model",
            "mode": dec.stats["mode"],
            "slots": plan.slots, "records": plan.n_records, "pool_bytes": plan.pool.total_bytes,
            "gpu_bytes": dec.stats["gpu_bytes"]["total"],
            "load_ms": round(dec.stats["load_ms"], 1),
            "io": io,
            "stages": stages,
            "streamer": {k: v for k, v in dec.pool.streamer.stats().items() if k != "per_layer"},
            "prefill": dict(_delta(s0, s1), tokens=len(ids), ms=round(prefill_ms, 3),
                            tok_s=len(ids) / prefill_ms * 1e3),
            "decode": dict(_delta(s1, s2), tokens=n_decode, ms=round(decode_ms, 3),
                           tok_s=n_decode / decode_ms * 1e3, ms_median=round(sorted(step_ms)[len(step_ms) // 2], 4)),
            "tokens": {"early_stop": dec.stats["early_stop_tokens"], "per_layer": dec.stats["per_layer_tokens"]},
            "prefetch_guess": dec.stats["prefetch_guess"],
            "cpu_tier": (dec.cpu_tier.summary(dec.pool.streamer.counters, dec.stats["tokens"])
                         if dec.cpu_tier is not None else None),
            # the last decoded token's routed ids as the engine read them back, and which trace step it was
            "trace_steps": dec.trace_steps if trace else None,
            "last_routed_ids": [list(dec.prefetch.prev_ids.get(layer, ())) for layer in range(cfg.n_layer)],
        }
    finally:
        dec.release()  # the reader too
