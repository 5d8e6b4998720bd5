"""The gemma4 GPU engine (Pyodide + Dawn on lavapipe in Node) against llama.cpp's refs by the fixtures protocol
(../shared/fixtures-gemma4/README.md section 4), and against the numpy reference model's logits.

Teacher-forced along each prompt's greedy_ids; every prompt of a model runs through one Decoder (each later prompt
also proves that position 0 starts afresh, the sliding-window rings included), the prompts through the batched
prefill (chunks of 64 on lavapipe: the longer prompts take two, and the windows' rings wrap). The engine computes
GELU exactly, so the F32 twins are held to the exact-GELU refs' per-step limits, with an f32 KV cache and with the
default f16 one; the Q4_0 files to the statistical f32-activation limits, in the f32-activation mode and in the
default mode (Q4_0 products quantise their input to Q8_0 as llama.cpp does; the Q6_K head and GELU stay exact, so
the tighter emulation limits do not apply). One Node process runs each group of jobs (start-up and shader
compilation cost seconds).

tiny-gemma4-f32 with the f16 cache runs its prompts token by token: with f16 K/V its prompt 3 has a router near-tie
(layer 4, token 38: the 2nd and 3rd experts' probabilities 4.1e-5 apart in the numpy reference, float64) which the
chunked prefill's rounding resolves the other way (the batched and token-by-token f16 logits differ by ~2e-3 before
it), and the whole rest of the prompt then moves by up to 0.066 > the f16 limit 0.036; with an f32 cache the
batched prefill stays within 4.4e-5 of the refs.
"""
import asyncio
import json
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest

from conftest import GEMMA4_REFS, SHARED
from diskformer.node_engine import run_in_node
from diskformer.reference import gemma4 as reference_gemma4
from diskformer.reference import layers, protocol
from diskformer.reference.model import ReferenceModel
from diskformer.reference.options import Options
from node_helpers import engine_logits, run_teacher_forced

F32_MODELS = ["micro-gemma4-f32", "tiny-gemma4-f32"]
Q4_MODELS = ["micro-gemma4", "tiny-gemma4"]
TOKEN_JOBS = [("tiny-gemma4-f32", "f16")]  # prompts token by token (the module docstring says why)
JOBS = [(m, kv) for m in F32_MODELS for kv in ("f32", "f16") if (m, kv) not in TOKEN_JOBS] + \
    [(m, "f16") for m in Q4_MODELS]

# Engine (f32 activations) vs the numpy reference (float64, K/V rounded to f16 when the engine's cache is f16), over
# every logit of every compared step. f32 cache: the qwen engines' bound (test_qwen35moe_node.py). f16 cache:
# measured on lavapipe at most 0.0044 (micro-gemma4, micro-gemma4-f32, tiny-gemma4, prompts 0 and 1): an f32
# difference that moves a K/V value across an f16 rounding boundary moves it by a whole f16 step, and these random
# models amplify that more than the qwen fixtures; the bound leaves 2x head-room.
REFERENCE_MAX_ABS = {"f32": 1e-3, "f16": 1e-2}
REFERENCE_PROMPTS = (0, 1)
ROUTING_TIE = 1e-6  # a top-k boundary gap (router probability) an f32 engine may resolve either way


@pytest.fixture(scope="module")
def models_dir(gemma4_models):
    return gemma4_models.resolve()  # a linked folder: Node mounts the real path


