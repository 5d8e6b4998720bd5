"""What each kernel kind costs inside the token's own command stream: the recorded list replayed back to back as
decode submits it (one pass, no timestamps), then with every dispatch of one kind swapped for an empty dispatch of
the same grid (shaders/bench_empty.wgsl: its launch and Dawn's barrier kept, its work gone), and with every dispatch
swapped (the floor: launches and barriers alone). A kind's cost is the full list's time minus its variant's.

The timestamp profile (dispatch_profile.py) puts each dispatch in a pass of its own, which adds time per kernel and
keeps consecutive kernels from overlapping; this measures the marginal cost where the decode spends it. A swapped
kind leaves its outputs as the last full replay wrote them (the same token at the same position), so the kernels
after it read the values they would have. The embedding is never swapped: the residual stream it resets would then
grow with every replay. Variants are timed in turns over several rounds; each figure is the median of its rounds.
"""
import struct
import time

from ..gpu.buffers import STORAGE, create_buffer, write_buffer
from ..gpu.commands import helper
from .dispatch_profile import kernel_kind
from .stream_read import median

KEPT_KINDS = ("inp_embd",)  # swapping it would let the residual stream grow with each replay


async def measure(dec, pipes, replays: int = 20, rounds: int = 3) -> dict:
    """{"available": True, "full_us", "floor_us" (µs per token), "full_cpu_us", "floor_cpu_us" (of which the
    encode + submit loop), "replays", "rounds", "kept", "kinds": [{"kind", "dispatches", "us"}, ...] (largest
    first)}. Moves the KV cache's row at the last position and the recurrent state: run it after the timed
    phases."""
    import js  # Pyodide's: this module runs in the engine only

    gpu = dec.gpu
    ops = dec.dl.ops
    labels = dec.dl.labels
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

    kinds = {}
    for op, label in zip(ops, labels):
        if op[0] == 0:
            kinds[kernel_kind(label)] = kinds.get(kernel_kind(label), 0) + 1
    variants = {"full": ops, "floor": variant(lambda k: True)}
    for k in kinds:
        if k not in KEPT_KINDS:
            variants[k] = variant(lambda kind, k=k: kind == k)

    h, dev = helper(), gpu.device
    pos = max(dec.pos - 1, 0)
    write_buffer(gpu, dec.step_buf, 0, struct.pack("<4I", 0, pos, pos + 1, 0))
    times = {name: [] for name in variants}
    loops = {name: [] for name in variants}  # the encode + submit loop alone: near the whole, the host paces
    try:
        for _ in range(rounds):
            for name, v in variants.items():
                h.replay(dev, v)  # untimed: the variant's first replay after another one
                await dev.queue.onSubmittedWorkDone()
                t0 = time.perf_counter()
                for _ in range(replays):
                    h.replay(dev, v)
                t1 = time.perf_counter()
                await dev.queue.onSubmittedWorkDone()
                times[name].append((time.perf_counter() - t0) / replays * 1e6)
                loops[name].append((t1 - t0) / replays * 1e6)
        h.replay(dev, ops)  # leave every buffer as the full list writes it
        await dev.queue.onSubmittedWorkDone()
    finally:
        sink.destroy()
    us = {name: median(t) for name, t in times.items()}
    table = sorted(({"kind": k, "dispatches": n, "us": round(us["full"] - us[k], 2)}
                    for k, n in kinds.items() if k in us), key=lambda r: -r["us"])
    return {"available": True, "full_us": round(us["full"], 2), "floor_us": round(us["floor"], 2),
            "full_cpu_us": round(median(loops["full"]), 2), "floor_cpu_us": round(median(loops["floor"]), 2),
            "replays": replays, "rounds": rounds, "kept": [k for k in KEPT_KINDS if k in kinds], "kinds": table}


__all__ = ["measure", "KEPT_KINDS"]
