"""The engine run from a model store with the routed experts streamed into a GPU pool (Pyodide + Dawn on lavapipe).

Each fixture GGUF is ingested by the CPython store code into a folder; one Node process then runs, per model, the
GGUF engine (the baseline) and the store engine with (a) a pool holding every expert and (b) the smallest pool the
budget allows, cut into several buffers of 3 slots (the multi-buffer path), teacher-forced along llama.cpp's greedy
ids. The store runs must give the baseline's logits, every slot must hold its record byte for byte, the stats must
add up (syncs, misses, bytes), and a budget one byte short of the minimum must be refused with the numbers.
"""
import asyncio
import json

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from py_engine.engine.budget import BudgetInputs, BudgetTooSmall, plan_budget
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource


MODELS = ["micro-qwen3moe", "tiny-qwen3moe", "micro-qwen35moe"]
PROMPTS = (0, 1)
# variant -> extra job keys. "min": the smallest pool (2·top_k slots), split into buffers of 3 slots (the
# multi-buffer kernels), routing "auto" (which settles on per-layer syncs: every layer misses); "frac": 3/4 of
# the experts, early-stop routing with prefetch, so most tokens route on the GPU alone; "min_early_stop": the
# worst case of early stops (every layer stops); "min_writebuffer": uploads by writeBuffer.
VARIANTS = {"full": {}, "min": {"budget": "min"},
            "frac": {"pool_fraction": 0.75, "prefetch_depth": 2, "routing": "early_stop"}}
EXTRA = {"micro-qwen3moe": {"min_early_stop": {"budget": "min", "routing": "early_stop"},
                            "min_writebuffer": {"budget": "min", "upload": "writebuffer", "routing": "per_layer"}},
         "micro-qwen35moe": {"min_early_stop": {"budget": "min", "routing": "early_stop"}}}
LOGIT_TOL = 1e-4  # same kernels over the same bytes: in practice the logits are bit-identical


@pytest.fixture(scope="module")
def stores(fixture_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    storage = DirectoryStorage(root)
    manifests = {}
    for stem in MODELS:
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            manifests[stem] = asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
    return root, manifests


def _variants(stem):
    return {**VARIANTS, **EXTRA.get(stem, {})}


@pytest.fixture(scope="module")
def streamed(stores, fixture_models, refs_dir, tmp_path_factory):
    root, manifests = stores
    out = tmp_path_factory.mktemp("streaming_logits")
    jobs, names = [], []
    for stem in MODELS:
        refs = protocol.load_refs(stem, refs_dir)
        record = manifests[stem]["layout"]["experts"]["record_size"]

        def runs(tag):
            return [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                     "logits_out": str(out / f"{stem}.{tag}.{p['index']}.f32")}
                    for p in refs["prompts"] if p["index"] in PROMPTS]

        jobs.append({"model": str(fixture_models / f"{stem}.gguf"), "runs": runs("gguf"), "prefill_chunk": 1})
        names.append((stem, "gguf"))
        for tag, extra in _variants(stem).items():
            # token-by-token prefill: the stats below count per-token demands (chunked prefill pages each
            # layer's union per chunk; tests/engine/test_prefill_node.py checks it)
            job = {"store": str(root / stem), "runs": runs(tag), "verify_pool": True, "prefill_chunk": 1, **extra}
            if tag.startswith("min"):
                job["max_pool_buffer"] = 3 * record
            jobs.append(job)
            names.append((stem, tag))
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[root, fixture_models, out],
                         timeout=300)
    for (stem, tag), job in zip(names, result["jobs"]):
        s = job["stats"]
        print(f"{stem:16} {tag:16} load {s['load_ms']:7.0f} ms  steps {s['step_ms_total']:7.0f} ms  "
              f"syncs {s['syncs']}  tokens {s['tokens']}")
    return out, dict(zip(names, result["jobs"])), manifests


def _rows(out, stem, tag, index, n_vocab):
    return np.fromfile(out / f"{stem}.{tag}.{index}.f32", dtype="<f4").reshape(-1, n_vocab)


