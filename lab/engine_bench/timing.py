"""The timed part of a bench case, shared by the resident (entry.py) and streaming (streaming.py) cases."""
import itertools
import struct
import time

from py_engine.engine.decoder import STEPS_IN_FLIGHT
from py_engine.engine.scoring import argmax
from .stream_read import median


async def time_prefill(dec, ids):
    """One prefill of `ids` from an empty context, as generation runs it: the prompt fed and its last token's greedy
    id read back (Decoder.launch_prompt_argmax where the decoder chains: with a batched prefill the whole prompt
    through the chunks, the last row through the output head), else its logits row. Returns (the first decoded
    token, {"ms": the whole, "feed_ms": until the prompt was encoded and submitted, before the wait, "read_back":
    "greedy id" or "logits row"})."""
    t0 = time.perf_counter()
    logits = None
    if getattr(dec, "chains", False):
        handle = dec.launch_prompt_argmax(ids)
        t1 = time.perf_counter()
        tok = int((await dec.collect_argmax(handle))[0])
    else:
        dec.feed(ids[:-1])
        t1 = time.perf_counter()
        logits = await dec.step(ids[-1])
    t2 = time.perf_counter()
    if logits is not None:
        tok = argmax(logits)  # outside the timed prefill
    return tok, {"ms": (t2 - t0) * 1e3, "feed_ms": (t1 - t0) * 1e3,
                 "read_back": "greedy id" if logits is None else "logits row"}


async def time_prefill_and_decode(dec, ids, n_decode: int, snapshot, prefill_reps: int = 1, ahead: int = 1,
                                  per_submit: int = 1, before_phase=None, queue_decode: bool = True):
    """Prefill `ids` (time_prefill) `prefill_reps` times, each from an empty context (as llama-bench repeats its
    prompt), then `n_decode` greedy steps after the last, timing each as greedy
    generation runs them: queued one ahead (Decoder.launch_argmax; `ahead` steps, and `per_submit` tokens a submit,
    see queued_steps) where the
    decoder chains, else
    Decoder.step_argmax where the engine has it (only the token id comes back), else a logits row per step.

    Returns (prefill_reps: [{"ms", "feed_ms"}, ...], step_ms, (before, after_prefill, after_decode), parts):
    `snapshot(dec)` taken around the last prefill and the decode, so the caller can count what each phase did
    (syncs, FFI calls, bytes read); with queued steps, parts = {"launch_ms", "wait_ms"}: per step the time spent
    queueing the next step (its encode + submit) and then waiting for this step's result (empty lists otherwise).
    A step's time is their sum: the wait is near zero where the host paces the decode, the launch's complement to
    the GPU's step where the GPU does. `before_phase`: None, or a coroutine function awaited before each timed
    prefill and before the decode, outside their times (JsGcClock.collect). `queue_decode` False: the decode step by
    step (each step read back before the next is encoded) even where the decoder chains; the prefill stays as
    generation runs it."""
    reps = []
    for r in range(prefill_reps):
        if r:
            dec.reset()
        if before_phase is not None:
            await before_phase()
        s0 = snapshot(dec)
        tok, rep = await time_prefill(dec, ids)
        reps.append(rep)
    s1 = snapshot(dec)
    if before_phase is not None:
        await before_phase()

    step_ms = []
    parts = {"launch_ms": [], "wait_ms": []}
    if queue_decode and getattr(dec, "chains", False) and n_decode > 0:
        step_ms, parts, _ = await queued_steps(dec, tok, n_decode, ahead, per_submit)
        return reps, step_ms, (s0, s1, snapshot(dec)), parts
    # every expert resident: the GPU's argmax read back (8 bytes a token); streamed pools read the logits anyway
    # and their Python argmax stays outside the timed step
    greedy = dec.step_argmax if getattr(dec, "routing", "gpu") == "gpu" else None
    for _ in range(n_decode):
        t = time.perf_counter()
        if greedy is not None:
            tok, _ = await greedy(tok)
            step_ms.append((time.perf_counter() - t) * 1e3)
        else:
            logits = await dec.step(tok)
            step_ms.append((time.perf_counter() - t) * 1e3)
            tok = argmax(logits)  # outside the timed step
    return reps, step_ms, (s0, s1, snapshot(dec)), parts


