"""The CPU expert tier on gemma4's experts in the store engine's miss path (Pyodide + Dawn on lavapipe, the tier's
workers in Node): fused gate|up halves, GEGLU, Q4_0 records (nibble and scale planes) or the F32 twin's, and the
per-expert down scale folded into the routing weights, the CPU's weighted sum added into the routed sum before its
post-norm.

One Node process runs micro-gemma4-f32 (f32 KV cache, f32 activations) from the GGUF with every expert resident and
from a store with the smallest pool and the tier on, "all" (every miss computed on the CPU) and "mixed" (one miss a
layer on the CPU, the others uploaded: both tiers in one sum), "prefetch" ("all" beside the router look-ahead's
prefetch: its guesses share the readback with the weights and xe), prompts token by token, and "cost" (the cost model's
choice, two workers) with the prompts through the batched prefill beside the resident engine prefilling the same
way; and micro-gemma4 (Q4_0, default f16 cache and Q8_0 activations) with "all". F32: the logits within MAX_ABS of
the resident engine; Q4_0: the fixtures' protocol.
"""
import asyncio
from pathlib import Path

import numpy as np
import pytest

from conftest import GEMMA4_REFS
from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource

ROOT_DIR = Path(__file__).resolve().parents[2]
POOL_URL = (ROOT_DIR / "web" / "cpu_tier" / "pool.js").as_uri()
F32, Q4 = "micro-gemma4-f32", "micro-gemma4"
PROMPTS = (0, 1)
# the CPU's SIMD products and its share of the routed sum add in another order than the GPU's lanes: measured at
# most 1.3e-5 token by token and 1.9e-5 with the batched prefill (logits up to ~10); a routing flip would differ by
# whole units
MAX_ABS = 1e-4
VARIANTS = {"all": {"cpu_tier_place": "all", "prefill_chunk": 1},
            "mixed": {"cpu_tier_place": "all", "cpu_tier_max": 1, "prefill_chunk": 1},
            "prefetch": {"cpu_tier_place": "all", "prefetch_depth": 1, "prefill_chunk": 1},
            "cost": {"cpu_tier_place": "cost", "cpu_tier": 2}}
# the resident run that prefills the same way
BASELINE = {"all": "gguf", "mixed": "gguf", "prefetch": "gguf", "cost": "gguf-chunked"}
JOBS = [(F32, "gguf"), (F32, "gguf-chunked"), (F32, "all"), (F32, "mixed"), (F32, "prefetch"), (F32, "cost"),
        (Q4, "all")]


@pytest.fixture(scope="module")
def tiered(gemma4_models, tmp_path_factory):
    models = gemma4_models.resolve()  # a linked folder: Node mounts the real path
    root = tmp_path_factory.mktemp("stores")
    out = tmp_path_factory.mktemp("cpu_tier_gemma4_logits")
    storage = DirectoryStorage(root)
    manifests, jobs = {}, []
    for stem in (F32, Q4):
        src = FileSource(models / f"{stem}.gguf")
        try:
            manifests[stem] = asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
    for stem, tag in JOBS:
        refs = protocol.load_refs(stem, GEMMA4_REFS)
        runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                 "logits_out": str(out / f"{stem}.{tag}.{p['index']}.f32")}
                for p in refs["prompts"] if p["index"] in PROMPTS]
        mode = {"kv": "f32", "act": "f32"} if stem == F32 else {"kv": "f16"}
        if tag == "gguf":
            job = {"model": str(models / f"{stem}.gguf"), "prefill_chunk": 1}
        elif tag == "gguf-chunked":
            job = {"model": str(models / f"{stem}.gguf")}
        else:
            job = {"store": str(root / stem), "budget": "min", "cpu_tier": 1, "cpu_tier_url": POOL_URL,
                   **VARIANTS[tag]}
        jobs.append({**job, **mode, "runs": runs})
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[root, models, out],
                         timeout=900)
    return out, dict(zip(JOBS, result["jobs"])), manifests


def _rows(out, stem, tag, index, n_vocab):
    return np.fromfile(out / f"{stem}.{tag}.{index}.f32", dtype="<f4").reshape(-1, n_vocab)


@pytest.mark.parametrize("tag", ["all", "mixed", "prefetch", "cost"])
def test_f32_twin_gives_the_resident_engines_logits(tiered, tag):
    out, _, _ = tiered
    n_vocab = protocol.load_step0_logits(F32, 0, GEMMA4_REFS).size
    for index in PROMPTS:
        base = _rows(out, F32, BASELINE[tag], index, n_vocab)
        rows = _rows(out, F32, tag, index, n_vocab)
        assert rows.shape == base.shape
        diff = float(np.abs(rows - base).max())
        print(f"{F32} {tag} prompt {index}: max |logit difference| {diff:.3g}")
        assert diff <= MAX_ABS, f"{F32} {tag} prompt {index}: logits differ by {diff}"


def test_q4_passes_the_reference_protocol(tiered):
    out, _, _ = tiered
    refs = protocol.load_refs(Q4, GEMMA4_REFS)
    n_vocab = protocol.load_step0_logits(Q4, 0, GEMMA4_REFS).size
    metrics = [protocol.prompt_metrics(p, _rows(out, Q4, "all", p["index"], n_vocab),
                                       protocol.load_step0_logits(Q4, p["index"], GEMMA4_REFS))
               for p in refs["prompts"] if p["index"] in PROMPTS]
    result = protocol.check_limits(Q4, metrics, protocol.load_tolerances(GEMMA4_REFS), kv="f16", engine="f32act")
    print(result.report())
    assert result.passed, result.report()


@pytest.mark.parametrize("stem,tag", [j for j in JOBS if not j[1].startswith("gguf")])
def test_misses_go_to_the_cpu(tiered, stem, tag):
    _, jobs, manifests = tiered
    record = manifests[stem]["layout"]["experts"]["record_size"]
    n_layers = len(manifests[stem]["layout"]["experts"]["layers"])
    s = jobs[(stem, tag)]["stats"]
    st, tier = s["streamer"], s["cpu_tier"]
    assert s["arch"] == "gemma4" and s["mode"] == "partial"
    assert s["routing"] == "per_layer"
    if VARIANTS[tag].get("prefill_chunk") == 1:  # every token through the per-layer loop (no batched prefill)
        assert s["per_layer_tokens"] == s["tokens"]
    assert st["misses"] > 0 and tier["experts"] == st["placed_elsewhere"]
    assert tier["bytes_read"] == tier["experts"] * record
    assert tier["workers"] == VARIANTS[tag].get("cpu_tier", 1) and tier["mode"] == VARIANTS[tag]["cpu_tier_place"]
    if tag in ("all", "prefetch"):
        assert tier["share_of_misses"] == 1.0 and tier["ms_per_token"] > 0
    if tag == "prefetch":
        assert st["prefetch_issued"] > 0
    if tag == "mixed":
        assert 0 < tier["share_of_misses"] < 1 and tier["experts"] <= s["tokens"] * n_layers
    assert all(v > 0 for v in tier["rates_at_load"].values())
