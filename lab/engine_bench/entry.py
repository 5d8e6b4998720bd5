"""The entry of `diskformer bench`, run inside Pyodide (Node + Dawn, or a browser worker): measures the engine exactly
as it decodes (Decoder.feed / Decoder.step) and the device's streaming-read bandwidth in the same process.

args: {"model": PATH, "prompt": P, "decode": N, "kv": "f16" | "f32", "stream_mb": MB | null, "profile": bool,
       "lane_cap": 16, "budgets": ["all", 0.25, 0.1], "store": FOLDER, "routing": "auto",
       "prefill_chunk": T | null (the engine's default), "prefill_reps": R (default 5), "queue_ahead": bool (greedy
       steps queued one ahead, the default; False: each step read back before the next is encoded), "steps_ahead":
       1 | 2 (queued steps behind the one read back), "tokens_per_submit": K (queued greedy tokens per submit,
       default 1 as generation runs them; Decoder.launch_argmax_run), "ops_per_submit": N | null (recorded
       operations per queue submit of prompt chunks and unqueued steps; queued steps go whole; null: the device's
       default, 0: one submit each), "lead_ops": N | null (operations in the first of those submits; null: the
       device's default, 0: ops_per_submit), "cost_replays": R (replays per variant of kernel_costs, which runs with the
       profile; 0: skip it)}
"ring_buffers": staging buffers of the streamed engines' upload ring (default 4, the engine's);
"cpu_tier": N CPU workers computing misses in the streamed cases ("cpu_tier_url": web/cpu_tier/pool.js's file URL);
"routing_trace": [[ids per layer] per step] | null: each fraction also runs with the decode routed by that trace
(trace_routing.py), reported beside the model-routed case.
"all" in budgets runs the GGUF engine with every expert resident ("resident_from_store": true: the store engine with
a pool holding every expert, as a tab runs it); each fraction runs the store engine with a pool of that share of
the experts (streaming.py; needs "store", a complete model store of the same GGUF: a folder, or "opfs:FOLDER" in a
tab, store_access.py).
Prefill feeds P tokens (P - 1 without readback, then one step that reads the logits back), timed after one untimed
warm-up prefill of the same prompt (its time is reported apart, "first_ms"; more for at least WARMUP_MIN_MS and
until two in a row agree within 10 %, at most WARMUP_PREFILLS: "warmup_ms"), "prefill_reps" times (default 5, as
llama-bench's repetitions: the mean of their tok/s; syncs and FFI calls counted over the last); decode steps N greedy
tokens, timing only Decoder.step (the bench's own argmax over the logits is outside the timed region).
Returns raw figures; the host (lab/bench.py) derives bounds and ratios and prints the table.
"""

import time

from py_engine.engine.decoder import Decoder
from py_engine.engine.store_decoder import StoreDecoder
from py_engine.gpu.commands import helper, set_submit_split
from py_engine.gpu.device import open_gpu
from py_engine.gpu.pipelines import Pipelines
from . import (accounting, dispatch_profile, gc_clock, host_steal_clock, js_gc_clock, kernel_costs, store_access,
               stream_read, streaming, timing)

WARMUP_TOKENS = 2  # the first submit compiles every pipeline: keep it out of the timings
WARMUP_PREFILLS = 16  # untimed prompts at most before the timed ones (the first one after load reported apart)
WARMUP_MIN_MS = 500.0  # warm-up prompts' time at least (the first after load not counted): a GPU's clock ramp


def prompt_ids(n: int, n_vocab: int) -> list:
    """A fixed pseudo-random prompt (the same ids on every run and device)."""
    return [(7919 * i + 104729) % n_vocab for i in range(1, n + 1)]


def counters(dec) -> dict:
    return {k: dec.stats[k] for k in ("syncs", "ffi_calls")}


def webgpu_calls(dl, queued: bool = False) -> int:
    """JS -> WebGPU calls the replay helper makes per token (py_engine/gpu/commands.py): per dispatch a bind group
    and the dispatch, plus the pipeline where it changes; 2 per compute pass (begin, end), 1 per copy; per submitted
    piece an encoder, finish and submit (and the pass it reopens; `queued` steps go in one piece); plus the
    writeBuffer of the step's parameters (not for queued steps: the step before left them on the GPU), the result's
    copy, map, getMappedRange and unmap."""
    from py_engine.gpu.commands import piece_bounds

    starts = {start for start, _ in piece_bounds(dl.count, queued)}
    calls, in_pass, pipeline = 4 if queued else 5, False, None
    for i, op in enumerate(dl.ops):
        if i and i in starts:  # a new piece: finish + submit, a new encoder
            calls += 3 + (1 if in_pass else 0)
            in_pass = False
        if op[0] == 0:
            if not in_pass:
                calls += 2
                pipeline = None
            calls += 2 + (op[1] != pipeline)
            pipeline = op[1]
            in_pass = True
        else:
            calls += 1 + (1 if in_pass else 0)  # the copy, and ending the pass before it
            in_pass = False
    return calls + 3  # the first encoder, finish and submit


