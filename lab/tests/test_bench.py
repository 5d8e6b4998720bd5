"""`diskformer bench` in its CI form (tiny-qwen3moe, 16 prompt + 8 decoded tokens, budgets "all" and a pool of half
the experts streamed from a store, on lavapipe) and the byte/FLOP accounting it divides by, checked against the
model's own dimensions."""
import json
import shutil
import sys
from types import SimpleNamespace

import pytest

from lab import ENGINE_SIDE, bench, bench_streaming, bench_table
from lab.engine_bench import accounting
from py_engine.gguf import read_gguf_file

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def test_per_token_bytes_follow_the_dimensions(fixture_models):
    header = read_gguf_file(str(fixture_models / "tiny-qwen3moe.gguf"))
    m = header.metadata
    cfg = SimpleNamespace(n_layer=m["qwen3moe.block_count"], n_embd=m["qwen3moe.embedding_length"],
                          n_vocab=header.tensor("token_embd.weight").shape[0], n_expert=m["qwen3moe.expert_count"],
                          n_expert_used=m["qwen3moe.expert_used_count"],
                          n_ff_exp=m["qwen3moe.expert_feed_forward_length"],
                          n_head=m["qwen3moe.attention.head_count"], n_head_kv=m["qwen3moe.attention.head_count_kv"],
                          head_dim=m["qwen3moe.attention.key_length"])
    cost = accounting.per_token(header, cfg, cfg.n_layer, 2, 0, ctx=10)
    q8_row = cfg.n_embd // 32 * 34
    # one layer's routed experts: gate and up (n_ff_exp x n_embd) and down (n_embd x n_ff_exp), Q8_0, k of them
    per_expert_layer = 3 * cfg.n_ff_exp * q8_row
    assert cost["experts"] == cfg.n_layer * cfg.n_expert_used * per_expert_layer
    assert cost["kv_read"] == 2 * cfg.n_layer * 10 * cfg.n_head_kv * cfg.head_dim * 2
    # the embedding contributes one row (the head is output.weight, read whole)
    embd = header.tensor("token_embd.weight")
    all_dense = sum(t.nbytes for t in header.tensors if not accounting.is_expert(t.name))
    assert cost["dense_weights"] == all_dense - embd.nbytes + q8_row
    assert cost["total"] == cost["dense_weights"] + cost["experts"] + cost["kv_read"] + cost["state"]
    w = accounting.weight_bytes(header, cfg.n_layer)
    assert w["experts"] == cfg.n_layer * cfg.n_expert * per_expert_layer
    assert w["dense"] == all_dense


def test_per_token_kv_follows_gemma4s_layers(gemma4_models):
    """gemma4's layers differ: a sliding-window layer reads at most its window's rows with its own head dim and KV
    heads, a global layer every position."""
    from py_engine.models.gemma4.config import Gemma4Config

    header = read_gguf_file(str(gemma4_models / "micro-gemma4.gguf"))
    cfg = Gemma4Config.from_header(header)
    ctx = 3 * cfg.n_swa
    cost = accounting.per_token(header, cfg, cfg.n_layer, 2, 0, ctx=ctx)
    want = sum(2 * (cfg.n_swa if cfg.is_swa(i) else ctx) * cfg.n_head_kv[i] * cfg.layer_head_dim(i) * 2
               for i in range(cfg.n_layer))
    assert cost["kv_read"] == want
    assert any(cfg.is_swa(i) for i in range(cfg.n_layer)) and not all(cfg.is_swa(i) for i in range(cfg.n_layer))
    # the tied Q6_K table is read whole as the head, plus the embedded row
    embd = header.tensor("token_embd.weight")
    assert cost["dense_weights"] >= embd.nbytes + embd.nbytes // cfg.n_vocab


