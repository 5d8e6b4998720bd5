"""The CPU expert tier in the store engine's miss path (Pyodide + Dawn on lavapipe, the tier's workers in Node).

One Node process runs, per fixture, the smallest pool with the CPU tier on: "all" (every miss computed on the CPU,
so the GPU's pool products skip those experts and the CPU's weighted sum is added on the GPU) and, on the F32
fixtures, "cost" (the cost model's choice from the rates measured at load) beside the GGUF engine with every expert
resident. F32: the logits within ~1e-4 of the resident engine (STEP_TOL, TYPICAL_TOL). Q8_0: the reference protocol (the tier quantises
activations as the GPU's products do). The stats must show where the misses went.
"""
import asyncio
from pathlib import Path

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource

ROOT_DIR = Path(__file__).resolve().parents[2]
F32 = ["micro-qwen3moe-f32", "micro-qwen35moe-f32"]
Q8 = ["micro-qwen3moe", "micro-qwen35moe"]
PROMPTS = (0, 1)
# the CPU's SIMD products sum in another order than the GPU's lanes (and its SiLU takes exp in f64): per step the
# largest |difference| is typically ~1e-4 on micro-qwen3moe-f32 (logits up to 16), up to 4e-4 at its most sensitive
# step depending on which experts the CPU computed, and < 7e-5 on micro-qwen35moe-f32. A routing flip would differ
# by whole units.
STEP_TOL = 1e-3  # every step
TYPICAL_TOL = 1.5e-4  # the median step
POOL_URL = (ROOT_DIR / "web" / "cpu_tier" / "pool.js").as_uri()


# "all": every miss on the CPU; "mixed": one miss a layer on the CPU, the others uploaded (both tiers in one sum);
# "cost": the cost model's choice; "prefetch": "all" beside the router look-ahead's prefetch (its guesses share the
# readback with the weights and xn)
VARIANTS = {"all": {"cpu_tier_place": "all"}, "mixed": {"cpu_tier_place": "all", "cpu_tier_max": 1},
            "cost": {"cpu_tier_place": "cost"}, "prefetch": {"cpu_tier_place": "all", "prefetch_depth": 1}}
TIERED = {"micro-qwen3moe-f32": ["all", "mixed", "cost"], "micro-qwen35moe-f32": ["all", "mixed", "prefetch"]}


def _variants(stem):
    return ["gguf", *TIERED[stem]] if stem in F32 else ["all"]


@pytest.fixture(scope="module")
def tiered(fixture_models, refs_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    out = tmp_path_factory.mktemp("cpu_tier_logits")
    storage = DirectoryStorage(root)
    manifests, jobs, names = {}, [], []
    for stem in F32 + Q8:
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            manifests[stem] = asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
        refs = protocol.load_refs(stem, refs_dir)
        for tag in _variants(stem):
            runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                     "logits_out": str(out / f"{stem}.{tag}.{p['index']}.f32")}
                    for p in refs["prompts"] if p["index"] in PROMPTS]
            if tag == "gguf":
                job = {"model": str(fixture_models / f"{stem}.gguf")}
            else:
                job = {"store": str(root / stem), "budget": "min", "cpu_tier": 1, "cpu_tier_url": POOL_URL,
                       **VARIANTS[tag]}
            jobs.append({**job, "runs": runs, "prefill_chunk": 1})
            names.append((stem, tag))
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[root, fixture_models, out],
                         timeout=400)
    return out, dict(zip(names, result["jobs"])), manifests


def _rows(out, stem, tag, index, n_vocab):
    return np.fromfile(out / f"{stem}.{tag}.{index}.f32", dtype="<f4").reshape(-1, n_vocab)


@pytest.mark.parametrize("stem", F32)
def test_f32_logits_match_the_resident_engine(tiered, refs_dir, stem):
    out, _, _ = tiered
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    for tag in TIERED[stem]:
        for index in PROMPTS:
            base = _rows(out, stem, "gguf", index, n_vocab)
            rows = _rows(out, stem, tag, index, n_vocab)
            assert rows.shape == base.shape
            steps = np.abs(rows - base).max(axis=1)
            diff, typical = float(steps.max()), float(np.median(steps))
            print(f"{stem} {tag} prompt {index}: max |logit difference| {diff:.3g}, median step {typical:.3g}")
            assert diff <= STEP_TOL, f"{stem} {tag} prompt {index}: logits differ by {diff}"
            assert typical <= TYPICAL_TOL, f"{stem} {tag} prompt {index}: logits differ by {typical} at most steps"
            top2 = np.sort(base, axis=1)[:, -2:]
            clear = (top2[:, 1] - top2[:, 0]) > 2 * STEP_TOL
            assert (rows.argmax(1)[clear] == base.argmax(1)[clear]).all()


@pytest.mark.parametrize("stem", Q8)
def test_q8_passes_the_reference_protocol(tiered, refs_dir, stem):
    out, _, _ = tiered
    refs = protocol.load_refs(stem, refs_dir)
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    metrics = [protocol.prompt_metrics(p, _rows(out, stem, "all", p["index"], n_vocab),
                                       protocol.load_step0_logits(stem, p["index"], refs_dir))
               for p in refs["prompts"] if p["index"] in PROMPTS]
    result = protocol.check_limits(stem, metrics, protocol.load_tolerances(refs_dir), kv="f16", engine="f32act")
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", F32 + Q8)
def test_misses_go_where_the_placement_sends_them(tiered, stem):
    _, jobs, manifests = tiered
    record = manifests[stem]["layout"]["experts"]["record_size"]
    n_layers = len(manifests[stem]["layout"]["experts"]["layers"])
    for tag in _variants(stem):
        if tag == "gguf":
            continue
        s = jobs[(stem, tag)]["stats"]
        st, tier = s["streamer"], s["cpu_tier"]
        assert s["routing"] == "per_layer" and s["per_layer_tokens"] == s["tokens"]
        assert tier["workers"] == 1 and tier["mode"] == VARIANTS[tag]["cpu_tier_place"]
        assert st["misses"] > 0 and tier["experts"] == st["placed_elsewhere"]
        assert tier["bytes_read"] == tier["experts"] * record
        assert tier["share_of_misses"] == st["placed_elsewhere"] / st["misses"]
        # one record uploaded at load to time the upload path; every other upload is a miss the GPU took
        uploaded = st["misses"] - st["placed_elsewhere"]
        assert s["uploads"]["count"] == 1 + uploaded + st["prefetch_issued"]
        assert st["bytes_read"] == (uploaded + st["prefetch_issued"]) * record
        if tag in ("all", "prefetch"):
            assert tier["share_of_misses"] == 1.0 and tier["ms_per_token"] > 0
        if tag == "mixed":
            assert 0 < tier["share_of_misses"] < 1 and tier["experts"] <= s["tokens"] * n_layers
        assert all(v > 0 for v in tier["rates_at_load"].values())
        assert s["gpu_bytes"]["cpu_tier"] >= n_layers * 4 * manifests[stem]["config"]["metadata"][
            f"{manifests[stem]['config']['architecture']}.embedding_length"]
