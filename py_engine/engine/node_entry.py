"""Entry point of headless runs (`diskformer run`, tests): load models, feed ids, return the reference's JSON.

args (a dict, from JSON):
    {"model": PATH, "ids": [...], "teacher_force": [...] | null, "n": N | null, "top": 5, "kv": "f16" | "f32",
     "n_ctx": 2048, "logits_out": PATH | null}
or, to batch several models and sequences into one process, {"jobs": [{"model": ..., "kv": ..., "runs": [{"ids":
..., "teacher_force": ..., "n": ..., "top": ..., "logits_out": ...}, ...]}, ...]}.
Instead of "model", "store": FOLDER runs from a model store with the experts streamed (store_decoder.py); then
"budget" (bytes or "min"; absent: all experts resident), "upload" ("staging" | "writebuffer"), "policy",
"routing" ("auto" | "early_stop" | "per_layer"), "prefetch_depth", "prefetch_guess" ("lookahead" |
"previous"), "lookahead_source" ("h" | "xn"), "prefetch_wait" (bool), "pool_fraction", "max_pool_buffer" (cap
one pool buffer, to split small pools), "verify_pool" (check every slot afterwards) and "cpu_tier" (CPU workers
computing misses; "cpu_tier_place" "cost" | "all", "cpu_tier_max" per layer, "cpu_tier_url" the file URL of
web/cpu_tier/pool.js), "embedding_rows" (the token table's rows on demand through that many cache slots; 0:
resident; absent: the budget decides). "prefill_chunk": prompt
tokens per batched prefill chunk (default: 256 on a GPU, 64 on a CPU adapter; 1 = token by token), for either kind
of job; "ops_per_submit": submit
replays in pieces of that many ops (0: one submit; default: by adapter, see gpu/device.py), with "lead_ops" the
first piece's (0: as the others); "act": "q8" (default:
Q8_0 products quantise their input as llama.cpp does) or "f32" (f32 activations).

Step i scores the token after the prompt plus the first i fed ids: with teacher_force of k ids there are k + 1
steps; otherwise n greedy steps (default 1). logits_out receives every step's raw f32 logits, concatenated.
"""
import time

from ..gpu.commands import helper, set_submit_split
from ..gpu.device import open_gpu
from ..gpu.pipelines import Pipelines
from .decoder import Decoder
from .scoring import argmax, top_logprobs



def _chunk(job):
    """The job's prefill chunk, None for the engine's default (decoder.default_prefill_chunk)."""
    chunk = job.get("prefill_chunk")
    return None if chunk is None else int(chunk)

async def run_sequence(dec: Decoder, ids, teacher_force=None, n=None, top=5, logits_out=None) -> dict:
    if not ids:
        raise ValueError("ids is empty: give at least one prompt token")
    if teacher_force is not None and n is not None:
        raise ValueError("give either teacher_force or n, not both")
    dec.reset()
    t0 = time.perf_counter()
    rows = [await dec.step_prompt(ids)]  # waits for the whole prompt
    prefill_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    syncs0, ffi0 = dec.stats["syncs"], dec.stats["ffi_calls"]  # the engine's counters, for per-decoded-token figures
    if teacher_force is not None:
        for tok in teacher_force:
            rows.append(await dec.step(tok))
    else:
        for _ in range((n or 1) - 1):
            rows.append(await dec.step(argmax(rows[-1])))
    decode_ms = (time.perf_counter() - t1) * 1e3
    n_dec = len(rows) - 1
    n_layer = dec.model.cfg.n_layer
    per_token = {"syncs_per_decoded_token": (dec.stats["syncs"] - syncs0) / n_dec if n_dec else None,
                 "js_calls_per_decoded_token": (dec.stats["ffi_calls"] - ffi0) / n_dec if n_dec else None}
    per_token["js_calls_per_layer_per_token"] = (per_token["js_calls_per_decoded_token"] / n_layer
                                                 if n_dec else None)
    if logits_out:
        with open(logits_out, "wb") as f:
            for r in rows:
                f.write(r.tobytes())
    return {
        "greedy_ids": [argmax(r) for r in rows],
        "steps": [{"top": top_logprobs(r, top)} for r in rows],
        "timing": {"prompt_tokens": len(ids), "prefill_ms": prefill_ms, "decode_steps": len(rows) - 1,
                   "decode_ms": decode_ms, **per_token},
    }