def state_layout(dec) -> tuple:
    """(f32 values of recurrent state, layers holding it, delta-rule state values per layer)."""
    values, per_layer, layers = 0, 0, 0
    for name, n in dec.model.work_buffers():
        if name.startswith(accounting.STATE_PREFIXES):
            values += n
            if name.startswith("ssm_state."):
                layers += 1
                per_layer = n
    return values, layers, per_layer


def gpu_bytes(dec, header) -> dict:
    w = accounting.weight_bytes(header, dec.model.cfg.n_layer)
    experts = w["experts"]
    state_values = state_layout(dec)[0]
    kv_state = dec.cache.nbytes + 4 * state_values + dec.stats.get("checkpoint_bytes", 0)  # + the state's copies
    work = dec.acts.nbytes - 4 * state_values + dec.staging.size
    # the GGUF engine's loader uploads the experts too; the store engine's pool fills apart from its loader
    dense = dec.loader.bytes_uploaded - (0 if isinstance(dec, StoreDecoder) else experts)
    return {"dense_weights": dense, "experts": experts, "kv_state": kv_state, "work_buffers": work,
            "total": dense + experts + kv_state + work}


async def run(args: dict) -> dict:
    """The resident case (budget "all") as before, then one streaming case per pool fraction in args["budgets"]
    (those need args["store"], the model's store folder)."""
    n_prompt, n_decode = int(args.get("prompt", 512)), int(args.get("decode", 128))
    if n_prompt < 1 or n_decode < 1:
        raise ValueError("prompt and decode must be >= 1 token")
    budgets = args.get("budgets") or ["all"]
    fractions = [float(b) for b in budgets if b != "all"]
    if fractions and not args.get("store"):
        raise ValueError("the streaming cases need a model store (args['store'])")
    steal = host_steal_clock.HostStealClock()
    steal0, t0 = steal.now(), time.perf_counter()
    gpu = await open_gpu()
    set_submit_split(gpu, args.get("ops_per_submit"), args.get("lead_ops"))  # None: the device's default
    pipes = Pipelines(gpu)
    mb = args.get("stream_mb")
    stream = await stream_read.measure(gpu, int(mb) << 20 if mb else None)
    out = await run_resident(args, gpu, pipes, stream) if "all" in budgets else {
        "device": describe(gpu), "stream": stream}
    n_ctx = n_prompt + n_decode + WARMUP_TOKENS
    cases = []
    trace = args.get("routing_trace") or None
    run = streaming.StreamingRun(args.get("store"), lambda n_vocab: prompt_ids(n_prompt, n_vocab), n_decode, n_ctx,
                                 args.get("kv", "f16"), int(args.get("lane_cap", 16)), WARMUP_TOKENS,
                                 args.get("routing", "auto"), int(args.get("ring_buffers") or 4),
                                 {"cpu_tier": int(args["cpu_tier"]), "cpu_tier_url": args.get("cpu_tier_url")}
                                 if args.get("cpu_tier") else None)
    for f in fractions:
        for source in ("model", "trace") if trace else ("model",):
            cases.append(await streaming.run_case(gpu, pipes, run, f, trace=trace if source == "trace" else None,
                                                  limits=source == "model"))
    out["streaming"] = cases
    out["host_steal"] = {**steal.spent(steal0, steal.now()), "run_s": round(time.perf_counter() - t0, 3)}
    return out


def describe(gpu) -> dict:
    return {"description": gpu.info.get("description"), "vendor": gpu.info.get("vendor"),
            "architecture": gpu.info.get("architecture"), "fallback": gpu.info.get("isFallbackAdapter"),
            "subgroups": [gpu.subgroup_min, gpu.subgroup_max], "max_binding": gpu.max_binding,
            "timestamp_query": "timestamp-query" in gpu.features,
            # how prompt chunks and unqueued steps are cut into submits (commands.recordSplit)
            "ops_per_submit": int(helper().splitEvery), "lead_ops": int(helper().leadOps)}