@pytest.fixture(scope="module")
def engine_runs(models_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gemma4_logits")
    return out, run_teacher_forced(JOBS, models_dir, GEMMA4_REFS, out, timeout=1800, act="f32")


@pytest.fixture(scope="module")
def token_runs(models_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gemma4_logits_token")
    return out, run_teacher_forced(TOKEN_JOBS, models_dir, GEMMA4_REFS, out, timeout=1800, act="f32", prefill_chunk=1)


@pytest.fixture(scope="module")
def default_runs(models_dir, tmp_path_factory):
    """The Q4_0 files in the engine's default mode (Q8_0-quantised inputs of the Q4_0 products)."""
    out = tmp_path_factory.mktemp("gemma4_logits_q8act")
    return out, run_teacher_forced([(m, "f16") for m in Q4_MODELS], models_dir, GEMMA4_REFS, out, timeout=1800)


def protocol_result(out, stem, kv):
    """The protocol's verdict on the logits a run wrote: F32 models against the exact-GELU refs."""
    refs = protocol.load_refs(stem, GEMMA4_REFS)
    tolerances = protocol.load_tolerances(GEMMA4_REFS)
    f32 = tolerances["models"][stem]["weights"] == "F32"
    n_vocab = protocol.load_step0_logits(stem, 0, GEMMA4_REFS).size
    metrics = []
    for p in refs["prompts"]:
        rows = engine_logits(out, stem, kv, p["index"], n_vocab)
        assert rows.shape[0] == len(p["steps"])
        scored = protocol.exact_gelu_prompt(p) if f32 else p
        step0 = protocol.load_step0_logits(stem, p["index"], GEMMA4_REFS, "exact_gelu" if f32 else None)
        metrics.append(protocol.prompt_metrics(scored, rows, step0))
    return protocol.check_limits(stem, metrics, tolerances, kv=kv, engine="f32act",
                                 limits_key=f"{kv}_kv_cache_exact_gelu" if f32 else None)


@pytest.mark.parametrize("stem,kv", JOBS + [(m, "f16-q8act") for m in Q4_MODELS] + [(m, f"{kv}-token")
                                                                                     for m, kv in TOKEN_JOBS])
def test_teacher_forced_protocol(request, stem, kv):
    runs = "default_runs" if kv.endswith("-q8act") else "token_runs" if kv.endswith("-token") else "engine_runs"
    out, _ = request.getfixturevalue(runs)
    result = protocol_result(out, stem, kv.removesuffix("-q8act").removesuffix("-token"))
    print(result.report())
    assert result.passed, result.report()


def test_runs_report_gemma4(engine_runs):
    _, result = engine_runs
    stats = [job["stats"] for job in result["jobs"]]
    assert all(s["arch"] == "gemma4" for s in stats)
    # the prompts went through the batched prefill, each whole (its last row through the output head alone)
    assert all(s["prefill_chunk"] > 1 and s["whole_prompts"] == 5 for s in stats)


def reference_teacher_forced(model, prompt):
    """The numpy reference's logits along the prompt's greedy_ids, and how many leading steps come before a router
    near-tie (past one, the engine may legitimately pick the other expert)."""
    gaps = []
    route = reference_gemma4.RoutedExperts.route

    def recording_route(self, h):
        router_in = layers.rms_norm(h, 1.0, self.eps) * self.input_scale * self.router_scale
        probs = np.sort(layers.softmax(router_in @ self.router.T, axis=-1), axis=-1)[:, ::-1]
        gaps.append(probs[:, self.n_used - 1] - probs[:, self.n_used])
        return route(self, h)

    with mock.patch.object(reference_gemma4.RoutedExperts, "route", recording_route):
        rows = model.teacher_forced(prompt["prompt_ids"], prompt["greedy_ids"][:-1])
    n_layers, n_prompt = model.config.n_layer, len(prompt["prompt_ids"])
    for call, g in enumerate(gaps):  # the prompt in one batch (one call per layer), then one token per call
        if g.min() < ROUTING_TIE:
            token = int(np.argmin(g)) if call < n_layers else n_prompt + (call - n_layers) // n_layers
            return rows, max(0, token - n_prompt + 1)
    return rows, rows.shape[0]


@pytest.mark.parametrize("stem,kv", [(m, "f16") for m in ["micro-gemma4-f32"] + Q4_MODELS] +
                         [(m, "f32") for m in F32_MODELS])
def test_matches_numpy_reference(engine_runs, models_dir, stem, kv):
    out, _ = engine_runs
    refs = protocol.load_refs(stem, GEMMA4_REFS)
    model = ReferenceModel(str(models_dir / f"{stem}.gguf"), Options(dtype=np.float64, kv_f16=kv == "f16"))
    compared = 0
    for p in refs["prompts"]:
        if p["index"] not in REFERENCE_PROMPTS:
            continue
        ref, n_steps = reference_teacher_forced(model, p)
        rows = engine_logits(out, stem, kv, p["index"], ref.shape[1])
        diff = np.abs(rows[:n_steps] - ref[:n_steps]).max(axis=1)
        assert diff.max() <= REFERENCE_MAX_ABS[kv], (
            f"{stem} ({kv} KV) prompt {p['index']}: max |engine - reference| logit {diff.max():.3g} at step "
            f"{int(diff.argmax())} > {REFERENCE_MAX_ABS[kv]}")
        compared += n_steps
    assert compared >= 32, f"{stem}: only {compared} steps before router near-ties"


# The real Gemma 4 26B-A4B's head sizes (256 on the sliding-window layers, 512 on the global ones, which the fixtures'
# 64 / 128 do not reach: two value pairs per lane in the decode attention, four in the prefill's), on micro's
# other dimensions, F32 weights: the engine against the numpy reference along a prompt past the window, prefilled
# in chunks and token by token.
WIDE_ARGS = ["--arch", "gemma4", "--preset", "micro", "--qtype", "f32", "--head-dim", "256", "--head-dim-full", "512",
             "--kv-heads-full", "2", "--seed", "7"]


@pytest.fixture(scope="module")
def wide_heads(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma4_wide")
    model = d / "wide-gemma4-f32.gguf"
    subprocess.run([sys.executable, str(SHARED / "tools" / "make_tiny.py"), *WIDE_ARGS, "--out", str(model)],
                   check=True, capture_output=True)
    rng = np.random.default_rng(5)
    ids, forced = [2] + [int(i) for i in rng.integers(19, 600, 39)], [int(i) for i in rng.integers(19, 600, 8)]
    jobs = [{"model": str(model), "kv": "f32", "act": "f32", "prefill_chunk": chunk,
             "runs": [{"ids": ids, "teacher_force": forced, "top": 5, "logits_out": str(d / f"chunk{chunk}.f32")}]}
            for chunk in (16, 1)]
    run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[d], timeout=900)
    ref = ReferenceModel(str(model), Options(dtype=np.float64)).teacher_forced(ids, forced)
    return d, ref


@pytest.mark.parametrize("chunk", [16, 1])
def test_real_head_sizes_match_numpy_reference(wide_heads, chunk):
    d, ref = wide_heads
    rows = np.fromfile(d / f"chunk{chunk}.f32", dtype="<f4").reshape(-1, ref.shape[1])
    diff = np.abs(rows - ref).max()
    assert rows.shape == ref.shape and diff <= REFERENCE_MAX_ABS["f32"], f"max |engine - reference| {diff:.3g}"


# The store engine: each model ingested into a model store (CPython), then run from it with the routed experts
# streamed into the smallest pool the budget allows (split into buffers of 3 slots), prompts in chunks, by the
# same protocol; an F32 twin with an f32 cache also against the GGUF engine's logits, and once more with every token
# stopped on the GPU where a layer's experts are missing (early stop, resumed after the paging) and the next
# layer's experts guessed by the router look-ahead and prefetched.
STORE_JOBS = [("micro-gemma4-f32", "f32", "f32"), ("micro-gemma4", "f16", "q8"), ("tiny-gemma4", "f16", "q8")]
STORE_MAX_ABS = 1e-3  # measured 5.5e-5 (the pool kernels add the products in another order than the resident ones)


@pytest.fixture(scope="module")
def store_runs(models_dir, engine_runs, tmp_path_factory):
    from py_engine.store import ingest
    from py_engine.store.local import DirectoryStorage, FileSource

    root, out = tmp_path_factory.mktemp("gemma4_stores"), tmp_path_factory.mktemp("gemma4_store_logits")
    storage = DirectoryStorage(root)
    jobs = []
    for stem, kv, act in STORE_JOBS:
        src = FileSource(models_dir / f"{stem}.gguf")
        try:
            manifest = asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
        runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                 "logits_out": str(out / f"{stem}.{kv}.{p['index']}.f32")}
                for p in protocol.load_refs(stem, GEMMA4_REFS)["prompts"]]
        jobs.append({"store": str(root / stem), "kv": kv, "act": act, "budget": "min", "verify_pool": True,
                     "max_pool_buffer": 3 * manifest["layout"]["experts"]["record_size"], "runs": runs})
    stem, kv, act = STORE_JOBS[0]
    early = [dict(r, logits_out=r["logits_out"].replace(f".{kv}.", ".early.")) for r in jobs[0]["runs"]]
    jobs.append({"store": str(root / stem), "kv": kv, "act": act, "budget": "min", "routing": "early_stop",
                 "prefetch_depth": 1, "prefill_chunk": 1, "runs": early})
    return out, run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[root, models_dir, out],
                            timeout=1800)