async def open_store_job(job: dict, gpu, pipelines):
    """A decoder over a model store folder (job["store"]), experts streamed into a pool sized by job["budget"]
    (bytes, "min" for the smallest allowed, absent: every expert resident)."""
    from pathlib import Path

    from ..store.check import open_checked
    from ..store.local import DirectorySink
    from .store_decoder import StoreDecoder

    budget = job.get("budget")
    # header, layout and dense planes checked now; each expert record as it is read
    sink = job["checked_sink"] = await open_checked(DirectorySink(Path(job["store"])), job["store"],
                                                    check_records=job.get("check_records", True))
    return await StoreDecoder.open_store(
        sink, gpu, pipelines, n_ctx=int(job.get("n_ctx", 2048)),
        kv_format=job.get("kv", "f16"), lane_cap=int(job.get("lane_cap", 16)),
        budget_bytes=budget if budget in (None, "min") else int(budget), upload=job.get("upload", "staging"),
        policy=job.get("policy", "lru"), max_pool_buffer=job.get("max_pool_buffer"),
        routing=job.get("routing", "auto"), prefetch_depth=int(job.get("prefetch_depth", 0)),
        pool_fraction=job.get("pool_fraction"), prefill_chunk=_chunk(job),
        prefetch_guess=job.get("prefetch_guess", "lookahead"), lookahead_source=job.get("lookahead_source", "h"),
        prefetch_wait=bool(job.get("prefetch_wait", False)), q8_act=job.get("act", "q8") == "q8",
        cpu_tier=int(job.get("cpu_tier", 0)), cpu_tier_place=job.get("cpu_tier_place", "cost"),
        cpu_tier_max=job.get("cpu_tier_max"),
        cpu_tier_url=job.get("cpu_tier_url"), embedding_rows=job.get("embedding_rows"))


async def run_job(job: dict, gpu, pipelines) -> dict:
    if "ops_per_submit" not in job:
        return await _run_job(job, gpu, pipelines)
    before = int(helper().splitEvery), int(helper().leadOps)
    set_submit_split(gpu, int(job["ops_per_submit"]), int(job.get("lead_ops", before[1])))
    try:
        return await _run_job(job, gpu, pipelines)
    finally:
        set_submit_split(gpu, *before)


async def _run_job(job: dict, gpu, pipelines) -> dict:
    if job.get("store"):
        dec = await open_store_job(job, gpu, pipelines)
    else:
        dec = await Decoder.open(job["model"], gpu, pipelines, n_ctx=int(job.get("n_ctx", 2048)),
                                 kv_format=job.get("kv", "f16"), lane_cap=int(job.get("lane_cap", 16)),
                                 prefill_chunk=_chunk(job),
                                 q8_act=job.get("act", "q8") == "q8")
    try:
        runs = []
        for r in job["runs"]:
            runs.append(await run_sequence(dec, r["ids"], r.get("teacher_force"), r.get("n"), int(r.get("top", 5)),
                                           r.get("logits_out")))
        check = None
        if job.get("verify_pool"):  # read the whole pool back: every resident slot against its store record
            check = dict(await dec.pool.verify(dec.reader), **await dec.pool.read_status())
        out = {"runs": runs, "stats": dec.summary()}
        if job.get("checked_sink") is not None:
            out["stats"]["store_check"] = job.pop("checked_sink").stats
        if check is not None:
            out["pool_check"] = check
        return out
    finally:
        dec.release()


async def run(args: dict) -> dict:
    gpu = await open_gpu()
    pipelines = Pipelines(gpu)
    device = {"description": gpu.info.get("description"), "subgroups": [gpu.subgroup_min, gpu.subgroup_max],
              "max_binding": gpu.max_binding}
    if "jobs" in args:
        return {"jobs": [await run_job(j, gpu, pipelines) for j in args["jobs"]], "device": device}
    run_args = {k: args.get(k) for k in ("ids", "teacher_force", "n", "top", "logits_out")}
    run_args["top"] = run_args["top"] or 5
    job = {k: v for k, v in args.items()
           if k in ("model", "kv", "n_ctx", "lane_cap", "store", "budget", "upload", "routing", "prefill_chunk",
                    "check_records", "cpu_tier", "cpu_tier_url", "embedding_rows")}
    job["runs"] = [run_args]
    res = await run_job(job, gpu, pipelines)
    out = res["runs"][0]
    out["stats"] = dict(res["stats"], device=device, **out.pop("timing"))
    return out
