"""The bench's printed table (lab/bench.py): the resident run, the in-pass kernel costs, the host and the streamed
cases, from the raw run and its derived figures."""
import itertools
from pathlib import Path

from .bench_streaming import streaming_table

# llama.cpp (CUDA) on the same H200, 8-layer real-dimension qwen35moe from make_tiny's default seed.
PEERS = {"model": "qwen35moe real dims, 8 layers (make_tiny --preset real --layers 8, default seed)",
         "all_gpu": {"prefill_tok_s": 23384.0, "decode_tok_s": 748.6},
         "experts_on_cpu": {"prefill_tok_s": 476.0, "decode_tok_s": 197.2}}

def _label(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _opt(x, fmt: str, none: str = "n/a") -> str:
    return none if x is None else format(x, fmt)


def _num(x, digits: int) -> str:
    return format(x, f",.{digits}f")


def _mb(n) -> str:
    return f"{n / 1e6:,.1f} MB"


def _step_parts(dec) -> list:
    """The queued decode's median step split into launching the next step (its encode + submit) and waiting for this
    one's result (the host paces the decode where the wait is near zero); nothing for unqueued steps."""
    if "launch_ms_median" not in dec:
        return []
    per = dec.get("tokens_per_submit", 1)
    lines = [f"  each step: launch the next       median {dec['launch_ms_median']:.3f} ms (encode + submit), then "
             f"wait {dec['wait_ms_median']:.3f} ms for this one's result"
             + (f" (a run of {per} tokens' times / {per})" if per > 1 else "")]
    if "encode_ms_median" in dec:
        lines.append(f"    of the launch (medians)        the JS encode {dec['encode_ms_median']:.3f} ms, the submit "
                     f"{dec['submit_ms_median']:.3f} ms (the rest Python and the FFI)")
    return lines


def _gc(g: dict) -> str:
    """A phase's collector time: ms in all (of which in full collections) and collections per generation."""
    return f"{g['ms']:.1f} ms ({g['full_ms']:.1f} full; {'/'.join(str(c) for c in g['collections'])} by generation)"


def _js_gc(g: dict, steps_ms=None) -> str:
    """A phase's JS collector time: ms in all, collections by kind, and its longest pause (with the decode's steps,
    the step it fell in: a slow step it explains)."""
    if not g.get("available"):
        return "not reported"
    kinds = ", ".join(f"{v['count']} {k} {v['ms']:.1f} ms" for k, v in g["by_kind"].items()) or "none"
    text = f"{g['ms']:.1f} ms ({kinds})"
    if g.get("collected_before"):
        text += " after a full collection"
    if g["long"]:
        at, ms, kind = max(g["long"], key=lambda e: e[1])
        text += f"; longest {ms:.1f} ms ({kind})"
        if steps_ms:
            ends = itertools.accumulate(steps_ms)
            step = next((i for i, end in enumerate(ends) if at < end), len(steps_ms) - 1)
            text += f" in step {step} ({steps_ms[step]:.2f} ms)"
    return text


# steal above this share of a run's wall time, summed over the host's CPUs: slow H100 host runs
# (docs/results/2026-12-06-h100-host-and-lead-ops.json) lost 0.3-2.4 s in ~15 s runs, its fast one 0.01 s
STEAL_NOTED_MS_PER_S = 5.0


def _steal(raw: dict) -> list:
    """The line on the host CPUs' steal time over the run (lab/engine_bench/host_steal_clock.py), where reported."""
    st, label = raw.get("host_steal"), "host CPUs' steal time"
    if not st:
        return []
    if not st.get("available"):
        return [f"{label:34}not reported ({st.get('reason', '')})"]
    text = f"{label:34}{st['steal_ms']:,.0f} ms over the run's {st['run_s']:.1f} s ({st['cpus']} CPUs)"
    if st["run_s"] > 0 and st["steal_ms"] / st["run_s"] > STEAL_NOTED_MS_PER_S:
        text += ": the hypervisor ran other work on this machine's CPUs; host-side times (launch, encode) may be slow"
    return [text]


def _decode_label(dec: dict) -> str:
    """The decode row's label: its tokens, and how its steps were queued."""
    ahead, per = dec.get("steps_ahead", 1), dec.get("tokens_per_submit", 1)
    how = "" if not dec.get("queued_ahead") else ", queued" if ahead == 1 else f", queued {ahead} ahead"
    if per > 1:
        how += f", {per} a submit"
    return f"decode tok/s ({dec['tokens']} tokens{how})"


def table(raw: dict, d: dict) -> str:
    if "prefill" not in raw:
        dev = raw["device"]
        return "\n".join([f"device   {dev['description']}", f"streaming read (same process)     "
                          f"{raw['stream']['GBps']:,.1f} GB/s"] + _steal(raw) + streaming_table(raw, d))
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
        f"{'prefill tok/s (' + str(raw['prefill']['tokens']) + ' tokens, chunk ' + str(raw['prefill'].get('chunk')) + ')':34}{d['prefill_tok_s']:>16,.1f}"
        f"{PEERS['all_gpu']['prefill_tok_s']:>18,.1f}",
        f"{_decode_label(raw['decode']):34}{d['decode_tok_s']:>16,.1f}"
        f"{PEERS['all_gpu']['decode_tok_s']:>18,.1f}",
        *([f"{'  each repetition, ms':34}{' '.join(f'{ms:.1f}' for ms in raw['prefill']['reps_ms'])}"
           f" (of which encode + submit {' '.join(f'{ms:.1f}' for ms in raw['prefill']['reps_feed_ms'])})"]
          if raw["prefill"].get("reps_ms") else []),
        *([f"{'  warm-up prompts, ms':34}{' '.join(f'{ms:.1f}' for ms in raw['prefill']['warmup_ms'])}"]
          if raw["prefill"].get("warmup_ms") else []),
        *([f"{'  first prompt after load':34}{raw['prefill']['tokens'] / raw['prefill']['first_ms'] * 1e3:>16,.1f}"]
          if raw["prefill"].get("first_ms") else []),
        f"{'llama.cpp H200, experts on CPU*':34}{'':>16}{'prefill ' + _num(cpu['prefill_tok_s'], 0):>18}",
        f"{'':34}{'':>16}{'decode ' + _num(cpu['decode_tok_s'], 1):>18}",
    ]
    for label, x in d["budgets"].items():
        lines.append(f"{'decode, experts budget ' + label:34}{x['decode_tok_s']:>16,.1f}")
    lines += [
        f"* {PEERS['model']}; compare only with that model",
        "",
        f"decode ms/token                   {d['decode_ms_per_token']:.3f} (median "
        f"{raw['decode']['ms_median']:.3f}, min {raw['decode']['ms_min']:.3f}, p90 {raw['decode']['ms_p90']:.3f})",
        *_step_parts(raw["decode"]),
        f"prefill GFLOP/s                   {d['prefill_gflops']:,.1f}",
        f"syncs per token                   prefill {d['syncs_per_token']['prefill']:.3f}, decode "
        f"{d['syncs_per_token']['decode']:.2f}",
        *([f"Python's garbage collector        prefill {_gc(raw['prefill']['gc'])}; decode "
           f"{_gc(raw['decode']['gc'])}"] if "gc" in raw["prefill"] else []),
        *([f"JS garbage collector              prefill {_js_gc(raw['prefill']['js_gc'])}",
           f"{'':34}decode {_js_gc(raw['decode']['js_gc'], raw['decode'].get('steps_ms'))}"]
          if "js_gc" in raw["prefill"] else []),
        *_steal(raw),
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
    rate = raw.get("replay_rate")
    if rate:
        lines.append(f"decode replays back to back       {rate['total_us_per_token']:,.1f} us/token, of which the "
                     f"CPU's encode + submit {rate['cpu_us_per_token']:,.1f} ({rate['replays']} replays, no readback)")
        if "encode_only_us_per_token" in rate:
            lines.append(f"  the same list encoded, never submitted {rate['encode_only_us_per_token']:,.1f} us/token "
                         "(the WebGPU calls and their validation alone)")
    lines += _step_passes(raw.get("step_passes") or {})
    lines += _kernel_costs(raw.get("kernel_costs") or {}, d)
    pp = raw.get("prefill_profile") or {}
    if pp.get("available"):
        lines += ["",
                  f"prefill chunk of {pp['tokens']} tokens at position {pp['pos0']} (timestamps)   busy "
                  f"{pp['busy_us'] / 1e3:.3f} ms = {pp['busy_us_per_token']:.1f} us/token",
                  f"  {'kernel':22}{'dispatches':>11}{'us/chunk':>11}{'share':>8}"]
        for k in pp["kinds"][:12]:
            lines.append(f"  {k['kind']:22}{k['dispatches']:>11}{k['us']:>11.1f}{100 * k['share']:>7.1f}%")
    return "\n".join(lines + streaming_table(raw, d))


def _step_passes(sp: dict) -> list:
    """Queued greedy steps timed on the GPU (lab/engine_bench/timing.py step_passes): each token's span and the busy
    time of its submitted pieces within it, and the GPU's gap between one token's end and the next's start."""
    if not sp.get("available"):
        return []
    return [f"queued steps on the GPU            a token spans {sp['span_us_median']:,.1f} us "
            f"({sp['busy_us_median']:,.1f} in its {sp['passes_per_token']} passes, {sp['pieces_per_token']} submits), "
            f"then {sp['gap_us_median']:,.1f} us (p90 {sp['gap_us_p90']:,.1f}) to the next's start",
            f"  a step every {sp['period_us_median']:,.1f} us on the GPU (median of {sp['steps']}; "
            f"{1e3 * sp['step_ms_median']:,.1f} on the wall clock)"]


def _kernel_costs(costs: dict, d: dict) -> list:
    """The in-pass kernel costs (lab/engine_bench/kernel_costs.py): the GPU's time for the token's list in its own
    pass, what it loses per kernel kind swapped for empty dispatches of its grid, and the floor of launches and
    barriers alone."""
    if not costs.get("available"):
        return []
    full, floor = costs["full_us"], costs["floor_us"]
    clock = "GPU timestamps" if costs.get("clock") == "timestamps" else "wall clock"
    lines = ["",
             f"in-pass cost per kernel kind      the list {full:,.1f} us/token on the GPU ({clock}; encoding it "
             f"{costs['encode_us']:,.1f} on the CPU); launches + barriers alone {floor:,.1f}",
             f"  ({costs['rounds']} rounds of {costs['replays']} replays in one command buffer per variant; each kind "
             "swapped for empty dispatches of its grid)",
             f"  {'kernel':38}{'dispatches':>11}{'us/token':>11}{'share':>8}"]
    for k in costs["kinds"][:14]:
        share = k["us"] / (full - floor) if full > floor else 0.0
        lines.append(f"  {k['kind']:38}{k['dispatches']:>11}{k['us']:>11.1f}{100 * share:>7.1f}%")
    if costs.get("kept"):
        lines.append(f"  (kept: {', '.join(costs['kept'])}; shares of the list's time above the floor)")
    if "ceiling_over_bound" in d:
        lines += [f"  against the bound: with launches + barriers as measured and every kernel at its bytes' time, "
                  f"measured/bound could reach {d['ceiling_over_bound']:.3f}",
                  f"  the kernels take {d['beyond_bytes_us_per_dispatch']:,.1f} us per dispatch beyond their bytes' "
                  f"time and their launch; 0.50 of the bound leaves {d['half_bound_leaves_us_per_dispatch']:,.1f}"]
    return lines