def test_derive_divides_bytes_by_the_measured_bandwidth():
    raw = {"prefill": {"tokens": 4, "tok_s": 100.0, "syncs": 1, "ffi_calls": 8, "flops_per_token": 2e9},
           "decode": {"tokens": 2, "tok_s": 50.0, "ms": 40.0, "syncs": 2, "ffi_calls": 10},
           "per_token": {"total": 10 ** 9}, "stream": {"GBps": 100.0}, "dispatches_per_token": 20,
           "profile": {"available": True, "busy_us": 10000.0}}
    d = bench.derive(raw)
    assert d["bound_tok_s"] == pytest.approx(100.0)  # 100 GB/s over 1 GB per token
    assert d["achieved_GBps"] == pytest.approx(50.0)
    assert d["measured_over_bound"] == pytest.approx(0.5)
    assert d["prefill_gflops"] == pytest.approx(200.0)
    assert d["syncs_per_token"] == {"prefill": 0.25, "decode": 1.0}
    assert d["overhead_us_per_dispatch"] == pytest.approx((20.0 - 10.0) * 1e3 / 20)
    assert d["budgets"] == {}  # no streaming case in this raw
    assert "ceiling_over_bound" not in d  # no in-pass costs in this raw


def test_dispatch_floor_splits_the_pass_into_bytes_launches_and_the_rest():
    # a 10,000 us bound; the list 30,000 us in its own pass, of which 5,000 launches + barriers alone; 20 dispatches
    raw = {"prefill": {"tokens": 4, "tok_s": 100.0, "syncs": 1, "ffi_calls": 8, "flops_per_token": 2e9},
           "decode": {"tokens": 2, "tok_s": 50.0, "ms": 40.0, "syncs": 2, "ffi_calls": 10},
           "per_token": {"total": 10 ** 9}, "stream": {"GBps": 100.0}, "dispatches_per_token": 20,
           "kernel_costs": {"available": True, "full_us": 30000.0, "floor_us": 5000.0}}
    d = bench.derive(raw)
    assert d["launch_floor_us"] == 5000.0
    assert d["ceiling_over_bound"] == pytest.approx(10000 / 15000)
    assert d["beyond_bytes_us_per_dispatch"] == pytest.approx((30000 - 5000 - 10000) / 20)
    assert d["half_bound_leaves_us_per_dispatch"] == pytest.approx((10000 - 5000) / 20)
    lines = "\n".join(bench_table._kernel_costs({**raw["kernel_costs"], "clock": "timestamps", "encode_us": 1.0,
                                           "rounds": 3, "replays": 20, "kinds": []}, d))
    assert "could reach 0.667" in lines and "750.0 us per dispatch" in lines and "leaves 250.0" in lines


def test_streaming_bound_is_throughput_over_bytes_read():
    case = {"fraction": 0.25, "slots": 32, "records": 128,
            "prefill": {"tokens": 4, "tok_s": 20.0, "syncs": 36},
            "decode": {"tokens": 10, "tok_s": 5.0, "syncs": 90, "hits": 30, "late_hits": 10, "misses": 40,
                       "bytes_read": 10 * 2_000_000},
            "io": {"read_MBps": 400.0, "upload_GBps": 1.0, "read_upload_MBps": 50.0}}
    x = bench_streaming.derive_streaming(case)
    assert x["bytes_read_per_token"] == 2_000_000
    assert x["stream_bound_tok_s"] == pytest.approx(25.0)  # no stage limits measured: 50 MB/s over 2 MB per token
    assert x["serial_bound_tok_s"] == x["stream_bound_tok_s"] and x["pipelined_bound_tok_s"] is None
    assert x["measured_over_stream_bound"] == pytest.approx(0.2)
    assert x["hit_rate"] == pytest.approx(0.5)
    assert x["syncs_per_token"] == {"prefill": 9.0, "decode": 9.0}
    case["decode"]["bytes_read"] = 0  # every pick resident: no bound from the disk
    assert bench_streaming.derive_streaming(case)["stream_bound_tok_s"] is None
    assert bench.derive({"streaming": [case]})["budgets"]["25%"]["decode_tok_s"] == 5.0


