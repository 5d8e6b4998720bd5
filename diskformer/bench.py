"""`diskformer bench MODEL.gguf`: the engine's speed as shipped (Pyodide + Dawn in Node), against its bandwidth bound.

One Node process measures, in this order: the streaming-read bandwidth of the device (shaders/bench_stream_read.wgsl,
the fastest any kernel can read weights there), the model's load, a P-token prefill, N greedy decode steps, and,
where the device has timestamp queries, each kernel's GPU time in one token. Printed: a readable table, then the
whole result as one JSON line (also written to --json-out).

Derived figures: bytes per decoded token (dense weights + the top-k experts of every layer + the KV rows read + the
recurrent state), the bound = those bytes / the streaming bandwidth, achieved GB/s = bytes per token x decode tok/s,
and measured / bound. Expert budgets below 100 % need the expert streamer, which the decoder does not use yet.
"""
import argparse
import json
import os
import sys
from pathlib import Path

from .node_engine import NodeEngineError, run_in_node

ENTRY = "py_engine.bench.entry:run"
NOT_INTEGRATED = "n/a (streamer not integrated)"
BUDGETS = ("25%", "10%")
# Timestamps are rounded to 65.5 us by Dawn unless this toggle is off: too coarse for 5-50 us kernels.
PROFILE_DAWN_OPTS = "disable-dawn-features=timestamp_quantization"
# llama.cpp (CUDA) on the same H200, 8-layer real-dimension qwen35moe from make_tiny's default seed.
PEERS = {"model": "qwen35moe real dims, 8 layers (make_tiny --preset real --layers 8, default seed)",
         "all_gpu": {"prefill_tok_s": 23384.0, "decode_tok_s": 748.6},
         "experts_on_cpu": {"prefill_tok_s": 476.0, "decode_tok_s": 197.2}}


def derive(raw: dict) -> dict:
    """The figures the table prints, from the entry's raw measurements."""
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
        "budgets": {b: NOT_INTEGRATED for b in BUDGETS},
    }
    prof = raw.get("profile") or {}
    if prof.get("available"):
        busy_ms = prof["busy_us"] / 1e3
        out["gpu_busy_ms_per_token"] = busy_ms
        out["gpu_busy_share_of_wall"] = busy_ms / out["decode_ms_per_token"]
        out["overhead_us_per_dispatch"] = (out["decode_ms_per_token"] - busy_ms) * 1e3 / raw["dispatches_per_token"]
        # the kernels alone against the bound: how far the GPU work itself is from a plain streaming read
        out["bound_over_gpu_busy"] = out["bound_ms_per_token"] / busy_ms if busy_ms else None
    return out


def _num(x, digits: int) -> str:
    return format(x, f",.{digits}f")


def _mb(n) -> str:
    return f"{n / 1e6:,.1f} MB"


