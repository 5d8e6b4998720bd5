"""Where a token's GPU time goes: the recorded dispatch list replayed with one compute pass per dispatch, each pass
bracketed by timestamp queries (needs the 'timestamp-query' feature; without it the profile says so).

One pass per dispatch adds a little overhead per kernel, so the profile tells the kernels' shares and the sum of
their busy time, not the replay's exact wall time (the benchmark measures that separately).
"""
import re
import struct

from statistics import median

QUERY_RESOLVE = 0x0200
MAX_QUERIES = 4096  # WebGPU's limit on one query set

_PROFILE_JS = r"""
({
  // Replays `ops` at the step words given, one timed pass per dispatch; resolves to each dispatch's ns.
  async run(device, stepBuf, stepWords, ops, querySet, resolveBuf, readBuf) {
    device.queue.writeBuffer(stepBuf, 0, new Uint32Array(stepWords));
    const enc = device.createCommandEncoder();
    let q = 0;
    for (const op of ops) {
      if (op[0] === 0) {
        const pass = enc.beginComputePass({
          timestampWrites: { querySet, beginningOfPassWriteIndex: q, endOfPassWriteIndex: q + 1 } });
        pass.setPipeline(op[1]); pass.setBindGroup(0, op[2]); pass.dispatchWorkgroups(op[3], op[4], op[5]);
        pass.end();
        q += 2;
      } else {
        enc.copyBufferToBuffer(op[1], op[2], op[3], op[4], op[5]);
      }
    }
    enc.resolveQuerySet(querySet, 0, q, resolveBuf, 0);
    enc.copyBufferToBuffer(resolveBuf, 0, readBuf, 0, q * 8);
    device.queue.submit([enc.finish()]);
    await readBuf.mapAsync(GPUMapMode.READ);
    const t = new BigInt64Array(readBuf.getMappedRange(0, q * 8)).slice();
    readBuf.unmap();
    const out = [];
    for (let i = 0; i < q; i += 2) out.push(Number(t[i + 1] - t[i]));
    out.push(Number(t[q - 1] - t[0]));  // last: the span from the first dispatch's start to the last's end
    return out;
  },
})
"""


def timestamp_queries(gpu, count: int, name: str) -> tuple:
    """A timestamp query set of `count` queries, the buffer its resolve writes (8 bytes a query) and the one mapped to
    read that back; the caller destroys all three."""
    from py_engine.gpu.buffers import COPY_DST, COPY_SRC, MAP_READ, create_buffer
    from py_engine.gpu.jsutil import js_object

    qs = gpu.device.createQuerySet(js_object({"type": "timestamp", "count": count}))
    return (qs, create_buffer(gpu, 8 * count, QUERY_RESOLVE | COPY_SRC, f"{name}_resolve"),
            create_buffer(gpu, 8 * count, MAP_READ | COPY_DST, f"{name}_read"))


async def read_timestamps(gpu, qs, resolve, read, count: int) -> list:
    """The `count` resolved timestamps of query set `qs` (ns; its buffers from timestamp_queries), once the queue's
    work before them is done."""
    import js  # Pyodide's: kernel_kind is used outside Pyodide too

    enc = gpu.device.createCommandEncoder()
    enc.resolveQuerySet(qs, 0, count, resolve, 0)
    enc.copyBufferToBuffer(resolve, 0, read, 0, 8 * count)
    gpu.device.queue.submit(js.Array.of(enc.finish()))
    await read.mapAsync(js.GPUMapMode.READ)
    raw = js.Uint8Array.new(read.getMappedRange(0, 8 * count)).slice().to_bytes()
    read.unmap()
    return list(struct.unpack(f"<{count}q", raw))


def kernel_kind(label: str) -> str:
    """'Qcur-3' -> 'Qcur', 'ffn_moe_up-1@0' -> 'ffn_moe_up': a dispatch's label without its layer number (and
    the pool buffer a streamed expert product reads)."""
    return re.sub(r"-\d+(@\d+)?$", "", label) or "unlabelled"


async def profile(dec, repeats: int = 5) -> dict:
    """One decoded token: per kernel kind, dispatches and median GPU µs; plus the busy sum and the span."""
    return await profile_list(dec.gpu, dec.dl, dec.step_buf, dec.replay_step_words(), repeats)


async def profile_prefill(dec, pos0: int, repeats: int = 3) -> dict:
    """One full prefill chunk (dec.prefill.T rows from position pos0, re-running rows the prompt already fed:
    rewrites their KV rows and advances the recurrent state, so run it only after the timed phases)."""
    pre = dec.prefill
    out = await profile_list(dec.gpu, pre.dl, pre.chunk_buf, [pre.T, pos0, 0, 0], repeats)
    if out.get("available"):
        out.update({"tokens": pre.T, "pos0": pos0, "busy_us_per_token": round(out["busy_us"] / pre.T, 3)})
    return out


async def profile_list(gpu, dl, uniform, words, repeats: int) -> dict:
    """Replays `dl` with `words` written to `uniform` first, one timed pass per dispatch, repeats + 1 times (the
    first warms caches); per kernel kind: dispatches, median GPU µs; plus the busy sum and the span."""
    from pyodide.code import run_js  # imported here: kernel_kind is used outside Pyodide too

    if "timestamp-query" not in gpu.features:
        return {"available": False, "reason": "the device has no 'timestamp-query' feature"}
    labels = [lab for lab, op in zip(dl.labels, dl.ops) if op[0] == 0]
    n = len(labels)
    if 2 * n > MAX_QUERIES:
        return {"available": False, "reason": f"{n} dispatches exceed one query set ({MAX_QUERIES // 2})"}
    qs, resolve, read = timestamp_queries(gpu, 2 * n, "profile")
    helper = run_js(_PROFILE_JS)
    runs = []
    try:
        for _ in range(repeats + 1):
            runs.append([float(x) for x in await helper.run(gpu.device, uniform, words, dl.ops, qs, resolve, read)])
    finally:
        for b in (qs, resolve, read):
            b.destroy()
    runs = runs[1:]
    per_dispatch = [median([r[i] for r in runs]) for i in range(n)]
    span = median([r[n] for r in runs])
    kinds = {}
    for lab, ns in zip(labels, per_dispatch):
        k = kinds.setdefault(kernel_kind(lab), {"dispatches": 0, "us": 0.0})
        k["dispatches"] += 1
        k["us"] += ns / 1e3
    busy_us = sum(per_dispatch) / 1e3
    table = sorted(({"kind": name, "dispatches": v["dispatches"], "us": round(v["us"], 2),
                     "share": round(v["us"] / busy_us, 4) if busy_us else 0.0} for name, v in kinds.items()),
                   key=lambda r: -r["us"])
    zero = sum(1 for ns in per_dispatch if ns <= 0)
    return {"available": True, "busy_us": round(busy_us, 2), "span_us": round(span / 1e3, 2),
            "zero_length_dispatches": zero, "kinds": table}