def test_pipelined_bound_is_the_slowest_stage_and_waste_is_apart():
    """Stages overlapped: the slowest stage's limit over bytes read per token; each stage's achieved rate (bytes
    read per token x decode tok/s) over its limit; the trace case, labelled apart, takes the same fraction's
    limits; prefetched bytes never used are reported apart from the demanded misses' bytes."""
    record = 1_000_000
    stages = {"limits_GBps": {"read": 8.0, "upload": 4.0, "host_copy": 20.0}, "read": [], "upload": []}
    model = {"fraction": 0.1, "slots": 10, "records": 100, "routing_source": "model", "stages": stages,
             "prefill": {"tokens": 4, "tok_s": 20.0, "syncs": 4},
             "decode": {"tokens": 10, "tok_s": 100.0, "syncs": 10, "hits": 50, "late_hits": 10, "misses": 20,
                        "bytes_read": 40 * record, "bytes_demand": 20 * record, "bytes_prefetch": 20 * record,
                        "prefetch_issued": 20, "prefetch_used": 10, "prefetch_wasted": 6},
             "io": {"read_MBps": 400.0, "upload_GBps": 1.0, "read_upload_MBps": 300.0, "record_bytes": record}}
    trace = {**model, "routing_source": "trace", "stages": None,
             "decode": {**model["decode"], "tok_s": 200.0, "bytes_read": 20 * record, "bytes_demand": 20 * record,
                        "bytes_prefetch": 0, "prefetch_issued": 0, "prefetch_used": 0, "prefetch_wasted": 0}}
    budgets = bench.derive({"streaming": [model, trace]})["budgets"]
    x, t = budgets["10%"], budgets["10% trace"]
    assert x["slowest_stage"] == "upload" and x["routing"] == "model" and t["routing"] == "trace"
    assert x["pipelined_bound_tok_s"] == pytest.approx(4e9 / 4e6)  # 4 GB/s over 4 MB per token
    assert x["stream_bound_tok_s"] == x["pipelined_bound_tok_s"] and x["serial_bound_tok_s"] == pytest.approx(75.0)
    assert x["stages"]["read"]["achieved_GBps"] == pytest.approx(0.4)  # 4 MB x 100 tok/s
    assert x["stages"]["upload"]["achieved_over_limit"] == pytest.approx(0.1)
    assert x["stages"]["host_copy"]["achieved_over_limit"] == pytest.approx(0.02)
    assert x["demand_bytes_per_token"] == 2 * record and x["prefetch_bytes_per_token"] == 2 * record
    assert x["wasted_prefetch_bytes_per_token"] == pytest.approx(0.6 * record)
    assert x["prefetch_accuracy"] == 0.5 and x["bytes_over_demand"] == 2.0
    assert x["stall_ms_per_token"] is None and x["decode_ms_per_token"] == pytest.approx(10.0)
    assert t["pipelined_bound_tok_s"] == pytest.approx(4e9 / 2e6) and t["prefetch_accuracy"] is None


def test_steal_line_says_when_the_hypervisor_took_the_cpus():
    quiet = {"available": True, "steal_ms": 10.0, "run_s": 15.0, "cpus": 16}
    busy = {**quiet, "steal_ms": 1880.0}
    (line,) = bench_table._steal({"host_steal": quiet})
    assert "10 ms over the run's 15.0 s (16 CPUs)" in line and "hypervisor" not in line
    (line,) = bench_table._steal({"host_steal": busy})
    assert "1,880 ms" in line and "hypervisor ran other work" in line
    (line,) = bench_table._steal({"host_steal": {"available": False, "reason": "no /proc/stat here"}})
    assert "not reported (no /proc/stat here)" in line
    assert bench_table._steal({}) == []


@needs_node
def test_clocks_say_unavailable_where_the_runtime_lacks_them():
    """In a runtime without Node's `fs` or V8's gc entries (a browser), the steal and JS collector clocks report
    `available: False` instead of failing: Node's own are hidden here while each clock is made."""
    from diskformer.node_engine import run_in_node
    code = """
from pyodide.code import run_js
from lab.engine_bench.host_steal_clock import HostStealClock
from lab.engine_bench.js_gc_clock import JsGcClock

def main(args):
    saved = run_js("(() => { const s = [process.getBuiltinModule, globalThis.PerformanceObserver]; "
                   "process.getBuiltinModule = undefined; globalThis.PerformanceObserver = undefined; return s; })()")
    try:
        steal = HostStealClock()
        a = steal.now()
        with JsGcClock() as jgc:
            gc = jgc.spent(0.0, 1.0)
    finally:
        run_js("(s) => { process.getBuiltinModule = s[0]; globalThis.PerformanceObserver = s[1]; }")(saved)
    present = HostStealClock()
    return {"steal": steal.spent(a, steal.now()), "gc": gc, "present": present.spent(present.now(), present.now())}
"""
    out = run_in_node(code, {}, packages=[ENGINE_SIDE])
    assert out["steal"]["available"] is False and "no /proc/stat" in out["steal"]["reason"]
    assert out["gc"]["available"] is False
    assert out["present"]["available"] is True  # restored: Node's own clock reads again