@pytest.mark.parametrize("stem", MODELS)
def test_same_logits_as_the_gguf_engine(streamed, refs_dir, stem):
    out, jobs, _ = streamed
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    for tag in _variants(stem):
        for index in PROMPTS:
            base = _rows(out, stem, "gguf", index, n_vocab)
            rows = _rows(out, stem, tag, index, n_vocab)
            assert rows.shape == base.shape
            diff = float(np.abs(rows - base).max())
            print(f"{stem} {tag} prompt {index}: max |logit difference| {diff:.3g}")
            assert diff <= LOGIT_TOL, f"{stem} {tag} prompt {index}: logits differ by {diff}"
            top2 = np.sort(base, axis=1)[:, -2:]
            clear = (top2[:, 1] - top2[:, 0]) > 2 * LOGIT_TOL
            assert (rows.argmax(1)[clear] == base.argmax(1)[clear]).all()


@pytest.mark.parametrize("stem", [m for m in MODELS if m.endswith("qwen3moe")])
def test_smallest_pool_passes_the_reference_protocol(streamed, refs_dir, stem):
    """The smallest pool, scored against llama.cpp's refs like the GGUF engine (tests/engine/test_engine_node.py)."""
    out, _, _ = streamed
    refs = protocol.load_refs(stem, refs_dir)
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    metrics = [protocol.prompt_metrics(p, _rows(out, stem, "min", p["index"], n_vocab),
                                       protocol.load_step0_logits(stem, p["index"], refs_dir))
               for p in refs["prompts"] if p["index"] in PROMPTS]
    result = protocol.check_limits(stem, metrics, protocol.load_tolerances(refs_dir), kv="f16", engine="f32act")
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", MODELS)
def test_every_slot_holds_its_record(streamed, stem):
    _, jobs, manifests = streamed
    ex = manifests[stem]["layout"]["experts"]
    for tag in _variants(stem):
        job = jobs[(stem, tag)]
        check, budget = job["pool_check"], job["stats"]["budget"]
        assert check["slots_bad"] == [], f"{stem} {tag}: slots holding the wrong bytes {check['slots_bad']}"
        assert check["slots_checked"] == budget["slots"]  # every slot was filled and checked
        assert check["map_equal"], f"{stem} {tag}: the GPU's slot map differs from the streamer's"
        if not job["stats"]["early_stop_tokens"]:  # experts paged in before the check runs
            assert check["gpu_stops"] == 0, f"{stem} {tag}: the residency kernel saw absent experts"
        n_records = len(ex["layers"]) * ex["n_experts"]
        # what was allocated stays within the plan (and the plan within the budget)
        assert job["stats"]["gpu_bytes"]["total"] <= budget["total"]
        if budget["budget"] is not None:
            assert budget["total"] <= budget["budget"]
        if tag == "full":
            assert budget["slots"] == n_records and budget["full"]
        elif tag == "frac":
            assert budget["slots"] == -(-3 * n_records // 4) and not budget["full"]
        else:
            assert budget["slots"] == budget["min_slots"] and not budget["full"]
        if tag.startswith("min"):
            assert budget["pool_buffers"] > 1 and budget["slots_per_buffer"] == 3


@pytest.mark.parametrize("stem", MODELS)
def test_stats_add_up(streamed, stem):
    _, jobs, manifests = streamed
    ex = manifests[stem]["layout"]["experts"]
    cfg = manifests[stem]["config"]["metadata"]
    arch = manifests[stem]["config"]["architecture"]
    n_layers, k, record = len(ex["layers"]), cfg[f"{arch}.expert_used_count"], ex["record_size"]
    for tag in _variants(stem):
        s = jobs[(stem, tag)]["stats"]
        st = s["streamer"]
        steps, tokens = s["steps"], s["tokens"]
        assert steps == sum(len(r["steps"]) for r in jobs[(stem, tag)]["runs"])
        assert s["uploads"]["bytes"] == st["bytes_read"] == s["uploads"]["count"] * record
        if tag == "full":
            # every record paged in once at load; then routing never leaves the GPU: one sync per step (logits)
            assert s["mode"] == "full" and st["misses"] == n_layers * ex["n_experts"]
            assert s["syncs"] == steps and s["syncs_per_step"] == 1
            continue
        assert s["mode"] == "partial" and st["tokens"] == tokens
        # every layer's picks, routed on the GPU or paged in (a prefetch that started late may have evicted a pick
        # the GPU had already used by the time the token's picks are reported to the policy: then it is not counted)
        picks = tokens * n_layers * k
        assert st["demanded"] == picks if not s.get("prefetch_depth") else picks * 0.95 <= st["demanded"] <= picks, \
            (tag, st["demanded"], picks)
        assert st["misses"] > 0 and st["hits"] + st["late_hits"] + st["misses"] == st["demanded"]
        # per-layer tokens: one ids readback per layer, plus the logits for stepped tokens; early-stop tokens: one
        # readback, plus one per layer that stopped on a missing expert
        stops = jobs[(stem, tag)]["pool_check"]["gpu_stops"]
        assert s["early_stop_tokens"] + s["per_layer_tokens"] == tokens
        assert s["syncs"] == (s["per_layer_tokens"] * n_layers + s["per_layer_steps"]
                              + s["early_stop_tokens"] + s["resumes"])
        assert s["resumes"] == stops
        assert st["bytes_read"] == (st["misses"] + st["prefetch_issued"]) * record
        if tag == "min":  # auto routing: 2·top_k slots over every layer, each layer misses: per-layer syncs
            assert s["per_layer_tokens"] == tokens
        if tag == "min_early_stop":
            assert stops == tokens * n_layers and s["early_stop_tokens"] == tokens
        if tag == "frac":  # most layers route on the GPU alone
            assert s["early_stop_tokens"] == tokens and stops < tokens * n_layers / 2
            assert st["hits"] > st["misses"] and st["prefetch_issued"] > 0


def test_budget_too_small_is_refused(stores, capsys):
    """`diskformer run --store` refuses a budget below dense + KV + work + 2·top_k records before loading anything,
    with the numbers; one byte short of the minimum it names is refused too."""
    import re

    from diskformer.engine_run import main

    root, manifests = stores
    folder = str(root / "micro-qwen3moe")
    assert main(["--store", folder, "--budget", "1000", "--ids", "1,2"]) == 1
    err = capsys.readouterr().err
    m = re.search(r"dense weights (\d+) B \+ KV cache/state (\d+) B \+ work buffers (\d+) B = (\d+) B, plus an "
                  r"expert pool of at least 2·top_k = (\d+) records of (\d+) B = (\d+) B; give at least (\d+) B", err)
    assert m, err
    dense, kv, work, fixed, n, stride, pool, need = map(int, m.groups())
    ex = manifests["micro-qwen3moe"]["layout"]["experts"]
    assert "a GPU budget of 1000 B" in err and dense + kv + work == fixed and n == 4 and stride == ex["record_size"]
    assert pool == n * stride and need == fixed + pool
    assert main(["--store", folder, "--budget", str(need - 1), "--ids", "1,2"]) == 1
    assert f"give at least {need} B" in capsys.readouterr().err
    # the minimum it names runs (the prefill chunk shrinks to fit it, and says so in the stats)
    assert main(["--store", folder, "--budget", str(need), "--ids", "1,2,3", "--prefill-chunk", "256"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["prefill_chunk"] == 16


def test_plan_budget_splits_and_refuses():
    inputs = BudgetInputs(dense=1000, kv_state=500, work=300, record_bytes=1000, n_layers=4, n_experts=8, top_k=2,
                      max_binding=3 * 1024, max_buffer=1 << 30)
    plan = plan_budget(None, inputs)
    assert plan.full and plan.slots == 32 and plan.pool.slot_stride == 1024 and plan.pool.slots_per_buffer == 3
    assert plan.pool.buffer_count == 11 and all(b <= 3 * 1024 for b in plan.pool.buffer_sizes)
    plan = plan_budget(1800 + 10 * 1024 + 5, inputs)
    assert plan.slots == 10 and not plan.full
    assert plan_budget("min", inputs).slots == 4
    assert plan_budget(1 << 30, inputs).slots == 32  # never more slots than experts
    with pytest.raises(BudgetTooSmall) as e:
        plan_budget(1800 + 4 * 1024 - 1, inputs)
    msg = str(e.value)
    assert "1800 B" in msg and "4 records of 1024 B" in msg and f"at least {1800 + 4 * 1024} B" in msg
