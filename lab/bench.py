"""`diskformer bench MODEL.gguf`: the engine's speed as shipped (Pyodide + Dawn in Node), against its bandwidth bound.

One Node process measures, in this order: the streaming-read bandwidth of the device
(lab/engine_bench/shaders/bench_stream_read.wgsl, the fastest any kernel can read weights there), the model's load,
a P-token prefill, N greedy decode steps, and, where the device has timestamp queries, each kernel's GPU time in one
token. Printed: a readable table, then the whole result as one JSON line (also written to --json-out).

Derived figures: bytes per decoded token (dense weights + the top-k experts of every layer + the KV rows read + the
recurrent state), the bound = those bytes / the streaming bandwidth, achieved GB/s = bytes per token x decode tok/s,
and measured / bound.

Expert budgets (--budgets all,0.25,0.10): "all" is the GGUF engine with every expert resident; a fraction f runs
the engine from a model store (the GGUF ingested once into --store-dir, reused when complete) with a GPU pool
holding f of all experts, the rest paged in from experts.bin (StoreDecoder). Per fraction: prefill and decode tok/s,
hit rate, bytes read and syncs per decoded token (demanded misses apart from prefetches, and the prefetches read but
never used), the miss path's stage limits measured in the same run (parallel reads through the engine's reader,
staging-ring uploads at the engine's batch sizes, host memory copy) and the pipelined bound = the slowest stage's
limit / bytes read per token (stages overlapped), with each stage's achieved rate (bytes read per token x decode
tok/s) over its limit; the serial bound (one record read, then uploaded) beside it.
--routing-trace: each fraction also runs with the decode's routed ids taken from a trace with the reuse published
for real routers (lab/policy_lab/traces.py), reported beside the model-routed case ("10%" and "10% trace").
"""
import argparse
import json
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from diskformer.engine_run import CPU_TIER_POOL
from diskformer.node_engine import NodeEngineError, run_in_node

from . import ENGINE_SIDE
from .bench_table import PEERS, table
from .bench_streaming import derive_budgets, describe_run, model_info, routing_trace
from .browser_bench.tab import BROWSERS, TabBenchError, TabOptions, run_in_tab, tab_summary

ENTRY = "lab.engine_bench.entry:run"
DEFAULT_BUDGETS = "all,0.25,0.10"
ROUTINGS = ("auto", "early_stop", "per_layer")
# Timestamps are rounded to 65.5 us by Dawn unless this toggle is off: too coarse for 5-50 us kernels.
PROFILE_DAWN_OPTS = "disable-dawn-features=timestamp_quantization"


def parse_budgets(text: str) -> list:
    """"all,0.25,0.10" -> ["all", 0.25, 0.1]; each fraction in (0, 1), no repeats."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part == "all":
            item = "all"
        else:
            try:
                item = float(part.rstrip("%")) / (100 if part.endswith("%") else 1)
            except ValueError:
                raise ValueError(f"budget {part!r}: give 'all' or a fraction of the experts such as 0.25") from None
            if not 0 < item < 1:
                raise ValueError(f"budget {part!r}: a fraction of the experts must lie between 0 and 1 "
                                 f"(use 'all' for every expert resident)")
        if item in out:
            raise ValueError(f"budget {part!r} is given twice")
        out.append(item)
    if not out:
        raise ValueError("no budgets given")
    return out


def default_store_dir(model: Path) -> Path:
    """Under the system temp folder, one per model file (its name and size): the ingest reuses a complete store
    of the same source and starts over for another."""
    return Path(tempfile.gettempdir()) / "diskformer-bench-stores" / f"{model.stem}-{model.stat().st_size}"


def ensure_store(model: Path, store_dir: Path, log=print) -> dict:
    """Ingest `model` into `store_dir` (a no-op when it already holds a complete store of that file); returns the
    manifest."""
    from py_engine.store import ingest
    from py_engine.store.local import DirectoryStorage, FileSource

    store_dir.parent.mkdir(parents=True, exist_ok=True)
    src = FileSource(model)
    try:
        return asyncio.run(ingest(src, DirectoryStorage(store_dir.parent).sink(store_dir.name), log=log))
    finally:
        src.close()


def derive(raw: dict) -> dict:
    """The figures the table prints, from the entry's raw measurements."""
    budgets = derive_budgets(raw.get("streaming", []))
    if "prefill" not in raw:  # the resident case was not asked for
        return {"budgets": budgets}
    pre, dec, per = raw["prefill"], raw["decode"], raw["per_token"]
    bw = raw["stream"]["GBps"] * 1e9
    bound_tok_s = bw / per["total"] if per["total"] else None
    achieved = per["total"] * dec["tok_s"]
    out = {
        "prefill_tok_s": pre["tok_s"],
        "decode_tok_s": dec["tok_s"],
        "decode_ms_per_token": dec["ms"] / dec["tokens"],
        "prefill_gflops": pre["tok_s"] * pre["flops_per_token"] / 1e9,
        "syncs_per_token": {"prefill": pre["syncs"] / pre["tokens"], "decode": dec["syncs"] / dec["tokens"]},
        "ffi_calls_per_token": {"prefill": pre["ffi_calls"] / pre["tokens"],
                                "decode": dec["ffi_calls"] / dec["tokens"]},
        "dispatches_per_token": raw["dispatches_per_token"],
        "bytes_per_token": per["total"],
        "stream_GBps": raw["stream"]["GBps"],
        "bound_ms_per_token": per["total"] / bw * 1e3,
        "bound_tok_s": bound_tok_s,
        "achieved_GBps": achieved / 1e9,
        "measured_over_bound": dec["tok_s"] / bound_tok_s if bound_tok_s else None,
        "budgets": budgets,
    }
    prof = raw.get("profile") or {}
    if prof.get("available"):
        busy_ms = prof["busy_us"] / 1e3
        out["gpu_busy_ms_per_token"] = busy_ms
        out["gpu_busy_share_of_wall"] = busy_ms / out["decode_ms_per_token"]
        out["overhead_us_per_dispatch"] = (out["decode_ms_per_token"] - busy_ms) * 1e3 / raw["dispatches_per_token"]
        # the kernels alone against the bound: how far the GPU work itself is from a plain streaming read
        out["bound_over_gpu_busy"] = out["bound_ms_per_token"] / busy_ms if busy_ms else None
    costs = raw.get("kernel_costs") or {}
    if costs.get("available"):
        out.update(dispatch_floor(costs, out["bound_ms_per_token"] * 1e3, raw["dispatches_per_token"]))
    return out