def test_budgets_parse_and_refuse():
    assert bench.parse_budgets(bench.DEFAULT_BUDGETS) == ["all", 0.25, 0.1]
    assert bench.parse_budgets("10%, all") == [0.1, "all"]
    for bad in ("0", "1", "1.5", "half", "0.5,0.5", ""):
        with pytest.raises(ValueError):
            bench.parse_budgets(bad)
    assert bench.main(["--model", "x.gguf", "--budgets", "2"]) == 2
    assert bench.main(["--model", "x.gguf", "--prefill-chunk", "0"]) == 2
    assert bench.main(["--model", "x.gguf", "--prefill-reps", "0"]) == 2
    assert bench.main(["--model", "x.gguf", "--cost-replays", "-1"]) == 2
    assert bench.main(["--model", "x.gguf", "--ring-buffers", "0"]) == 2
    assert bench.main(["--model", "x.gguf", "--budgets", "all", "--routing-trace"]) == 2  # no pool to route into
    assert bench.main(["--model", "x.gguf", "--budgets", "all", "--cpu-tier", "1"]) == 2  # no misses to compute
    assert bench.main(["--model", "x.gguf", "--cpu-tier", "-1"]) == 2


def test_cpu_tier_share_and_time_per_token():
    case = {"fraction": 0.25, "slots": 32, "records": 128,
            "prefill": {"tokens": 4, "tok_s": 20.0, "syncs": 36},
            "decode": {"tokens": 10, "tok_s": 5.0, "syncs": 90, "hits": 30, "late_hits": 10, "misses": 40,
                       "placed_elsewhere": 30, "cpu_ms": 25.0, "bytes_read": 10 * 2_000_000},
            "io": {"read_MBps": 400.0, "upload_GBps": 1.0, "read_upload_MBps": 50.0}}
    x = bench_streaming.derive_streaming(case)
    assert x["cpu_share_of_misses"] == pytest.approx(0.75) and x["cpu_ms_per_token"] == pytest.approx(2.5)
    del case["decode"]["placed_elsewhere"], case["decode"]["cpu_ms"]  # results from before the tier
    x = bench_streaming.derive_streaming(case)
    assert x["cpu_share_of_misses"] == 0 and x["cpu_ms_per_token"] == 0


@needs_node
def test_bench_cli_with_the_cpu_tier(fixture_models, tmp_path, capsys):
    """The streamed case with misses computed on the CPU: the table and the JSON say how many."""
    out = tmp_path / "bench.json"
    argv = ["--model", str(fixture_models / "tiny-qwen3moe.gguf"), "--prompt", "8", "--decode", "4",
            "--stream-mb", "8", "--prefill-chunk", "8", "--prefill-reps", "1", "--cost-replays", "0", "--no-profile",
            "--budgets", "0.5", "--store-dir", str(tmp_path / "store"), "--json-out", str(out), "--cpu-tier", "1"]
    assert bench.main(argv) == 0
    printed = capsys.readouterr().out
    assert "misses computed on the CPU" in printed and "CPU ms/token" in printed
    res = json.loads(out.read_text())
    case, x = res["raw"]["streaming"][0], res["derived"]["budgets"]["50%"]
    tier = case["cpu_tier"]
    assert tier["workers"] == 1 and tier["experts"] == case["streamer"]["placed_elsewhere"]
    assert case["tokens"]["early_stop"] == 0  # the tier serves the per-layer loop
    assert 0 <= x["cpu_share_of_misses"] <= 1 and x["cpu_ms_per_token"] >= 0
    assert x["cpu_share_of_misses"] == case["decode"]["placed_elsewhere"] / case["decode"]["misses"]


@needs_node
def test_profile_kinds_drop_layer_and_pool_buffer():
    from lab.engine_bench.dispatch_profile import kernel_kind
    assert kernel_kind("Qcur-3") == "Qcur" and kernel_kind("ffn_moe_up-12@1") == "ffn_moe_up"
    assert kernel_kind("result_output") == "result_output" and kernel_kind("") == "unlabelled"


