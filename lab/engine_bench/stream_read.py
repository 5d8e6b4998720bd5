"""The device's bandwidth bound, measured in the engine's own process: shaders/bench_stream_read.wgsl reads one
large buffer of random bytes (random, not zeros: some GPUs compress zero pages), once per dispatch.

Timing: k dispatches in one pass and one submit, wall-clocked in JS around submit + onSubmittedWorkDone. The
slope between k = 2 and k = 2 + K cancels the fixed cost of a submit and of the await, so what is left is the
kernel's own time per pass over the buffer.
"""
import random

import js
from pyodide.code import run_js

from py_engine.gpu.buffers import COPY_DST, COPY_SRC, create_buffer, storage_buffer, write_buffer
from py_engine.gpu.commands import split_groups
from . import bench_pipelines

CONFIGS = ((256, 4), (256, 16), (256, 64))  # (workgroup size, vec4 words per thread): the best one counts
PATTERN_BYTES = 8 << 20
TARGET_MS = 40.0  # the timed submit runs at least this long, so the wall clock's granularity does not matter

_TIMER_JS = r"""
({
  async time(device, pipe, bg, gx, gy, k) {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe); pass.setBindGroup(0, bg);
    for (let i = 0; i < k; i++) pass.dispatchWorkgroups(gx, gy);
    pass.end();
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    return performance.now() - t0;
  },
})
"""

_timer = None


def _js_timer():
    global _timer
    if _timer is None:
        _timer = run_js(_TIMER_JS)
    return _timer


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def fill_random(gpu, buf, nbytes: int, seed: int = 1):
    """Fill `buf` with pseudo-random bytes: one pattern written once, copied on the GPU to cover the buffer."""
    size = min(PATTERN_BYTES, nbytes)
    pattern = create_buffer(gpu, size, COPY_SRC | COPY_DST, "stream_pattern")
    write_buffer(gpu, pattern, 0, random.Random(seed).randbytes(size))
    enc = gpu.device.createCommandEncoder()
    for off in range(0, nbytes, size):
        enc.copyBufferToBuffer(pattern, 0, buf, off, min(size, nbytes - off))
    gpu.queue.submit(js.Array.of(enc.finish()))
    return pattern


async def measure(gpu, nbytes: int | None = None, trials: int = 3) -> dict:
    """{"bytes", "GBps" (best config), "configs": [{"wgs", "per", "ms", "GBps"}]} for one buffer of `nbytes`
    (default: 1 GiB or the largest binding the device allows, whichever is smaller)."""
    limit = gpu.max_binding - 4096
    nbytes = min(nbytes or (1 << 30), limit) // 16 * 16
    if nbytes < (1 << 20):
        raise ValueError(f"stream-read buffer of {nbytes} B is too small to measure bandwidth (>= 1 MiB)")
    n4 = nbytes // 16
    src = storage_buffer(gpu, nbytes, "stream_src")
    sink = storage_buffer(gpu, 4 << 16, "stream_sink")
    pattern = fill_random(gpu, src, nbytes)
    timer = _js_timer()
    pipelines = bench_pipelines(gpu)
    configs = []
    try:
        for wgs, per in CONFIGS:
            stride = (n4 + per - 1) // per
            pipe = pipelines.get("bench_stream_read.wgsl", WGS=wgs, PER=per, N4=n4, STRIDE=stride)
            bg = pipelines.bind_group(pipe, {0: src, 1: sink}, "stream_read")
            gx, gy = split_groups((stride + wgs - 1) // wgs)
            once = await timer.time(gpu.device, pipe, bg, gx, gy, 2)  # compiles, warms, calibrates
            extra = max(2, min(200, int(TARGET_MS / max(once / 2, 1e-3))))
            slopes = []
            for _ in range(trials):
                t_lo = await timer.time(gpu.device, pipe, bg, gx, gy, 2)
                t_hi = await timer.time(gpu.device, pipe, bg, gx, gy, 2 + extra)
                slopes.append(max(t_hi - t_lo, 1e-6) / extra)
            ms = median(slopes)
            configs.append({"wgs": wgs, "per": per, "ms": round(ms, 4), "GBps": round(nbytes / ms / 1e6, 1)})
    finally:
        for b in (src, sink, pattern):
            b.destroy()
    return {"bytes": nbytes, "GBps": max(c["GBps"] for c in configs), "configs": configs}