async def open_resident(args: dict, gpu, pipes, n_ctx: int, chunk: dict) -> tuple:
    """(decoder, engine name) of the resident case: the GGUF engine over args["model"] ("gguf"), or with
    args["resident_from_store"] the store engine with a pool holding every expert ("store_full_pool"): a tab cannot
    hold a file larger than wasm memory, so there the store in OPFS serves the resident case too."""
    kw = {"n_ctx": n_ctx, "kv_format": args.get("kv", "f16"), "lane_cap": int(args.get("lane_cap", 16)), **chunk}
    if not args.get("resident_from_store"):
        return await Decoder.open(args["model"], gpu, pipes, **kw), "gguf"
    sink, reader = await store_access.open_store(args["store"])
    try:
        dec = await StoreDecoder.open_store(sink, gpu, pipes, pool_fraction=1.0, reader=reader, **kw)
    except BaseException:
        if reader is not None:
            reader.release()
        raise
    if not dec.plan.full:
        dec.release()
        raise ValueError("the GPU cannot hold every expert of this model: the resident case needs a full pool")
    return dec, "store_full_pool"


async def run_resident(args: dict, gpu, pipes, stream) -> dict:
    n_prompt, n_decode = int(args.get("prompt", 512)), int(args.get("decode", 128))
    n_ctx = n_prompt + n_decode + WARMUP_TOKENS
    chunk = {"prefill_chunk": int(args["prefill_chunk"])} if args.get("prefill_chunk") else {}
    dec, engine = await open_resident(args, gpu, pipes, n_ctx, chunk)
    try:
        if dec.cache.n_ctx < n_ctx:
            raise ValueError(f"prompt + decode = {n_ctx} tokens exceed the model's context ({dec.cache.n_ctx})")
        ids = prompt_ids(n_prompt, dec.n_vocab)
        for t in ids[:WARMUP_TOKENS]:
            await dec.step(t)
        dec.reset()
        # the first prompt after load also pays one-off costs on the chunk list (the driver's first use of each
        # chunk pipeline, buffers cleared on first use): timed apart, as llama-bench's warm-up run; then warm-up
        # prompts for at least WARMUP_MIN_MS in all and until two in a row agree within 10 % (at most
        # WARMUP_PREFILLS): the H200 idles at a 345 MHz SM clock and reaches its 1,980 only after ~0.2-0.3 s of
        # work, the prompts before that taking ~5x the steady time, alike
        # (docs/results/2026-12-03-h200-prefill-chunk.json)
        warmup_ms = []
        if dec.prefill is not None:
            while len(warmup_ms) < WARMUP_PREFILLS:
                warmup_ms.append((await timing.time_prefill(dec, ids))[1]["ms"])
                dec.reset()
                if (len(warmup_ms) >= 3 and sum(warmup_ms[1:]) >= WARMUP_MIN_MS
                        and abs(warmup_ms[-1] - warmup_ms[-2]) <= 0.1 * warmup_ms[-2]):
                    break
        cold_ms = warmup_ms[0] if warmup_ms else None

        # step by step: each greedy step read back before the next is encoded (the prefill as generation runs it)
        queued = bool(getattr(dec, "chains", False)) and args.get("queue_ahead", True)
        ahead = int(args.get("steps_ahead", 1))
        per_submit = int(args.get("tokens_per_submit", 1)) if queued else 1
        with gc_clock.GcClock() as gcc, js_gc_clock.JsGcClock() as jgc:
            reps, step_ms, (c0, c1, c2), parts = await timing.time_prefill_and_decode(
                dec, ids, n_decode, lambda d: {**counters(d), **gcc.snapshot(), "js_now": jgc.now()},
                int(args.get("prefill_reps", 5)), ahead, per_submit, jgc.collect, queued)
            await jgc.settle()
        if not queued:
            dec.chains = False  # so step_passes (queued steps' timestamps) says the decode was not queued
        reps_ms = [r["ms"] for r in reps]

        # after the timed phases: these replays move the cache and the recurrent state
        want = args.get("profile", True)
        passes = (await timing.step_passes(dec, ids, n_decode, ahead) if want else
                  {"available": False, "reason": "not asked"})
        prof = await dispatch_profile.profile(dec) if want else {"available": False, "reason": "not asked"}
        rate = await timing.replay_rate(dec)
        cost_replays = int(args.get("cost_replays", 20))
        costs = (await kernel_costs.measure(dec, cost_replays) if want and cost_replays > 0 else
                 {"available": False, "reason": "not asked"})
        pre_prof = {"available": False, "reason": "not asked" if not want else "token-by-token prefill"}
        if want and dec.prefill is not None and dec.prefill.T <= n_prompt:
            pre_prof = await dispatch_profile.profile_prefill(dec, (n_prompt // 2 // dec.prefill.T) * dec.prefill.T)
        header = dec.loader.header
        cfg = dec.model.cfg
        kv_elt = 2 if dec.kv_format == "f16" else 4
        n_kv = getattr(dec.model, "n_kv_layers", cfg.n_layer)
        sv, s_layers, s_per_layer = state_layout(dec)

        def tokens_cost(ctx):
            return accounting.per_token(header, cfg, n_kv, kv_elt, sv, ctx, s_layers, s_per_layer)

        # decode attends to n_prompt + 1 .. n_prompt + n_decode positions; prefill to 1 .. n_prompt
        decode_cost = tokens_cost(n_prompt + (n_decode + 1) / 2)
        prefill_cost = tokens_cost((n_prompt + 1) / 2)
        decode_total = sum(step_ms)
        return {
            "device": describe(gpu),
            "resident_engine": engine,
            "model": {"path": args["model"], "arch": dec.stats.get("arch"), "n_layer": cfg.n_layer,
                      "n_embd": cfg.n_embd, "n_vocab": cfg.n_vocab, "n_expert": cfg.n_expert,
                      "n_expert_used": cfg.n_expert_used, "n_kv_layers": n_kv, "kv": dec.kv_format},
            "stream": stream,
            "load_ms": round(dec.stats["load_ms"], 1),
            # as llama-bench: the mean of the repetitions' tok/s (each from an empty context, after the warm-up)
            "prefill": {"tokens": n_prompt, "ms": round(sum(reps_ms) / len(reps_ms), 3),
                        "tok_s": sum(n_prompt / ms * 1e3 for ms in reps_ms) / len(reps_ms),
                        "reps_ms": [round(ms, 3) for ms in reps_ms],
                        "reps_feed_ms": [round(r["feed_ms"], 3) for r in reps],
                        "read_back": reps[-1]["read_back"],
                        "chunk": dec.stats.get("prefill_chunk"),
                        "first_ms": None if cold_ms is None else round(cold_ms, 3),
                        "warmup_ms": [round(ms, 3) for ms in warmup_ms],
                        "syncs": c1["syncs"] - c0["syncs"], "ffi_calls": c1["ffi_calls"] - c0["ffi_calls"],
                        "flops_per_token": prefill_cost["flops"], "gc": gc_clock.spent(c0, c1),
                        "js_gc": jgc.spent(c0["js_now"], c1["js_now"])},
            "decode": {"tokens": n_decode, "ms": round(decode_total, 3), "tok_s": n_decode / decode_total * 1e3,
                       "queued_ahead": queued,
                       "steps_ahead": ahead if queued else 0,
                       "tokens_per_submit": per_submit,
                       "ms_median": round(stream_read.median(step_ms), 4), "ms_min": round(min(step_ms), 4),
                       "ms_p90": round(sorted(step_ms)[(9 * len(step_ms)) // 10], 4),
                       # every step, and with queued steps its launch (the next step's encode + submit) and wait
                       "steps_ms": [round(ms, 4) for ms in step_ms],
                       **{k: [round(ms, 4) for ms in v] for k, v in parts.items()},
                       **{k + "_median": round(stream_read.median(v), 4) for k, v in parts.items() if v},
                       "syncs": c2["syncs"] - c1["syncs"], "ffi_calls": c2["ffi_calls"] - c1["ffi_calls"],
                       "gc": gc_clock.spent(c1, c2), "js_gc": jgc.spent(c1["js_now"], c2["js_now"])},
            "dispatches_per_token": dec.dl.count,
            "webgpu_calls_per_token": webgpu_calls(dec.dl, queued=queued),
            "gpu_bytes": gpu_bytes(dec, header),
            "per_token": decode_cost,
            "profile": prof,
            "step_passes": passes,
            "replay_rate": rate,
            "kernel_costs": costs,
            "prefill_profile": pre_prof,
        }
    finally:
        dec.release()