def test_bench_cli_on_tiny_qwen3moe(fixture_models, tmp_path, capsys):
    out, store = tmp_path / "bench.json", tmp_path / "store"
    argv = ["--model", str(fixture_models / "tiny-qwen3moe.gguf"), "--prompt", "16", "--decode", "8",
            "--stream-mb", "16", "--prefill-chunk", "8", "--prefill-reps", "3", "--cost-replays", "3", "--budgets", "all,0.5", "--store-dir", str(store), "--json-out", str(out), "--routing-trace"]
    rc = bench.main(argv)
    printed = capsys.readouterr().out
    assert rc == 0
    assert "bandwidth bound" in printed and "streaming bound tok/s" in printed and "pool 50%" in printed
    res = json.loads(out.read_text())
    assert json.loads(printed.strip().splitlines()[-1]) == res
    raw, d = res["raw"], res["derived"]
    assert raw["model"]["arch"] == "qwen3moe" and raw["model"]["n_layer"] == 8
    assert raw["prefill"]["tokens"] == 16 and raw["decode"]["tokens"] == 8
    # 3 timed prefills from an empty context; tok/s is the mean of theirs (llama-bench's repetitions)
    pre = raw["prefill"]
    assert len(pre["reps_ms"]) == len(pre["reps_feed_ms"]) == 3 and "each repetition" in printed
    assert all(0 < f <= ms for f, ms in zip(pre["reps_feed_ms"], pre["reps_ms"]))
    assert pre["tok_s"] == pytest.approx(sum(16e3 / ms for ms in pre["reps_ms"]) / 3, rel=1e-3)
    assert raw["decode"]["queued_ahead"] is True  # greedy steps queued one ahead, as generation runs them
    # every step, split into queueing the next one and waiting for its own result
    dec = raw["decode"]
    assert len(dec["steps_ms"]) == len(dec["launch_ms"]) == len(dec["wait_ms"]) == 8
    assert all(a >= 0 and b >= 0 and a + b == pytest.approx(ms, abs=2e-3)
               for a, b, ms in zip(dec["launch_ms"], dec["wait_ms"], dec["steps_ms"]))
    assert dec["ms_min"] <= dec["ms_median"] <= dec["ms_p90"] <= max(dec["steps_ms"])
    assert "each step: launch the next" in printed and "p90" in printed
    # each launch split as the replay helper timed it: the JS encode, the submit; within the step's launch
    assert len(dec["encode_ms"]) == len(dec["submit_ms"]) == 8  # the first step's launch and the 7 queued
    assert 0 < dec["encode_ms_median"] and 0 <= dec["submit_ms_median"]
    assert dec["encode_ms_median"] + dec["submit_ms_median"] <= max(dec["launch_ms"])
    assert "the JS encode" in printed
    # the shipped decode path: one readback per decoded token, none for the fed prompt tokens but the last
    assert raw["prefill"]["syncs"] == 1 and raw["decode"]["syncs"] == 8
    assert 0 < d["ffi_calls_per_token"]["decode"] < 20
    # at least the 6 a layer records (attention 3: the products, the attention, the output; MoE 3), then the
    # embedding, the final norm, the head and its argmax
    assert raw["dispatches_per_token"] >= 6 * 8 + 4
    # a bind group and a dispatch per dispatch, a pipeline where it changes, the passes and the submit
    assert 2 * raw["dispatches_per_token"] < raw["webgpu_calls_per_token"] <= 3 * raw["dispatches_per_token"] + 40
    for key in ("prefill_tok_s", "decode_tok_s", "prefill_gflops", "stream_GBps", "bound_tok_s", "achieved_GBps"):
        assert d[key] > 0, key
    # no kernel beats a plain streaming read by much (caches can help a small model a little)
    assert 0 < d["measured_over_bound"] < 2
    gb = raw["gpu_bytes"]
    assert gb["experts"] > gb["dense_weights"] > 0 and gb["kv_state"] > 0 and gb["work_buffers"] > 0
    assert gb["total"] == sum(gb[k] for k in ("dense_weights", "experts", "kv_state", "work_buffers"))
    assert raw["per_token"]["experts"] * 4 == gb["experts"]  # top-4 of 16 experts
    assert raw["stream"]["bytes"] == 16 << 20
    prof = raw["profile"]
    if raw["device"]["timestamp_query"]:
        assert prof["available"] and prof["busy_us"] > 0
        assert sum(k["dispatches"] for k in prof["kinds"]) == raw["dispatches_per_token"]
        # every kind is summed over the layers (a norm that could not be fused is labelled ffn_moe_logits_norm-N)
        assert not any(k["kind"][-1].isdigit() for k in prof["kinds"]), [k["kind"] for k in prof["kinds"]]
        pre = raw["prefill_profile"]  # one 8-token chunk of the 16-token prompt, re-run at position 8
        assert pre["available"] and pre["tokens"] == 8 and pre["pos0"] == 8 and pre["busy_us"] > 0
        # 2 picks per expert on average: the fused routed gate/up (a device binding 9 storage buffers: lavapipe's 16)
        # k and v neighbours in the attention's stacked input weights: one GEMM (ChunkKernels' joined row views)
        assert {"ffn_moe_gate_up", "ffn_moe_down", "Qcur", "KVcur"} <= {k["kind"] for k in pre["kinds"]}
        assert not any(k["kind"][-1].isdigit() for k in pre["kinds"]), [k["kind"] for k in pre["kinds"]]
        assert "prefill chunk of 8 tokens" in printed
    assert raw["prefill"]["chunk"] == 8
    assert raw["prefill"]["first_ms"] > 0 and "first prompt after load" in printed  # the warm-up prefill, apart
    # then warm-up prompts for 0.5 s at least (the first not counted) and until two in a row agree within 10 %
    warm = raw["prefill"]["warmup_ms"]
    assert warm[0] == raw["prefill"]["first_ms"] and 3 <= len(warm) <= 16 and "warm-up prompts" in printed
    assert len(warm) == 16 or (sum(warm[1:]) >= 500 and abs(warm[-1] - warm[-2]) <= 0.1 * warm[-2])
    # the collector's share of each timed phase, so that a stall can be told from the GPU's time
    for phase in ("prefill", "decode"):
        g = raw[phase]["gc"]
        assert 0 <= g["full_ms"] <= g["ms"] and len(g["collections"]) == 3 and min(g["collections"]) >= 0
    assert "Python's garbage collector" in printed
    # and the JS engine's collector (Node reports it), the heap collected before each timed phase
    for phase in ("prefill", "decode"):
        j = raw[phase]["js_gc"]
        assert j["available"] and j["collected_before"], j
        assert abs(sum(k["ms"] for k in j["by_kind"].values()) - j["ms"]) < 0.01
        assert all(1.0 < ms <= j["ms"] + 1e-3 for _, ms, _ in j["long"])
    assert "JS garbage collector" in printed and "after a full collection" in printed
    # the hypervisor's share of the host's CPUs over the run (Linux's steal time), read through Node
    st = raw["host_steal"]
    if sys.platform == "linux":
        with open("/proc/stat") as f:
            cpus = sum(1 for line in f if line.startswith("cpu") and line[3].isdigit())
        assert st["available"] and st["cpus"] == cpus and st["steal_ms"] >= 0 and st["run_s"] > 0, st
        assert "host CPUs' steal time" in printed and f"({cpus} CPUs)" in printed
    rate = raw["replay_rate"]
    assert 0 < rate["cpu_us_per_token"] <= rate["total_us_per_token"] and "decode replays back to back" in printed
    assert 0 < rate["encode_only_us_per_token"] and "encoded, never submitted" in printed
    # queued greedy steps timed on the GPU: each token's span and busy time, and the gap to the next token's start
    sp = raw["step_passes"]
    if raw["device"]["timestamp_query"]:
        assert sp["available"] and sp["steps"] == 8 and sp["passes_per_token"] >= sp["pieces_per_token"] >= 1
        assert len(sp["span_us"]) == len(sp["busy_us"]) == 8 and len(sp["gap_us"]) == 7
        # one queue: a token's pieces run in turn within its span, and it starts after the one before it ends
        assert all(0 < b <= s + 1e-3 for b, s in zip(sp["busy_us"], sp["span_us"]))
        assert min(sp["gap_us"]) >= 0 and sp["inner_gaps_us_median"] >= -1e-3
        assert sp["period_us_median"] > 0
        assert "queued steps on the GPU" in printed
    else:
        assert not sp["available"]
    # in the token's own pass: every kind but the embedding swapped in turn for empty dispatches of its grid
    costs = raw["kernel_costs"]
    assert costs["available"] and costs["replays"] == 3 and costs["kept"] == ["inp_embd"]
    assert sum(k["dispatches"] for k in costs["kinds"]) + 1 == raw["dispatches_per_token"]
    if prof.get("available"):
        assert {k["kind"] for k in costs["kinds"]} == {k["kind"] for k in prof["kinds"]} - {"inp_embd"}
    # lavapipe runs the kernels on the CPU: the launches alone take far less than the whole list; its own clock
    assert costs["clock"] == ("timestamps" if raw["device"]["timestamp_query"] else "wall")
    assert 0 < costs["floor_us"] < costs["full_us"] and costs["encode_us"] > 0
    assert "in-pass cost per kernel kind" in printed
    # what the launches leave of the bound: below 1 wherever they take any time
    assert 0 < d["ceiling_over_bound"] < 1 and d["launch_floor_us"] == costs["floor_us"]
    assert "measured/bound could reach" in printed

    # what every result file says about the run
    assert raw["device"]["gpu_name"] and raw["model"]["layers"] == 8 and raw["runner"] == "node"
    assert raw["model"]["bytes"] == (fixture_models / "tiny-qwen3moe.gguf").stat().st_size
    assert raw["routing"] == "trace" and (raw["commit"] is None or len(raw["commit"]) == 40)
    # the streamed case: half of the 8 x 16 experts in the pool, the rest paged in from the store; then the same
    # pool with the decode routed by the trace
    case, traced = raw["streaming"]
    assert (case["routing_source"], traced["routing_source"]) == ("model", "trace") and "pool 50% trace" in printed
    x = d["budgets"]["50%"]
    assert case["fraction"] == 0.5 and case["slots"] == 64 and case["records"] == 128 and case["mode"] == "partial"
    assert case["prefill"]["tokens"] == 16 and case["decode"]["tokens"] == 8
    dec, io = case["decode"], case["io"]
    record = io["record_bytes"]
    assert dec["hits"] + dec["late_hits"] + dec["misses"] > 0 and dec["misses"] > 0  # 64 slots cannot hold 128
    assert dec["bytes_read"] == (dec["misses"] + dec["prefetch_issued"]) * record
    assert 0 < x["hit_rate"] < 1 and x["bytes_read_per_token"] == dec["bytes_read"] / 8
    assert x["syncs_per_token"]["decode"] >= 1  # at least the logits; a miss costs more
    assert io["records"] == 64 and io["bytes"] == 64 * record
    for key in ("read_MBps", "upload_GBps", "read_upload_MBps", "prefill_tok_s", "decode_tok_s", "stream_bound_tok_s"):
        assert x[key] > 0, key
    # read and upload one after the other: slower than either alone
    assert x["read_upload_MBps"] < min(x["read_MBps"], 1e3 * x["upload_GBps"])
    assert x["serial_bound_tok_s"] == pytest.approx(x["read_upload_MBps"] * 1e6 / x["bytes_read_per_token"])
    # the miss path's limits in the same run: parallel reads through Node's fs, ring uploads by batch, host copy
    st = case["stages"]
    assert st["reader"] == "NodeRecordReader" and [r["readers"] for r in st["read"]][:3] == [1, 2, 4]
    assert [u["batch"] for u in st["upload"]] == [1, 4, 8] and st["host_copy_GBps"] > 0
    assert x["slowest_stage"] in ("read", "upload", "host_copy")
    assert x["stream_bound_tok_s"] == x["pipelined_bound_tok_s"] == pytest.approx(
        min(st["limits_GBps"].values()) * 1e9 / x["bytes_read_per_token"])
    assert x["pipelined_bound_tok_s"] > x["serial_bound_tok_s"]  # overlapped beats one after the other
    assert 0 < x["measured_over_stream_bound"] < 2
    assert "upload GB/s achieved/limit" in printed and "stage limits: read 1 in flight" in printed
    # demanded misses and prefetches apart; the prefetches read and never used
    assert dec["bytes_read"] == dec["bytes_demand"] + dec["bytes_prefetch"]
    assert dec["bytes_demand"] == dec["misses"] * record and dec["bytes_prefetch"] == dec["prefetch_issued"] * record
    assert x["wasted_prefetch_bytes_per_token"] == dec["prefetch_wasted"] * record / 8
    assert 0 <= x["stall_ms_per_token"] < x["decode_ms_per_token"] and x["read_batches_per_token"] > 0
    assert "waiting for loads ms/token" in printed
    # the trace case: the decode's routed ids are the trace's (the host's trace, regenerated here), its guesses
    # the previous token's picks; the limits measured once per fraction
    t = d["budgets"]["50% trace"]
    assert traced["stages"] is None and t["stages"] is not None and t["routing"] == "trace"
    assert traced["prefetch_guess"] == "previous" and case["prefetch_guess"] == "lookahead"
    trace = bench.routing_trace(bench.model_info(fixture_models / "tiny-qwen3moe.gguf"), 8 + 8, 0)
    assert traced["last_routed_ids"] == trace[(traced["trace_steps"] - 1) % len(trace)]
    assert case["last_routed_ids"] != traced["last_routed_ids"]
    # a second run reuses the complete store instead of ingesting again
    experts = store / "experts.bin"
    before = experts.stat().st_mtime_ns
    bench.ensure_store(fixture_models / "tiny-qwen3moe.gguf", store)
    assert experts.stat().st_mtime_ns == before