def dispatch_floor(costs: dict, bound_us: float, dispatches: int) -> dict:
    """What the token's dispatch list leaves of the bound, from the in-pass costs (µs a token in the token's own
    pass): with every kernel at its bytes' time and its launch and barrier as measured (launches + barriers alone),
    measured/bound could reach at most `ceiling_over_bound`; `beyond_bytes_us_per_dispatch` is what the kernels
    take past their bytes' time and their launches, per dispatch; `half_bound_leaves_us_per_dispatch` what a token
    in twice the bound (0.50 of it) would leave them, gaps between tokens aside."""
    floor = costs["floor_us"]
    return {"launch_floor_us": floor,
            "ceiling_over_bound": bound_us / (bound_us + floor),
            "beyond_bytes_us_per_dispatch": (costs["full_us"] - floor - bound_us) / dispatches,
            "half_bound_leaves_us_per_dispatch": (bound_us - floor) / dispatches}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="diskformer bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", "-m", required=True, type=Path, help="a GGUF the engine runs (qwen3moe, qwen35moe)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens for prefill (default 512)")
    ap.add_argument("--decode", type=int, default=128, help="greedy tokens to decode (default 128)")
    ap.add_argument("--kv", choices=("f16", "f32"), default="f16", help="KV cache precision (default f16)")
    ap.add_argument("--stream-mb", type=int, default=None,
                    help="MiB read by the bandwidth kernel (default 1024, capped by the binding limit)")
    ap.add_argument("--budgets", default=DEFAULT_BUDGETS,
                    help="'all' (every expert resident) and/or fractions of the experts the streamed pool holds "
                         f"(default {DEFAULT_BUDGETS})")
    ap.add_argument("--store-dir", type=Path, default=None,
                    help="model store folder for the fraction cases (ingested from the GGUF once, reused when "
                         "complete; default: a folder per model under the system temp folder)")
    ap.add_argument("--routing", choices=ROUTINGS, default="auto", help="routing of the streamed cases")
    ap.add_argument("--cpu-tier", type=int, default=0, metavar="N",
                    help="the streamed cases compute misses on N CPU workers where the cost model says so (0: off); "
                         "reports the share of misses computed on the CPU")
    ap.add_argument("--routing-trace", action="store_true",
                    help="also run each pool fraction with the decode routed by a trace at the reuse published for "
                         "real routers (lab/policy_lab/traces.py), reported beside the model's routing")
    ap.add_argument("--trace-seed", type=int, default=0, help="seed of the routing trace (default 0)")
    ap.add_argument("--ring-buffers", type=int, default=4,
                    help="staging buffers of the streamed cases' upload ring (default 4, the engine's default)")
    ap.add_argument("--prefill-chunk", type=int, default=None,
                    help="prompt tokens per prefill chunk in the resident case (default: the engine's)")
    ap.add_argument("--prefill-reps", type=int, default=5,
                    help="timed prefills of the prompt, each from an empty context (default 5, as llama-bench's "
                         "repetitions; prefill tok/s is their mean)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel timestamp profiles")
    ap.add_argument("--cost-replays", type=int, default=20,
                    help="with the profile: replays of the token's list per command buffer, timed on the GPU, for "
                         "each variant of the in-pass kernel costs (each kernel kind swapped for empty dispatches; "
                         "default 20, 0: skip them)")
    ap.add_argument("--step-by-step", action="store_true",
                    help="resident decode reads each step back before encoding the next (default: greedy steps "
                         "queued one ahead, as generation runs them)")
    ap.add_argument("--steps-ahead", type=int, default=1, choices=(1, 2),
                    help="queued decode: greedy steps queued behind the one being read back (default 1, as "
                         "generation runs them; 2 shows whether the GPU waits for the host between steps)")
    ap.add_argument("--tokens-per-submit", type=int, default=1,
                    help="queued decode: greedy tokens per submit (default 1, as generation runs them; more share "
                         "the submit, the readback and its await, to show what they cost the host per token)")
    ap.add_argument("--ops-per-submit", type=int, default=None,
                    help="recorded operations per queue submit of prompt chunks, unqueued steps and replays (default: the "
                         "engine's; 0: one submit per replay); queued greedy steps always go in one")
    ap.add_argument("--lead-ops", type=int, default=None,
                    help="operations in the first of those submits (default: the engine's; 0: as many as the "
                         "others): the GPU idles until it is submitted")
    ap.add_argument("--resident-from-store", action="store_true",
                    help="budget 'all' on the store engine with a pool holding every expert (as a tab runs it) "
                         "instead of the GGUF engine")
    ap.add_argument("--browser", choices=BROWSERS, default=None,
                    help="run the same bench in a headless browser tab (the page's worker, served by the product's "
                         "server, driven by Playwright) instead of Node + Dawn; the model reaches the tab through "
                         "HTTP Range into a store in OPFS (lab/browser_bench)")
    ap.add_argument("--chromium", default=None, metavar="PATH",
                    help="with --browser: the Chromium executable (default $DISKFORMER_CHROMIUM, then chromium on "
                         "PATH)")
    ap.add_argument("--flag-sets", default=TabOptions.flag_sets,
                    help="with --browser: Chromium's flag sets tried in turn (lab/browser_gpu/chromium_flags.mjs; "
                         f"default {TabOptions.flag_sets})")
    ap.add_argument("--want", default=TabOptions.want,
                    help="with --browser: the adapter to measure on: a vendor name, 'gpu' (any but a fallback "
                         "adapter) or 'any' (default gpu)")
    ap.add_argument("--tab-profile", type=Path, default=None,
                    help="with --browser: Chromium's profile folder, kept between runs so the tab's OPFS store is "
                         "reused (default: one under the system temp folder)")
    ap.add_argument("--tab-port", type=int, default=TabOptions.port,
                    help=f"with --browser: the page's port (default {TabOptions.port}; the same port keeps the "
                         "same origin and so the same store)")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the JSON result to this file")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before the Node run is abandoned")
    ap.add_argument("--verbose", action="store_true", help="echo the engine's log (stderr)")
    return ap