async def queued_steps(dec, tok, n: int, ahead: int = 1, per_submit: int = 1):
    """`n` greedy steps after `tok` as greedy generation runs them (GpuBackend.decode_step): each queued behind the
    previous one, fed with its argmax on the GPU. With `ahead` > 1 (up to STEPS_IN_FLIGHT - 1) that many steps stay
    queued behind the one read back, so that a late readback of one step cannot leave the GPU without work.
    Returns (step_ms, {"launch_ms", "wait_ms", "encode_ms", "submit_ms"}, the greedy ids): a step's time is from
    the previous step's result to its own; encode_ms / submit_ms split each launch as the replay helper timed it
    (its JS encode up to the finished command buffer; Dawn's submit and the map request), so the rest of the launch
    is Python's and the FFI's. per_submit > 1: the steps go in runs of that many tokens a submit
    (Decoder.launch_argmax_run; `ahead` runs queued behind the one read back), and every figure is per token: a
    run's times shared evenly by its tokens."""
    if not 1 <= ahead < STEPS_IN_FLIGHT:
        raise ValueError(f"steps ahead: {ahead} (1 to {STEPS_IN_FLIGHT - 1})")
    import js

    from py_engine.gpu.commands import helper

    step_ms, parts, ids = [], {"launch_ms": [], "wait_ms": []}, []
    sizes = [min(per_submit, n - i) for i in range(0, n, per_submit)]  # tokens per submit, the last run shorter
    times = helper().stepTimes = js.Array.new()
    try:
        t = time.perf_counter()
        # a run of one token is launch_argmax's step (Decoder._launch either way)
        handles = [dec.launch_argmax_run(sizes[0], tok)]
        launched_n = 1
        for size in sizes:
            while launched_n < len(sizes) and len(handles) <= ahead:
                handles.append(dec.launch_argmax_run(sizes[launched_n]))
                launched_n += 1
            launched = time.perf_counter()
            ids.extend(i for i, _ in await dec.collect_argmax_run(handles.pop(0)))
            now = time.perf_counter()
            step_ms.extend([(now - t) * 1e3 / size] * size)
            parts["launch_ms"].extend([(launched - t) * 1e3 / size] * size)
            parts["wait_ms"].extend([(now - launched) * 1e3 / size] * size)
            t = now
    finally:
        helper().stepTimes = None
    pairs = times.to_py()  # (encode, submit) of each run, in launch order
    parts["encode_ms"] = [pairs[2 * j] / size for j, size in enumerate(sizes) for _ in range(size)]
    parts["submit_ms"] = [pairs[2 * j + 1] / size for j, size in enumerate(sizes) for _ in range(size)]
    return step_ms, parts, ids


def submit_pieces(dl, whole: bool = False) -> list:
    """The compute passes of each piece the replay helper submits one token's list in (commands.recordSplit,
    leadOps then splitEvery ops a piece, or with `whole` one piece, as queued steps go; a copy between dispatches
    ends a pass)."""
    from py_engine.gpu.commands import piece_bounds

    kinds = [op[0] for op in dl.ops]
    out = []
    for start, end in piece_bounds(len(kinds), whole):
        piece = kinds[start:end]
        out.append(sum(1 for i, k in enumerate(piece) if k == 0 and (i == 0 or piece[i - 1] != 0)))
    return out