def test_bench_tokens_per_submit_shares_one_readback(fixture_models, tmp_path, capsys):
    """--tokens-per-submit K: the queued decode goes in runs of K tokens a submit (the last run shorter), one
    readback a run, and every step figure is per token."""
    model = str(fixture_models / "tiny-qwen3moe.gguf")
    out = tmp_path / "bench.json"
    argv = ["--model", model, "--prompt", "16", "--decode", "8", "--stream-mb", "16", "--prefill-reps", "1",
            "--no-profile", "--budgets", "all", "--tokens-per-submit", "3", "--json-out", str(out)]
    assert bench.main(argv) == 0
    printed = capsys.readouterr().out
    dec = json.loads(out.read_text())["raw"]["decode"]
    assert dec["tokens_per_submit"] == 3 and dec["syncs"] == 3  # runs of 3, 3 and 2 tokens
    assert len(dec["steps_ms"]) == len(dec["launch_ms"]) == len(dec["encode_ms"]) == 8
    assert dec["steps_ms"][:3] == [dec["steps_ms"][0]] * 3 and dec["steps_ms"][6] == dec["steps_ms"][7]
    assert "3 a submit" in printed and "a run of 3 tokens' times / 3" in printed
    # --step-by-step changes the decode alone: the prefill is fed and read back as generation does it
    queued_prefill = json.loads(out.read_text())["raw"]["prefill"]
    argv[argv.index("--tokens-per-submit"):argv.index("--tokens-per-submit") + 2] = ["--step-by-step"]
    assert bench.main(argv) == 0
    raw = json.loads(out.read_text())["raw"]
    assert raw["decode"]["queued_ahead"] is False and raw["decode"]["syncs"] == 8 and not raw["decode"]["launch_ms"]
    assert raw["prefill"]["syncs"] == queued_prefill["syncs"] == 1
    assert raw["prefill"]["read_back"] == queued_prefill["read_back"] == "greedy id"
    # the submits' cut as asked (lavapipe's own default is one submit)
    argv += ["--ops-per-submit", "7", "--lead-ops", "2"]
    assert bench.main(argv) == 0
    raw = json.loads(out.read_text())["raw"]
    assert raw["device"]["ops_per_submit"] == 7 and raw["device"]["lead_ops"] == 2
    assert raw["decode"]["syncs"] == 8 and raw["prefill"]["read_back"] == "greedy id"
    for bad in (["--tokens-per-submit", "0"], ["--tokens-per-submit", "17"],
                ["--tokens-per-submit", "2", "--step-by-step"], ["--lead-ops", "-1"]):
        assert bench.main(["--model", model, *bad]) == 2
    err = capsys.readouterr().err
    assert "--tokens-per-submit" in err and "--lead-ops" in err