def main(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.prompt < 1 or args.decode < 1:
        print("diskformer bench: --prompt and --decode must be >= 1", file=sys.stderr)
        return 2
    if args.prefill_chunk is not None and args.prefill_chunk < 1:
        print("diskformer bench: --prefill-chunk must be >= 1 (1: token by token)", file=sys.stderr)
        return 2
    if args.prefill_reps < 1:
        print("diskformer bench: --prefill-reps must be >= 1", file=sys.stderr)
        return 2
    if args.ops_per_submit is not None and args.ops_per_submit < 0:
        print("diskformer bench: --ops-per-submit must be >= 0 (0: one submit per token)", file=sys.stderr)
        return 2
    if args.lead_ops is not None and args.lead_ops < 0:
        print("diskformer bench: --lead-ops must be >= 0 (0: as many as --ops-per-submit)", file=sys.stderr)
        return 2
    if not 1 <= args.tokens_per_submit <= 16:  # the engine's MAX_TOKENS_PER_SUBMIT (py_engine/engine/decoder.py)
        print("diskformer bench: --tokens-per-submit must be 1 to 16", file=sys.stderr)
        return 2
    if args.tokens_per_submit > 1 and args.step_by_step:
        print("diskformer bench: --tokens-per-submit is for the queued decode, not --step-by-step", file=sys.stderr)
        return 2
    if args.ring_buffers < 1:
        print("diskformer bench: --ring-buffers must be >= 1", file=sys.stderr)
        return 2
    if args.cost_replays < 0:
        print("diskformer bench: --cost-replays must be >= 0 (0: skip the in-pass kernel costs)", file=sys.stderr)
        return 2
    try:
        budgets = parse_budgets(args.budgets)
    except ValueError as exc:
        print(f"diskformer bench: --budgets: {exc}", file=sys.stderr)
        return 2
    if args.cpu_tier < 0 or (args.cpu_tier and not any(b != "all" for b in budgets)):
        print("diskformer bench: --cpu-tier takes a number of CPU workers and a pool fraction in --budgets",
              file=sys.stderr)
        return 2
    if args.routing_trace and not any(b != "all" for b in budgets):
        print("diskformer bench: --routing-trace needs a pool fraction in --budgets (e.g. 0.25)", file=sys.stderr)
        return 2
    tab_given = args.chromium or args.tab_profile or args.flag_sets != TabOptions.flag_sets or \
        args.want != TabOptions.want or args.tab_port != TabOptions.port
    if tab_given and not args.browser:
        print("diskformer bench: --chromium, --flag-sets, --want, --tab-profile and --tab-port are for --browser "
              "chromium", file=sys.stderr)
        return 2
    if args.browser and args.resident_from_store:
        print("diskformer bench: a tab always runs the resident case from its store: drop --resident-from-store",
              file=sys.stderr)
        return 2
    if not args.model.is_file():
        print(f"diskformer bench: no such file: {args.model}", file=sys.stderr)
        return 1
    model = args.model.resolve()
    mounts = [model.parent]
    run = {"model": str(model), "prompt": args.prompt, "decode": args.decode, "kv": args.kv,
           "stream_mb": args.stream_mb, "profile": not args.no_profile, "budgets": budgets,
           "routing": args.routing, "prefill_chunk": args.prefill_chunk, "queue_ahead": not args.step_by_step,
           "steps_ahead": args.steps_ahead, "tokens_per_submit": args.tokens_per_submit,
           "ops_per_submit": args.ops_per_submit, "lead_ops": args.lead_ops, "prefill_reps": args.prefill_reps,
           "cost_replays": args.cost_replays, "ring_buffers": args.ring_buffers}
    if args.cpu_tier:
        run.update(cpu_tier=args.cpu_tier, cpu_tier_url=CPU_TIER_POOL.as_uri())
    info = model_info(model)
    if args.routing_trace:
        run["routing_trace"] = routing_trace(info, args.decode + 8, args.trace_seed)
    if args.browser:
        try:
            raw = run_in_tab(model, run, TabOptions(args.chromium, args.flag_sets, args.want, args.tab_profile,
                                                    args.tab_port, args.timeout, args.verbose))
        except TabBenchError as exc:
            print(f"diskformer bench --browser {args.browser}: {exc}", file=sys.stderr)
            return 1
        return report(args, raw, info)
    if any(b != "all" for b in budgets) or args.resident_from_store:
        store = (args.store_dir or default_store_dir(model)).resolve()
        try:
            ensure_store(model, store, log=lambda msg: print(f"store: {msg}", file=sys.stderr))
        except Exception as exc:  # the ingest's own message says what is wrong with the file or the folder
            print(f"diskformer bench: ingesting {model.name} into {store} failed: {exc}", file=sys.stderr)
            return 1
        run["store"] = str(store)
        run["resident_from_store"] = args.resident_from_store
        mounts.append(store)
    set_opts = not args.no_profile and "DAWN_OPTS" not in os.environ
    if set_opts:
        os.environ["DAWN_OPTS"] = PROFILE_DAWN_OPTS  # read by diskformer/node/run_engine.mjs
    try:
        raw = run_in_node(ENTRY, run, mounts=mounts, timeout=args.timeout, echo_stderr=args.verbose,
                          packages=[ENGINE_SIDE])
    except NodeEngineError as exc:
        msg = str(exc) if args.verbose else str(exc).splitlines()[0]
        print(f"diskformer bench: {msg}", file=sys.stderr)
        return 1
    finally:
        if set_opts:
            del os.environ["DAWN_OPTS"]
    raw["store"] = run.get("store")
    return report(args, raw, info)


def report(args, raw: dict, info: dict) -> int:
    """The table, then the JSON line (also to --json-out)."""
    describe_run(raw, info, "trace" if args.routing_trace else "model")
    if args.browser:
        raw["runner"] = args.browser
        print(tab_summary(raw))
    result = {"raw": raw, "derived": derive(raw), "peers_llama_cpp_h200": PEERS}
    print(table(raw, result["derived"]))
    line = json.dumps(result)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
