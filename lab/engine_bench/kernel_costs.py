"""What each kernel kind costs inside the token's own command stream. The recorded list is encoded N times into one
command buffer, as decode records it (its passes, Dawn's barriers), and submitted once, so the host cannot pace it;
the GPU's time for the N replays comes from timestamps around them (the wall clock from submit to done where the
device has none). Then every dispatch of one kind is swapped for an empty dispatch of the same grid
(shaders/bench_empty.wgsl: its launch and Dawn's barrier kept, its work gone), and last every dispatch (the floor:
launches and barriers alone). A kind's cost is the full list's time minus its variant's.

The timestamp profile (dispatch_profile.py) puts each dispatch in a pass of its own, which adds time per kernel and
keeps consecutive kernels from overlapping; this measures the marginal cost where the decode spends it, and the
full list's figure is the GPU's own time per token. A swapped kind leaves its outputs as the last full replay wrote
them (the same token at the same position), so the kernels after it read the values they would have. The embedding
is never swapped: the residual stream it resets would then grow with every replay. Variants are timed in turns over
several rounds; each figure is the median of its rounds.
"""
import struct
from collections import Counter

from py_engine.gpu.buffers import STORAGE, create_buffer, write_buffer
from py_engine.gpu.commands import helper
from . import bench_pipelines
from .dispatch_profile import kernel_kind, timestamp_queries
from .stream_read import median

KEPT_KINDS = ("inp_embd",)  # swapping it would let the residual stream grow with each replay

_SPAN_JS = r"""
({
  // `ops` recorded n times into one command buffer between two empty passes that write timestamps (querySet null:
  // none), submitted once; resolves to [GPU µs (0 without timestamps), wall µs from submit to done, encode µs].
  async span(device, replay, ops, n, querySet, resolveBuf, readBuf) {
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    if (querySet !== null) {
      enc.beginComputePass({ timestampWrites: { querySet, beginningOfPassWriteIndex: 0 } }).end();
    }
    for (let i = 0; i < n; i++) replay.record(enc, ops);
    if (querySet !== null) {
      enc.beginComputePass({ timestampWrites: { querySet, endOfPassWriteIndex: 1 } }).end();
      enc.resolveQuerySet(querySet, 0, 2, resolveBuf, 0);
      enc.copyBufferToBuffer(resolveBuf, 0, readBuf, 0, 16);
    }
    const cb = enc.finish();
    const t1 = performance.now();
    device.queue.submit([cb]);
    let gpu = 0;
    if (querySet !== null) {
      await readBuf.mapAsync(GPUMapMode.READ);
      const t = new BigInt64Array(readBuf.getMappedRange(0, 16)).slice();
      readBuf.unmap();
      gpu = Number(t[1] - t[0]) / 1e3;
    } else {
      await device.queue.onSubmittedWorkDone();
    }
    return [gpu, (performance.now() - t1) * 1e3, (t1 - t0) * 1e3];
  },
})
"""


async def measure(dec, replays: int = 20, rounds: int = 3) -> dict:
    """{"available": True, "clock": "timestamps" | "wall", "full_us", "floor_us" (µs per token), "encode_us" (the
    full list's encoding per token, CPU), "replays", "rounds", "kept", "kinds": [{"kind", "dispatches", "us"}, ...]
    (largest first)}. Moves the KV cache's row at the last position and the recurrent state: run it after the timed
    phases."""
    import js  # Pyodide's: this module runs in the engine only
    from pyodide.code import run_js

    gpu = dec.gpu
    ops = dec.dl.ops
    labels = dec.dl.labels
    pipes = bench_pipelines(gpu)
    empty = pipes.get("bench_empty.wgsl")
    sink = create_buffer(gpu, 16, STORAGE, "kernel_costs_sink")
    empty_group = pipes.bind_group(empty, {0: sink}, "kernel_costs_empty")

    def variant(swap) -> object:
        out = js.Array.new()
        for op, label in zip(ops, labels):
            if op[0] == 0 and swap(kernel_kind(label)):
                out.push(js.Array.of(0, empty, empty_group, op[3], op[4], op[5]))
            else:
                out.push(op)
        return out

    kinds = Counter(kernel_kind(label) for op, label in zip(ops, labels) if op[0] == 0)  # dispatches per kind
    variants = {"full": ops, "floor": variant(lambda k: True)}
    for k in kinds:
        if k not in KEPT_KINDS:
            variants[k] = variant(lambda kind, k=k: kind == k)

    stamped = "timestamp-query" in gpu.features
    qs, resolve, read = timestamp_queries(gpu, 2, "kernel_costs") if stamped else (None, None, None)
    span = run_js(_SPAN_JS)
    h, dev = helper(), gpu.device
    write_buffer(gpu, dec.step_buf, 0, struct.pack("<4I", *dec.replay_step_words()))
    times = {name: [] for name in variants}
    encode = []
    try:
        for _ in range(rounds):
            for name, v in variants.items():
                await span.span(dev, h, v, 1, qs, resolve, read)  # untimed: the variant's first after another
                gpu_us, wall_us, enc_us = (float(x) for x in await span.span(dev, h, v, replays, qs, resolve, read))
                times[name].append((gpu_us if stamped else wall_us) / replays)
                if name == "full":
                    encode.append(enc_us / replays)
        await span.span(dev, h, ops, 1, qs, resolve, read)  # leave every buffer as the full list writes it
    finally:
        sink.destroy()
        for b in (qs, resolve, read):
            if b is not None:
                b.destroy()
    us = {name: median(t) for name, t in times.items()}
    table = sorted(({"kind": k, "dispatches": n, "us": round(us["full"] - us[k], 2)}
                    for k, n in kinds.items() if k in us), key=lambda r: -r["us"])
    return {"available": True, "clock": "timestamps" if stamped else "wall", "full_us": round(us["full"], 2),
            "floor_us": round(us["floor"], 2), "encode_us": round(median(encode), 2), "replays": replays,
            "rounds": rounds, "kept": [k for k in KEPT_KINDS if k in kinds], "kinds": table}


__all__ = ["measure", "KEPT_KINDS"]