async def step_passes(dec, ids, n: int, ahead: int = 1) -> dict:
    """Whether the GPU idles between queued greedy steps: the prompt prefilled again, then `n` steps queued as
    generation queues them (queued_steps) with timestamps on each submitted piece of a token (the start of its first
    compute pass, the end of its last). Per step: its span on the GPU (first dispatch's start to last's end), the
    pieces' busy time within it (the rest: the GPU's gaps at the token's own submit boundaries), and the gap from
    its end to the next step's start (the step's copies, the queue's submit boundary, any wait for the host).
    Moves the cache: run it after the timed phases."""
    from py_engine.gpu.jsutil import js_object
    from .dispatch_profile import MAX_QUERIES, read_timestamps, timestamp_queries

    gpu = dec.gpu
    if "timestamp-query" not in gpu.features:
        return {"available": False, "reason": "the device has no 'timestamp-query' feature"}
    if not getattr(dec, "chains", False):
        return {"available": False, "reason": "steps are not queued ahead"}
    pieces = submit_pieces(dec.dl, whole=True)  # queued steps go in one submit (Decoder._launch)
    if 0 in pieces:
        return {"available": False, "reason": "a submitted piece of the token has no dispatch to time"}
    per_step = 2 * len(pieces)
    n = min(n, MAX_QUERIES // per_step)
    qs, resolve, read = timestamp_queries(gpu, per_step * n, "step_passes")
    try:
        dec.reset()
        tok, _ = await time_prefill(dec, ids)
        launched = itertools.count()
        # each step's queries from per_step · its index on (commands.recordSplit: 2 a piece)
        dec.step_stamps = lambda: js_object({"querySet": qs, "base": per_step * next(launched)})
        try:
            step_ms, parts, _ = await queued_steps(dec, tok, n, ahead)
        finally:
            dec.step_stamps = None
        t = await read_timestamps(gpu, qs, resolve, read, per_step * n)
    finally:
        for b in (qs, resolve, read):
            b.destroy()
    first = [t[per_step * i] for i in range(n)]
    last = [t[per_step * i + per_step - 1] for i in range(n)]
    span_us = [(last[i] - first[i]) / 1e3 for i in range(n)]
    busy_us = [sum(t[per_step * i + 2 * p + 1] - t[per_step * i + 2 * p] for p in range(len(pieces))) / 1e3
               for i in range(n)]
    gap_us = [(first[i + 1] - last[i]) / 1e3 for i in range(n - 1)]
    period_us = [(first[i + 1] - first[i]) / 1e3 for i in range(n - 1)]

    def med(v):
        return round(median(v), 2) if v else None

    return {"available": True, "steps": n, "pieces_per_token": len(pieces),
            "passes_per_token": sum(pieces),
            "span_us_median": med(span_us), "busy_us_median": med(busy_us),
            "inner_gaps_us_median": med([a - b for a, b in zip(span_us, busy_us)]),
            "gap_us_median": med(gap_us), "period_us_median": med(period_us),
            "gap_us_p90": round(sorted(gap_us)[(9 * len(gap_us)) // 10], 2) if gap_us else None,
            "step_ms_median": round(median(step_ms), 4), "launch_ms_median": round(median(parts["launch_ms"]), 4),
            "span_us": [round(x, 2) for x in span_us], "busy_us": [round(x, 2) for x in busy_us],
            "gap_us": [round(x, 2) for x in gap_us]}


async def replay_rate(dec, n: int = 50) -> dict:
    """Whether the CPU or the GPU sets the decode pace: `n` back-to-back replays of the token's list (no readback,
    the same step words each time), timing the JS encode + submit loop alone and then until the GPU is done. CPU µs
    per token close to the total means encoding the ~dispatches (WebGPU calls) is the limit; far below it, the
    GPU's own time (kernels, launches, barriers) is. Then the same list encoded `n` times, each into a command
    buffer finished but never submitted: the WebGPU calls and their validation alone, without the submits (where the
    implementation turns the commands into the driver's)."""
    from py_engine.gpu.buffers import write_buffer
    from py_engine.gpu.commands import helper

    h, dev = helper(), dec.gpu.device
    write_buffer(dec.gpu, dec.step_buf, 0, struct.pack("<4I", *dec.replay_step_words()))
    await dev.queue.onSubmittedWorkDone()
    t0 = time.perf_counter()
    for _ in range(n):
        h.replay(dev, dec.dl.ops)
    t1 = time.perf_counter()
    await dev.queue.onSubmittedWorkDone()
    t2 = time.perf_counter()
    for _ in range(n):
        enc = dev.createCommandEncoder()
        h.record(enc, dec.dl.ops)
        enc.finish()
    t3 = time.perf_counter()
    return {"replays": n, "cpu_us_per_token": round((t1 - t0) / n * 1e6, 2),
            "total_us_per_token": round((t2 - t0) / n * 1e6, 2),
            "encode_only_us_per_token": round((t3 - t2) / n * 1e6, 2)}