def table(raw: dict, d: dict) -> str:
    m, dev, gb = raw["model"], raw["device"], raw["gpu_bytes"]
    per = raw["per_token"]
    cpu = PEERS["experts_on_cpu"]
    lines = [
        f"device   {dev['description']} (subgroups {dev['subgroups'][0]}-{dev['subgroups'][1]}, "
        f"binding {dev['max_binding'] >> 20} MiB)",
        f"model    {m['arch']}: {m['n_layer']} layers, n_embd {m['n_embd']}, {m['n_expert']} experts top-"
        f"{m['n_expert_used']}, vocab {m['n_vocab']}, KV {m['kv']}  ({Path(m['path']).name}; load "
        f"{raw['load_ms'] / 1e3:.1f} s)",
        "",
        f"{'':34}{'this engine':>16}{'llama.cpp H200*':>18}",
        f"{'prefill tok/s (' + str(raw['prefill']['tokens']) + ' tokens)':34}{d['prefill_tok_s']:>16,.1f}"
        f"{PEERS['all_gpu']['prefill_tok_s']:>18,.1f}",
        f"{'decode tok/s (' + str(raw['decode']['tokens']) + ' tokens)':34}{d['decode_tok_s']:>16,.1f}"
        f"{PEERS['all_gpu']['decode_tok_s']:>18,.1f}",
        f"{'llama.cpp H200, experts on CPU*':34}{'':>16}{'prefill ' + _num(cpu['prefill_tok_s'], 0):>18}",
        f"{'':34}{'':>16}{'decode ' + _num(cpu['decode_tok_s'], 1):>18}",
    ]
    for b in BUDGETS:
        lines.append(f"{'decode, experts budget ' + b:34}{NOT_INTEGRATED:>16}")
    lines += [
        f"* {PEERS['model']}; compare only with that model",
        "",
        f"decode ms/token                   {d['decode_ms_per_token']:.3f} (median "
        f"{raw['decode']['ms_median']:.3f}, min {raw['decode']['ms_min']:.3f})",
        f"prefill GFLOP/s                   {d['prefill_gflops']:,.1f}",
        f"syncs per token                   prefill {d['syncs_per_token']['prefill']:.3f}, decode "
        f"{d['syncs_per_token']['decode']:.2f}",
        f"FFI calls per token (Python->JS)  prefill {d['ffi_calls_per_token']['prefill']:.3f}, decode "
        f"{d['ffi_calls_per_token']['decode']:.2f}",
        f"dispatches per token              {d['dispatches_per_token']} ({raw['webgpu_calls_per_token']} "
        f"JS->WebGPU calls)",
        f"GPU bytes                         dense {_mb(gb['dense_weights'])}, experts {_mb(gb['experts'])}, "
        f"KV/state {_mb(gb['kv_state'])}, work {_mb(gb['work_buffers'])}",
        f"bytes per decoded token           {_mb(per['total'])} = dense {_mb(per['dense_weights'])} + experts "
        f"{_mb(per['experts'])} + KV {_mb(per['kv_read'])} + state {_mb(per['state'])}",
        f"streaming read (same process)     {d['stream_GBps']:,.1f} GB/s over {_mb(raw['stream']['bytes'])}",
        f"bandwidth bound                   {d['bound_ms_per_token']:.4f} ms/token = "
        f"{d['bound_tok_s']:,.1f} tok/s",
        f"achieved                          {d['achieved_GBps']:,.1f} GB/s; measured/bound "
        f"{d['measured_over_bound']:.3f}",
    ]
    prof = raw.get("profile") or {}
    if prof.get("available"):
        lines += ["",
                  f"GPU time per token (timestamps)   busy {d['gpu_busy_ms_per_token']:.3f} ms = "
                  f"{100 * d['gpu_busy_share_of_wall']:.0f} % of the wall time; "
                  f"{d['overhead_us_per_dispatch']:.1f} us per dispatch outside kernels",
                  f"kernels alone vs the bound         bound / GPU busy = {d['bound_over_gpu_busy']:.3g}",
                  f"  {'kernel':22}{'dispatches':>11}{'us/token':>11}{'share':>8}"]
        if d["gpu_busy_share_of_wall"] > 1:
            lines.append("  (one pass per dispatch costs more than the plain replay here: read the shares only)")
        for k in prof["kinds"][:12]:
            lines.append(f"  {k['kind']:22}{k['dispatches']:>11}{k['us']:>11.1f}{100 * k['share']:>7.1f}%")
    else:
        lines.append(f"GPU time per kernel               not profiled: {prof.get('reason', 'unknown')}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="diskformer bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", "-m", required=True, type=Path, help="a GGUF the engine runs (qwen3moe, qwen35moe)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens for prefill (default 512)")
    ap.add_argument("--decode", type=int, default=128, help="greedy tokens to decode (default 128)")
    ap.add_argument("--kv", choices=("f16", "f32"), default="f16", help="KV cache precision (default f16)")
    ap.add_argument("--stream-mb", type=int, default=None,
                    help="MiB read by the bandwidth kernel (default 1024, capped by the binding limit)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel timestamp profile")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the JSON result to this file")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before the Node run is abandoned")
    ap.add_argument("--verbose", action="store_true", help="echo the engine's log (stderr)")
    return ap


def main(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.prompt < 1 or args.decode < 1:
        print("diskformer bench: --prompt and --decode must be >= 1", file=sys.stderr)
        return 2
    if not args.model.is_file():
        print(f"diskformer bench: no such file: {args.model}", file=sys.stderr)
        return 1
    model = args.model.resolve()
    run = {"model": str(model), "prompt": args.prompt, "decode": args.decode, "kv": args.kv,
           "stream_mb": args.stream_mb, "profile": not args.no_profile}
    set_opts = not args.no_profile and "DAWN_OPTS" not in os.environ
    if set_opts:
        os.environ["DAWN_OPTS"] = PROFILE_DAWN_OPTS  # read by diskformer/node/run_engine.mjs
    try:
        raw = run_in_node(ENTRY, run, mounts=[model.parent], timeout=args.timeout, echo_stderr=args.verbose)
    except NodeEngineError as exc:
        msg = str(exc) if args.verbose else str(exc).splitlines()[0]
        print(f"diskformer bench: {msg}", file=sys.stderr)
        return 1
    finally:
        if set_opts:
            del os.environ["DAWN_OPTS"]
    result = {"raw": raw, "derived": derive(raw), "peers_llama_cpp_h200": PEERS}
    print(table(raw, result["derived"]))
    line = json.dumps(result)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
