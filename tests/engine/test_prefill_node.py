"""Chunked batched prefill (py_engine/engine/prefill.py) against token-by-token prefill, in one Node process
(Pyodide + Dawn on lavapipe).

Per model the same prompts run with prefill_chunk 1 (every prompt token through the per-token list) and chunked
(16: several chunks and a short last one; 64 on a long prompt). The next-token logits after the prompt, and every
teacher-forced step after it, must agree within a tight relative bound; the chunked runs must pass the fixtures
protocol; the store engine with the smallest expert pool (the union of each chunk's experts paged in per layer,
in groups the pool can hold) must match too, with its pool intact afterwards.
"""
import asyncio

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from py_engine.gguf import read_gguf_file
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource


# (stem, kv): F32 fixtures with the exact cache (the tightest comparison), Q8_0 ones from a store with the minimum pool
GGUF = [("micro-qwen3moe-f32", "f32"), ("micro-qwen35moe-f32", "f32")]
STORES = [("micro-qwen3moe", "f16"), ("micro-qwen35moe", "f16")]
PROMPTS = (0, 1)
LONG = [(i * 37 + 11) % 400 for i in range(100)]  # 99 fed tokens: chunks of 16 (6 full + 3) and 64 (64 + 35)
REL_TOL = 1e-4  # max |chunked - token by token| over a step's logits, relative to the step's largest |logit|


def _runs(refs, out, tag, n_vocab):
    runs = [{"ids": refs["prompts"][i]["prompt_ids"], "teacher_force": refs["prompts"][i]["greedy_ids"][:-1],
             "logits_out": str(out / f"{tag}.p{i}.f32")} for i in PROMPTS]
    runs.append({"ids": [t % n_vocab for t in LONG], "teacher_force": [1, 2, 3],
                 "logits_out": str(out / f"{tag}.long.f32")})
    return runs


@pytest.fixture(scope="module")
def prefill_runs(fixture_models, refs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("prefill_logits")
    root = tmp_path_factory.mktemp("prefill_stores")
    storage = DirectoryStorage(root)
    jobs, names = [], []
    for stem, kv in GGUF + STORES:
        refs = protocol.load_refs(stem, refs_dir)
        n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
        base = {"model": str(fixture_models / f"{stem}.gguf"), "kv": kv}
        variants = {"t1": dict(base, prefill_chunk=1), "c16": dict(base, prefill_chunk=16)}
        if (stem, kv) in GGUF:
            variants["c64"] = dict(base, prefill_chunk=64)
        # every model also runs from a store with the minimum pool (F32 and Q8_0 expert planes take different
        # binding layouts in the streamed GEMM)
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
        variants["store_min"] = {"store": str(root / stem), "kv": kv, "budget": "min", "prefill_chunk": 16,
                                 "verify_pool": True}
        if (stem, kv) in STORES:
            # the tight comparison runs with f32 activations: with Q8_0 activation quantisation (the default, as
            # llama.cpp) a different summation order can flip an int8 code, which moves a toy model's logits by
            # ~1e-2 (test_engine_vs_reference_node.py); the default mode is held to the protocol below
            variants = {tag: dict(job, act="f32") for tag, job in variants.items()}
            variants["store_min_q8"] = dict(variants["store_min"], act="q8", verify_pool=False)
        for tag, job in variants.items():
            jobs.append(dict(job, runs=_runs(refs, out, f"{stem}.{tag}", n_vocab)))
            names.append((stem, tag))
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[fixture_models, out, root],
                         timeout=600)
    return out, dict(zip(names, result["jobs"]))


def _rows(out, tag, which, n_vocab):
    return np.fromfile(out / f"{tag}.{which}.f32", dtype="<f4").reshape(-1, n_vocab)


def _n_vocab(stem, refs_dir):
    return protocol.load_step0_logits(stem, 0, refs_dir).size


@pytest.mark.parametrize("stem,kv", GGUF + STORES)
def test_chunked_prefill_gives_token_by_token_logits(prefill_runs, refs_dir, stem, kv):
    out, jobs = prefill_runs
    n_vocab = _n_vocab(stem, refs_dir)
    chunked = ["c16", "c64", "store_min"] if (stem, kv) in GGUF else ["c16", "store_min"]
    worst = 0.0
    for which in [f"p{i}" for i in PROMPTS] + ["long"]:
        ref = _rows(out, f"{stem}.t1", which, n_vocab)
        for tag in chunked:
            got = _rows(out, f"{stem}.{tag}", which, n_vocab)
            assert got.shape == ref.shape
            rel = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
            worst = max(worst, float(rel.max()))
            assert rel.max() < REL_TOL, (tag, which, rel)
            assert np.array_equal(got.argmax(axis=1), ref.argmax(axis=1)), (tag, which)
    print(f"{stem}: worst relative logit difference chunked vs token by token {worst:.2e}")
    stats = jobs[(stem, "c16")]["stats"]
    assert stats["prefill_chunk"] == 16 and stats["prefill_flops_per_token"] > 0
    assert jobs[(stem, "t1")]["stats"]["prefill_chunk"] == 1
    # every expert resident, chunked: each prompt whole through the chunks, its last row through the output head
    # alone; token by token and the store engine step the last token
    assert stats["whole_prompts"] == len(PROMPTS) + 1 and jobs[(stem, "t1")]["stats"]["whole_prompts"] == 0


@pytest.mark.parametrize("stem,kv", GGUF + STORES)
def test_chunked_prefill_passes_the_reference_protocol(prefill_runs, refs_dir, stem, kv):
    out, _ = prefill_runs
    refs = protocol.load_refs(stem, refs_dir)
    n_vocab = _n_vocab(stem, refs_dir)
    tag = "c16" if (stem, kv) in GGUF else "store_min_q8"
    metrics = [protocol.prompt_metrics(refs["prompts"][i], _rows(out, f"{stem}.{tag}", f"p{i}", n_vocab),
                                       protocol.load_step0_logits(stem, i, refs_dir)) for i in PROMPTS]
    result = protocol.check_limits(stem, metrics, protocol.load_tolerances(refs_dir), kv=kv, engine="f32act")
    print(result.report())
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", [s for s, _ in STORES])
def test_streamed_chunks_page_each_layers_union(prefill_runs, fixture_models, stem):
    _, jobs = prefill_runs
    res = jobs[(stem, "store_min")]
    check = res["pool_check"]
    assert check["slots_bad"] == [] and check["map_equal"] and check["slots_checked"] > 0
    s = res["stats"]
    assert s["mode"] == "partial" and s["prefill_chunk"] == 16
    n_layer = read_gguf_file(fixture_models / f"{stem}.gguf").metadata[f"{stem.split('-')[-1]}.block_count"]
    chunks = sum(-(-(r["timing"]["prompt_tokens"] - 1) // 16) for r in res["runs"])
    # per chunk and layer one routed-ids readback, then the union paged in: at least one group (more when the
    # union exceeds what the minimum pool can hold at once)
    assert s["prefill_groups"] >= chunks * n_layer
