"""`diskformer bench`'s streamed cases, on the host: the figures derived from each pool fraction's raw measurements
(rates per token, prefetch waste, the miss path's stage limits and the pipelined bound), their table, and the
fields that describe the run (GPU name, model depth and size, runner, routing, commit) and the routing trace."""
import shutil
import subprocess
from pathlib import Path


def _label(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def _opt(x, fmt: str, none: str = "n/a") -> str:
    return none if x is None else format(x, fmt)


def _mb(n) -> str:
    return f"{n / 1e6:,.1f} MB"


def _num(x, digits: int) -> str:
    return format(x, f",.{digits}f")


def model_info(model: Path) -> dict:
    """{"arch", "layers", "experts", "top_k", "bytes"} of a GGUF, from its header."""
    from py_engine.gguf import read_gguf_file
    header = read_gguf_file(str(model))
    arch = header.architecture
    m = header.metadata
    return {"arch": arch, "layers": m.get(f"{arch}.block_count"), "experts": m.get(f"{arch}.expert_count"),
            "top_k": m.get(f"{arch}.expert_used_count"), "bytes": model.stat().st_size}


def routing_trace(info: dict, tokens: int, seed: int) -> list:
    """trace[t][layer] = the top-k ids of step t, at the reuse statistics tuned for the architecture."""
    from .policy_lab.traces import ArchShape, generate
    if not info["experts"] or not info["top_k"]:
        raise ValueError(f"{info['arch']}: no routed experts to trace")
    shape = ArchShape(info["arch"], info["layers"], info["experts"], info["top_k"], 0)
    return [[list(picks) for picks in row] for row in generate(shape, tokens, seed=seed)]


def gpu_name(adapter_description) -> str | None:
    """The GPU's marketing name: nvidia-smi's where present, else what the WebGPU adapter calls itself."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return adapter_description


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def describe_run(raw: dict, info: dict, routing: str):
    """The fields every result file carries: the GPU's name, the model's depth and size, runner, routing, commit."""
    dev = raw.setdefault("device", {})
    dev["gpu_name"] = gpu_name(dev.get("description"))
    raw.setdefault("model", {}).update(arch=info["arch"], layers=info["layers"], bytes=info["bytes"])
    raw["runner"] = "node"
    raw["routing"] = routing
    raw["commit"] = git_commit()


def derive_stages(stages: dict, bytes_per_token: float, decode_tok_s: float) -> dict:
    """Each stage's limit, the decode's achieved rate through it and their ratio, the slowest stage and the
    pipelined bound (stages overlapped: the slowest one sets the pace)."""
    limits = {k: v for k, v in stages["limits_GBps"].items() if v}
    achieved = bytes_per_token * decode_tok_s / 1e9
    slowest = min(limits, key=limits.get) if limits else None
    bound = limits[slowest] * 1e9 / bytes_per_token if slowest and bytes_per_token else None
    return {"stages": {k: {"limit_GBps": lim, "achieved_GBps": achieved, "achieved_over_limit": achieved / lim}
                       for k, lim in limits.items()},
            "slowest_stage": slowest, "pipelined_bound_tok_s": bound}


def derive_streaming(case: dict, stages: dict | None = None) -> dict:
    """One fraction case: rates per decoded token, prefetch waste, and the bounds the miss path puts on decode:
    pipelined (the slowest stage's limit, `case["stages"]` or those measured for the same fraction) and serial."""
    dec, pre, io = case["decode"], case["prefill"], case["io"]
    n = dec["tokens"]
    demanded = dec["hits"] + dec["late_hits"] + dec["misses"]
    bytes_per_token = dec["bytes_read"] / n
    throughput = io["read_upload_MBps"] * 1e6 if io["read_upload_MBps"] else None
    serial = throughput / bytes_per_token if throughput and bytes_per_token else None
    stages = case.get("stages") or stages
    staged = derive_stages(stages, bytes_per_token, dec["tok_s"]) if stages else {
        "stages": None, "slowest_stage": None, "pipelined_bound_tok_s": None}
    bound = staged["pipelined_bound_tok_s"] or serial
    issued = dec.get("prefetch_issued", 0)
    demand_bytes = dec.get("bytes_demand", dec["bytes_read"])
    return {
        "fraction": case["fraction"], "slots": case["slots"], "records": case["records"],
        "routing": case.get("routing_source", "model"),
        "prefill_tok_s": pre["tok_s"], "decode_tok_s": dec["tok_s"],
        "hit_rate": (dec["hits"] + dec["late_hits"]) / demanded if demanded else None,
        "bytes_read_per_token": bytes_per_token,
        "demand_bytes_per_token": demand_bytes / n,
        "prefetch_bytes_per_token": dec.get("bytes_prefetch", 0) / n,
        # read, never used: prefetched records evicted before any demand (record size x count)
        "wasted_prefetch_bytes_per_token": dec.get("prefetch_wasted", 0) * io.get("record_bytes", 0) / n,
        "prefetch_accuracy": dec.get("prefetch_used", 0) / issued if issued else None,
        # the CPU expert tier (--cpu-tier): share of the decode's misses it computed, its ms per token
        "cpu_share_of_misses": dec.get("placed_elsewhere", 0) / dec["misses"] if dec["misses"] else None,
        "cpu_ms_per_token": dec.get("cpu_ms", 0.0) / n,
        "bytes_over_demand": dec["bytes_read"] / demand_bytes if demand_bytes else None,
        "syncs_per_token": {"prefill": pre["syncs"] / pre["tokens"], "decode": dec["syncs"] / n},
        # time the token loop waited for loads (ensure), of its whole decode time per token
        "stall_ms_per_token": dec["wait_ms"] / n if "wait_ms" in dec else None,
        "decode_ms_per_token": 1e3 / dec["tok_s"] if dec["tok_s"] else None,
        "read_batches_per_token": dec["read_batches"] / n if "read_batches" in dec else None,
        "read_MBps": io["read_MBps"], "upload_GBps": io["upload_GBps"], "read_upload_MBps": io["read_upload_MBps"],
        **staged,
        "serial_bound_tok_s": serial,
        "stream_bound_tok_s": bound,  # None: nothing was read while decoding (every pick resident)
        "measured_over_stream_bound": dec["tok_s"] / bound if bound else None,
    }


def case_label(case: dict) -> str:
    """"10%" for the model's routing, "10% trace" for the routing trace."""
    label = _label(case["fraction"])
    return label + " trace" if case.get("routing_source") == "trace" else label


def derive_budgets(cases: list) -> dict:
    stages = {c["fraction"]: c["stages"] for c in cases if c.get("stages")}
    return {case_label(c): derive_streaming(c, stages.get(c["fraction"])) for c in cases}


def streaming_table(raw: dict, d: dict) -> list:
    """The fraction cases, one column each."""
    cases = raw.get("streaming", [])
    if not cases:
        return []
    cols = [d["budgets"][case_label(c)] for c in cases]
    w = 18

    def row(name, cells):
        return f"{name:34}" + "".join(f"{c:>{w}}" for c in cells)

    def stage(x, name):
        st = (x["stages"] or {}).get(name)
        return "n/a" if st is None else f"{st['achieved_GBps']:.2f}/{st['limit_GBps']:.2f}"

    lines = ["", row("experts streamed from the store", [f"pool {case_label(c)}" for c in cases]),
             row("pool slots / experts", [f"{c['slots']} / {c['records']}" for c in cases]),
             row("prefill tok/s", [_num(x["prefill_tok_s"], 1) for x in cols]),
             row("decode tok/s", [_num(x["decode_tok_s"], 1) for x in cols]),
             row("decode ms/token (median)", [f"{c['decode']['ms_median']:.3f}" for c in cases]),
             row("hit rate (decode)", [_opt(x["hit_rate"], ".3f") for x in cols]),
             row("bytes read per token", [_mb(x["bytes_read_per_token"]) for x in cols]),
             row("  demanded misses", [_mb(x["demand_bytes_per_token"]) for x in cols]),
             row("  prefetch / wasted", [f"{_mb(x['prefetch_bytes_per_token'])} / "
                                         f"{x['wasted_prefetch_bytes_per_token'] / 1e6:,.1f}" for x in cols]),
             row("prefetch accuracy", [_opt(x["prefetch_accuracy"], ".3f") for x in cols]),
             row("misses computed on the CPU", [_opt(x.get("cpu_share_of_misses"), ".3f") for x in cols]),
             row("  CPU ms/token", [_opt(x.get("cpu_ms_per_token"), ",.2f") for x in cols]),
             row("waiting for loads ms/token", [_opt(x["stall_ms_per_token"], ",.2f") for x in cols]),
             row("reader calls per token", [_opt(x["read_batches_per_token"], ",.1f") for x in cols]),
             row("syncs per token (prefill)", [f"{x['syncs_per_token']['prefill']:.2f}" for x in cols]),
             row("syncs per token (decode)", [f"{x['syncs_per_token']['decode']:.2f}" for x in cols]),
             row("store read MB/s", [_opt(x["read_MBps"], ",.1f") for x in cols]),
             row("upload GB/s (staging ring)", [_opt(x["upload_GBps"], ",.2f") for x in cols]),
             row("read + upload MB/s (serial)", [_opt(x["read_upload_MBps"], ",.1f") for x in cols]),
             row("read GB/s achieved/limit", [stage(x, "read") for x in cols]),
             row("upload GB/s achieved/limit", [stage(x, "upload") for x in cols]),
             row("host copy GB/s achieved/limit", [stage(x, "host_copy") for x in cols]),
             row("slowest stage", [x["slowest_stage"] or "n/a" for x in cols]),
             row("serial bound tok/s", [_opt(x["serial_bound_tok_s"], ",.1f", "none (no reads)") for x in cols]),
             row("streaming bound tok/s", [_opt(x["stream_bound_tok_s"], ",.1f", "none (no reads)") for x in cols]),
             row("measured / streaming bound", [_opt(x["measured_over_stream_bound"], ".3f") for x in cols]),
             f"  (store {raw.get('store')}; serial: {cases[0]['io']['records']} records of "
             f"{_mb(cases[0]['io']['record_bytes'])} read in file order, then uploaded; the streaming bound is the "
             f"pipelined one: the slowest stage's limit / bytes read per token)"]
    st = next((c["stages"] for c in cases if c.get("stages")), None)
    if st:
        lines.append("  stage limits: read " + ", ".join(f"{r['readers']} in flight {r['GBps']:.2f}"
                                                         for r in st["read"]) + " GB/s; upload "
                     + ", ".join(f"batch {u['batch']} {u['GBps']:.2f}" for u in st["upload"])
                     + f" GB/s (ring of {st['ring_buffers']}"
                     + ("" if not st.get("upload_ring_2k") else "; a ring of 2 x top-k: " + ", ".join(
                         f"batch {u['batch']} {u['GBps']:.2f}" for u in st["upload_ring_2k"]))
                     + f"); host copy {st['host_copy_GBps']:.2f} GB/s (reader {st['reader']})")
    return lines


