"""The kernel benchmarks of lab/gpu_probes (run on the lent GPU for the figures in docs/results/) in their --tiny
form on this machine's adapter, so they cannot rot: each must run the engine's current shaders and its variants must
agree with their references (gemm_variants.mjs: a JS reference of the same arithmetic; gdn_variants.mjs: the engine's
layout, against which the other layouts are compared; route_variants.mjs: the engine's routed gate/up product with
its top-k, whose bits the other forms must give; dispatch_chain.mjs: every dispatch of its chain counted;
wave_sweep.mjs: the decode's kernels over growing launches, every variant with the engine form's outputs;
step_kernels.mjs: attention and the DeltaNet recurrence alone, the attention's two forms giving the same bits and the
recurrence's two column counts agreeing; matvec_anatomy.mjs: a decode product with its parts taken away in turn, its
weights cold or warm giving the engine's bits; grid_barrier.mjs: a barrier across a persistent dispatch's workgroups,
every arrival and read counted; persistent_chain.mjs: a chain of products as one persistent dispatch, giving the
dispatches' bits; loads_across_barriers.mjs: loads and a staging in both orders, each form's result checked;
l2_prefetch.mjs: a product after a dispatch whose extra workgroups read its weights, every word read and the same
bits; call_costs.mjs: the host's cost of each call mix, and of one bind group per layer).
"""
import json
import subprocess
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def _run(*args) -> list:
    res = subprocess.run(["node", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert lines, res.stdout[-2000:] + res.stderr[-2000:]
    return lines


def test_gdn_variants_agree():
    rows = _run("lab/gpu_probes/gdn_variants.mjs", "--tiny")
    names = [r["variant"] for r in rows]
    assert names[0] == "cols_sl2" and {"cols_sl1", "cols_sl4", "cols_sl8"} <= set(names)
    for r in rows:
        assert r["us"] > 0
        if not r["variant"].endswith("noload"):  # those compute on other inputs: timing only
            assert r["rel_err"] < 1e-5, r


def test_gemm_variants_agree_with_the_reference():
    rows = [r for r in _run("lab/gpu_probes/gemm_variants.mjs", "--tiny") if "tile" in r]
    tiles = {r["tile"] for r in rows}
    assert {"int8xfew", "fused gate+up+swiglu, act int8", "down, act int8 ahead"} <= tiles
    for r in rows:
        assert r["us"] > 0 and r["relErr"] < 1e-5, r


def test_gemm_variants_few_setting():
    rows = [r for r in _run("lab/gpu_probes/gemm_variants.mjs", "--tiny", "--few=16,8") if "tile" in r]
    assert [r["tile"] for r in rows] == ["fused gate+up+swiglu, act int8 (TT 16, KC 8)",
                                         "down, act int8 ahead (TT 16, KC 8)"]
    for r in rows:
        assert r["relErr"] < 1e-5, r


def test_route_variants_give_the_engines_bits():
    rows = _run("lab/gpu_probes/route_variants.mjs", "--tiny")
    by_name = {r["variant"]: r for r in rows}
    assert {"topk (engine)", "ids (no ranking)", "router_topk.wgsl alone"} <= set(by_name)
    for r in rows:
        assert r["us"] > 0
        if "same_as_engine" in r and r["same_as_engine"] is not None:  # timing-only forms compute other values
            assert r["same_as_engine"] is True, r
    assert by_name["router_topk.wgsl alone"]["same_ids_as_engine"] is True
    assert any(name.startswith("ids (no ranking), 1 of") for name in by_name)
    assert {"ids, loops written out, loads in place", "ids, loops written out, every load first",
            "topk, loops written out, every load first", "ids, quantisation as loops",
            "topk, quantisation as loops"} <= set(by_name)


def test_dispatch_chain_counts_every_dispatch():
    rows = _run("lab/gpu_probes/dispatch_chain.mjs", "--tiny")
    by_case = {r["case"]: r for r in rows}
    assert by_case["chain check"]["ok"] is True
    assert {"dispatches, each reading the one before", "dispatches on separate buffers",
            "workgroup barriers in each dispatch", "dependent loads per lane"} <= set(by_case)
    assert all(r["us"] > 0 for r in rows if "us" in r)
    chase = by_case["dependent loads per lane"]
    # both forms timed (which is longer is the benchmark's figure, not a check: a loaded CI host reorders them)
    assert chase["us_33_loads"] > 0 and chase["us_1_load"] > 0


def test_loads_across_barriers_times_every_form():
    rows = _run("lab/gpu_probes/loads_across_barriers.mjs", "--tiny")  # a form with a wrong result exits non-zero
    cases = {r["case"] for r in rows}
    for how in ("workgroup barriers",) + (("subgroup shuffles",) if "subgroup shuffles" not in cases else ()):
        assert {f"staging alone ({how})", f"staging, then loads ({how})", f"loads, then staging ({how})",
                f"overlap of loads and staging ({how})"} <= cases
    assert "loads alone" in cases
    assert all(r["us"] > 0 for r in rows if "us" in r)


def test_l2_prefetch_sidecar_reads_every_word():
    rows = _run("lab/gpu_probes/l2_prefetch.mjs", "--tiny")  # a sidecar that missed a word, or other bits, exits non-zero
    pairs = [r for r in rows if r["form"] == "pre with sidecar, then product"]
    assert {r["kernel"] for r in pairs} == {"norm fused", "plain"}
    assert all(r["same_as_without"] and r["sidecar_read_every_word"] for r in pairs)
    assert all(r["us"] > 0 for r in rows)


def test_wave_sweep_variants_give_the_engines_outputs():
    rows = _run("lab/gpu_probes/wave_sweep.mjs", "--tiny")
    checks = {r["kernel"]: r["same_as_engine"] for r in rows if "same_as_engine" in r}
    assert {"routed gate/up, top-k ranked (engine)", "routed gate/up, ids read, staging for 256 blocks",
            "down products + sums, staging for 256 blocks", "matvec norm fused, staging for 256 blocks",
            "output head, 1 block per step"} <= set(checks)
    assert all(checks.values()), checks
    timed = [r for r in rows if "us" in r]
    assert timed and all(r["us"] > 0 and 0 < r["workgroups"] <= r["of"] for r in timed)
    assert "rose_by_a_quarter_at" in rows[-1]


def test_step_kernels_time_attention_and_the_recurrence():
    rows = _run("lab/gpu_probes/step_kernels.mjs", "--tiny")
    kinds = {r["kernel"] for r in rows}
    assert {"empty dispatch (1 workgroup)", "attention", "attention_combine", "gdn_conv_recurrent"} <= kinds
    assert all(r["us"] > 0 for r in rows)
    forms = [r for r in rows if r["kernel"] == "attention"]
    assert {r["form"] for r in forms} == {"engine", "loads one at a time"}
    assert all(r["same_as_engine"] is True for r in forms), forms
    gdn = {r["value_columns"]: r for r in rows if r["kernel"] == "gdn_conv_recurrent"}
    assert set(gdn) == {8, 32} and gdn[8]["rel_err"] == 0
    assert gdn[32]["rel_err"] < 1e-5  # the same rule, its key rows summed in another order


def test_matvec_anatomy_times_every_form_and_keeps_the_engines_bits():
    rows = _run("lab/gpu_probes/matvec_anatomy.mjs", "--tiny")
    forms = {(r["kernel"], r["form"]) for r in rows}
    for kernel in ("norm fused", "plain"):
        assert {(kernel, f) for f in ("engine, cold weights", "engine, warm weights", "x quantised ahead",
                                      "weights not read", "x quantised ahead, weights not read",
                                      "row sums not taken", "parameters in the code")} <= forms
    assert ("norm fused", "x normalised ahead") in forms
    # (after a flush a form's figure is a difference, which noise can take below zero on a shared CPU)
    assert all(r["us"] > 0 for r in rows if "flush_and_empty_us" not in r)
    # cold: more than one copy of the weights, read in turn; every copy gives the engine's outputs bit for bit
    engine = [r for r in rows if r["form"] in ("engine, cold weights", "engine, warm weights",
                                               "parameters in the code")]
    assert all(r["same_as_engine"] is True for r in engine), engine
    assert all(r["copies"] > 1 for r in engine if r["form"] == "engine, cold weights")
    # each form at the engine's launch and at one workgroup per SM; two also after a read that flushes the L2 cache
    # (less a flush + empty kernel's time)
    flushed = {kf for kf in forms if kf[1].endswith("L2 flushed before each")}
    assert {f for _, f in flushed} == {"engine, L2 flushed before each",
                                       "parameters in the code, L2 flushed before each"}
    assert all(r["flush_and_empty_us"] > 0 for r in rows if (r["kernel"], r["form"]) in flushed)
    assert all(len({r["workgroups"] for r in rows if (r["kernel"], r["form"]) == kf}) == 2 for kf in forms - flushed)


def test_grid_barrier_counts_every_arrival_and_read():
    rows = _run("lab/gpu_probes/grid_barrier.mjs", "--tiny")
    (limits,) = [r["adapter_limits"] for r in rows if "adapter_limits" in r]
    assert limits["maxStorageBuffersPerShaderStage"] >= 8
    barriers = [r for r in rows if "mode" in r]
    assert {r["mode"] for r in barriers} == {"plain", "atomic"}
    streams = {r["streaming"]: r for r in rows if "streaming" in r}
    forms = {"one dispatch per phase", "persistent, loads after the barrier", "persistent, next phase prefetched"}
    dependent = ", reading the activation the phase before wrote"
    assert set(streams) == forms | {f + dependent for f in forms}
    assert all(r["dependent"] == r["streaming"].endswith(dependent) for r in streams.values())
    assert all(r["timeouts"] == 0 and r["phase_bytes"] > 0 for r in streams.values())
    for r in barriers:  # a grid of one: its own values, never stale, no wait can time out
        assert r["arrivals"] == r["expected_arrivals"] == r["reads"] and r["stale"] == 0 and r["timeouts"] == 0
        assert r["us_few"] > 0 and r["us_many"] > 0


def test_persistent_chain_gives_the_dispatches_bits():
    rows = _run("lab/gpu_probes/persistent_chain.mjs", "--tiny")
    forms = {r["form"]: r for r in rows}
    assert set(forms) == {"one dispatch per product", "persistent",
                          "persistent, next product's first tile loaded before the barrier"}
    # a grid of one workgroup: the engine's arithmetic in the same order, so the dispatches' outputs bit for bit
    assert all(r["same_as_dispatches"] is True and r["timeouts"] == 0 for r in rows), rows
    assert all(r["us_chain"] > 0 and r["us_chain_of_2"] > 0 for r in rows)


def test_call_costs_time_every_mix():
    rows = _run("lab/gpu_probes/call_costs.mjs", "--shared", "8")
    mixes = [r for r in rows if "us_per_dispatch" in r]
    shared = [r for r in mixes if "shared layout" in r["variant"]]
    assert [r["submits_per_100"] for r in shared] == [1, 5] and "bindgroup(8) per 6" in shared[0]["variant"]
    assert {r["variant"] for r in mixes} >= {"pipeline+bindgroup(8)+dispatch", "dispatch only"}
    assert all(r["us_per_dispatch"] > 0 for r in mixes)
    assert rows[-1]["variant"] == "await" and rows[-1]["mapAsync_us"] > 0