@pytest.mark.parametrize("stem,kv", [(stem, kv) for stem, kv, _ in STORE_JOBS])
def test_store_engine_with_the_smallest_pool_passes_the_protocol(store_runs, stem, kv):
    out, result = store_runs
    job = result["jobs"][[s for s, _, _ in STORE_JOBS].index(stem)]
    stats, check = job["stats"], job["pool_check"]
    assert stats["arch"] == "gemma4" and stats["mode"] == "partial" and stats["budget"]["slots"] < 8 * 4
    # every slot held its record byte for byte, the GPU's expert -> slot map the streamer's
    assert check["slots_checked"] == stats["budget"]["slots"] and not check["slots_bad"] and check["map_equal"]
    result = protocol_result(out, stem, kv)
    print(result.report())
    assert result.passed, result.report()


@pytest.mark.parametrize("tag", ["f32", "early"])
def test_store_engine_gives_the_gguf_engines_logits(store_runs, engine_runs, tag):
    stem = "micro-gemma4-f32"
    if tag == "early":
        stats = store_runs[1]["jobs"][-1]["stats"]
        assert stats["routing"] == "early_stop" and stats["resumes"] > 0 and stats["guessed"] > 0
    for p in protocol.load_refs(stem, GEMMA4_REFS)["prompts"]:
        n_vocab = protocol.load_step0_logits(stem, 0, GEMMA4_REFS).size
        streamed = engine_logits(store_runs[0], stem, tag, p["index"], n_vocab)
        resident = engine_logits(engine_runs[0], stem, "f32", p["index"], n_vocab)
        assert np.abs(streamed - resident).max() <= STORE_MAX_ABS
