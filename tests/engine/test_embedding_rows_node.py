"""The token table's rows on demand (py_engine/engine/embedding_rows.py) in the store engine, on lavapipe.

Per model, one Node process runs the store engine with the table resident and with its rows through a row cache of
a few slots (StoreOptions(embedding_rows=S)), over a full expert pool (fed tokens wait for the next step, which pins
each chunk's rows) and over the smallest pool (the streamed prefill and the per-token routing pin them). Prompts,
a long prompt of more distinct ids than the cache has slots (rows evicted and read again) and teacher-forced decode
steps: the logits must equal the resident table's, and the stats must show the cache at work. And a chat through
GpuBackend (greedy steps read back one by one, prompts ending at state checkpoints) answers as with the table
resident, while queueing a greedy step ahead is refused. Left to the planner, a tight budget takes the rows on demand
by itself.
"""
import asyncio

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource

# qwen3vocab: a 151,936-row table of 32 columns (a cached row's 2 B of scales padded to a 32-bit word), two variants
MODELS = ["micro-qwen3moe", "micro-qwen35moe", "qwen3vocab-qwen3moe"]
ONLY = {"qwen3vocab-qwen3moe": ("resident", "rows")}
PROMPTS = (0, 1)
LONG = [(i * 37 + 11) % 400 for i in range(40)]  # 40 distinct ids: more than the cache's slots
SLOTS = 16
CHUNK = 8
# variant -> (job keys, the resident variant it must equal)
VARIANTS = {
    "resident": ({"embedding_rows": 0}, None),
    "rows": ({"embedding_rows": SLOTS}, "resident"),
    "resident_min": ({"embedding_rows": 0, "budget": "min"}, None),
    "rows_min": ({"embedding_rows": SLOTS, "budget": "min"}, "resident_min"),
    "rows_min_early_stop": ({"embedding_rows": SLOTS, "budget": "min", "routing": "early_stop"}, "resident_min"),
    # token by token (no batched prefill): every token's row pinned around its own submits, a cache of 1 slot
    "resident_t1": ({"embedding_rows": 0, "prefill_chunk": 1}, None),
    "rows_t1": ({"embedding_rows": 1, "prefill_chunk": 1}, "resident_t1"),
}
LOGIT_TOL = 1e-6  # the same dequantisation of the same bytes: bit-identical in practice


def _variants(stem):
    return {tag: v for tag, v in VARIANTS.items() if tag in ONLY.get(stem, VARIANTS)}


@pytest.fixture(scope="module")
def stores(fixture_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("rows_stores")
    storage = DirectoryStorage(root)
    for stem in MODELS:
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
    return root


@pytest.fixture(scope="module")
def runs(stores, refs_dir, tmp_path_factory):
    root = stores
    out = tmp_path_factory.mktemp("rows_logits")
    jobs, names = [], []
    for stem in MODELS:
        refs = protocol.load_refs(stem, refs_dir)
        for tag, (extra, _) in _variants(stem).items():
            seqs = [{"ids": refs["prompts"][i]["prompt_ids"], "teacher_force": refs["prompts"][i]["greedy_ids"][:-1],
                     "logits_out": str(out / f"{stem}.{tag}.p{i}.f32")} for i in PROMPTS]
            seqs.append({"ids": LONG, "teacher_force": [LONG[3], 1, 2, LONG[0]],
                         "logits_out": str(out / f"{stem}.{tag}.long.f32")})
            jobs.append({"store": str(root / stem), "prefill_chunk": CHUNK, "runs": seqs, **extra})
            names.append((stem, tag))
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[root, out], timeout=600)
    return out, dict(zip(names, result["jobs"]))


def _rows(out, stem, tag, which):
    return np.fromfile(out / f"{stem}.{tag}.{which}.f32", dtype="<f4")


@pytest.mark.parametrize("stem", MODELS)
def test_rows_on_demand_give_the_resident_logits(runs, stem):
    out, _ = runs
    for tag, (_, base) in _variants(stem).items():
        if base is None:
            continue
        for which in [f"p{i}" for i in PROMPTS] + ["long"]:
            want, got = _rows(out, stem, base, which), _rows(out, stem, tag, which)
            assert got.shape == want.shape and got.size > 0
            diff = float(np.abs(got - want).max())
            print(f"{stem} {tag} {which}: max |logit difference| {diff:.3g}")
            assert diff <= LOGIT_TOL, f"{stem} {tag} {which}: logits differ from {base}'s by {diff}"


@pytest.mark.parametrize("stem", MODELS)
def test_the_plan_and_the_cache_say_what_happened(runs, refs_dir, stem):
    _, jobs = runs
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    resident = jobs[(stem, "resident")]["stats"]
    assert resident["embedding"]["mode"] == "resident" and resident["embedding_rows"] is None
    table = resident["embedding"]["table_bytes"]
    row_bytes = table // n_vocab  # a row's codes and scales (the planes are whole rows)
    for tag, (extra, base) in _variants(stem).items():
        if base is None:
            continue
        s = jobs[(stem, tag)]["stats"]
        slots = extra["embedding_rows"]
        emb, cache = s["embedding"], s["embedding_rows"]
        assert emb["mode"] == "rows" and emb["slots"] == slots and emb["reason"] == "asked"
        # the table's planes are not uploaded; the cache is counted instead, and everything within the plan
        assert s["gpu_bytes"]["dense"] == jobs[(stem, base)]["stats"]["gpu_bytes"]["dense"] - table
        assert s["gpu_bytes"]["embedding_rows"] == emb["cache_bytes"] > 0
        assert s["gpu_bytes"]["total"] <= s["budget"]["total"]
        assert s["budget"]["dense"] == jobs[(stem, base)]["stats"]["budget"]["dense"] - table
        # more distinct ids than slots: rows were evicted and read again; every lookup found or loaded its rows
        assert cache["slots"] == slots and cache["misses"] > slots and cache["evictions"] > 0
        assert cache["uploads"] == cache["misses"] and cache["lookups"] > 0
        assert 0 < cache["reads"] <= 2 * cache["misses"] and cache["bytes_read"] >= cache["misses"] * row_bytes
        assert s["mode"] == ("full" if "min" not in tag else "partial")


CHAT_STEM = "micro-qwen35moe"  # recurrent state: follow-up turns resume from checkpoints (prefill_checkpoint)
QUESTIONS = ["Explain in one sentence what a mixture-of-experts model is.", "And in two sentences?"]

CHAT_CODE = r'''
from pathlib import Path

from py_engine.engine.gpu_backend import GpuBackend
from py_engine.engine.store_decoder import StoreDecoder
from py_engine.generation import Generator, SamplingParams
from py_engine.gguf import read_gguf_file
from py_engine.store.local import DirectorySink
from py_engine.tokenizer import Tokenizer


async def chat(args, rows):
    dec = await StoreDecoder.open_store(DirectorySink(Path(args["store"])), n_ctx=256, embedding_rows=rows,
                                        prefill_chunk=8)
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args["model"]).metadata)
    gen = Generator(GpuBackend(dec), tok, "qwen35moe")
    messages, out = [], {"turns": []}
    for q in args["questions"]:
        messages.append({"role": "user", "content": q})
        r = await gen.generate(messages, thinking=False, max_tokens=6, sampling=SamplingParams.greedy(), stop_ids=[])
        out["turns"].append({"ids": r.token_ids, "restored": r.stats.restored_checkpoint,
                             "prefilled": r.stats.prefilled_tokens})
        messages.append(r.as_message())
    out["embedding"], out["cache"] = dec.stats["embedding"], dec.summary()["embedding_rows"]
    if rows:
        try:
            dec.launch_argmax(1)
            out["queued"] = "accepted"
        except RuntimeError as e:
            out["queued"] = str(e)
    dec.release()
    return out


async def main(args):
    return {"resident": await chat(args, 0), "rows": await chat(args, args["slots"])}
'''


def test_a_chat_with_rows_on_demand_answers_as_with_the_table_resident(stores, fixture_models):
    args = {"store": str(stores / CHAT_STEM), "model": str(fixture_models / f"{CHAT_STEM}.gguf"),
            "questions": QUESTIONS, "slots": SLOTS}
    out = run_in_node(CHAT_CODE, args, mounts=[stores, fixture_models], timeout=600)
    resident, rows = out["resident"], out["rows"]
    assert rows["embedding"]["mode"] == "rows" and resident["embedding"]["mode"] == "resident"
    assert [t["ids"] for t in rows["turns"]] == [t["ids"] for t in resident["turns"]]
    assert all(len(t["ids"]) == 6 for t in rows["turns"])
    # the follow-up resumed from a checkpoint and prefilled only the new turn, as with the table resident
    assert rows["turns"][1]["restored"] == resident["turns"][1]["restored"] > 0
    assert rows["turns"][1]["prefilled"] == resident["turns"][1]["prefilled"]
    cache = rows["cache"]
    assert cache["misses"] > SLOTS and cache["hits"] > 0
    assert cache["hit_rate"] == (cache["hits"] + cache["late_hits"]) / (cache["hits"] + cache["late_hits"]
                                                                         + cache["misses"])
    assert "cannot be queued ahead" in rows["queued"]


AUTO_STEM = "qwen3vocab-qwen3moe"  # a 151,936-row table: 5.2 MB of the ~12.6 MB the smallest resident plan needs
AUTO_CODE = r'''
from pathlib import Path

from functools import partialmethod

from py_engine.engine.budget import BudgetTooSmall
from py_engine.engine.store_decoder import StoreDecoder
from py_engine.residency import row_cache
from py_engine.store.local import DirectorySink

IDS, STEPS = [9707, 11, 1879, 0, 151643, 42], [3, 151935, 3]


async def run(args, **opts):
    dec = await StoreDecoder.open_store(DirectorySink(Path(args["store"])), n_ctx=256, prefill_chunk=8, **opts)
    try:
        rows = [await dec.step_prompt(IDS)]
        for t in STEPS:
            rows.append(await dec.step(t))
        planes = len(dec.embedding_rows.gpu_cache.planes) if dec.embedding_rows is not None else 0
        return {"embedding": dec.stats["embedding"], "budget": dec.plan.to_dict(), "gpu_bytes": dec.stats["gpu_bytes"],
                "rows": rows, "planes": planes}
    finally:
        dec.release()


def max_diff(a, b):
    return max(max(abs(x - y) for x, y in zip(ra, rb)) for ra, rb in zip(a["rows"], b["rows"]))


async def main(args):
    base = await run(args, budget_bytes="min", embedding_rows=0)  # the smallest plan with the table resident
    need, stride = base["budget"]["budget"], base["budget"]["slot_stride"]
    out = {"need": need, "base": {k: v for k, v in base.items() if k != "rows"}}
    for tag, budget, rows in (("short", need - 1, None), ("share", need + 10 * stride, None),
                              ("kept", need + 10 * stride, 0)):
        got = await run(args, budget_bytes=budget, embedding_rows=rows)
        out[tag] = dict({k: v for k, v in got.items() if k != "rows"}, diff=max_diff(base, got))
    # the cache's slots over several buffers (a binding limit of 5 rows): each plane's dispatch writes its rows
    init = row_cache.GpuRowCache.__init__
    row_cache.GpuRowCache.__init__ = partialmethod(init, max_binding_bytes=5 * args["row_bytes"])
    try:
        got = await run(args, embedding_rows=16)
    finally:
        row_cache.GpuRowCache.__init__ = init
    out["planes"] = dict({k: v for k, v in got.items() if k != "rows"}, diff=max_diff(base, got))
    try:
        await run(args, budget_bytes=need - base["embedding"]["table_bytes"])
        out["refused"] = None
    except BudgetTooSmall as e:
        out["refused"] = str(e)
    return out
'''


def test_a_tight_budget_takes_the_rows_by_itself(stores):
    args = {"store": str(stores / AUTO_STEM), "row_bytes": 36}  # 32 codes + 2 B of scales padded to 4
    out = run_in_node(AUTO_CODE, args, mounts=[stores], timeout=600)
    need, base = out["need"], out["base"]
    table = base["embedding"]["table_bytes"]
    assert base["embedding"]["mode"] == "resident" and table > need // 3
    short, share, kept = out["short"], out["share"], out["kept"]
    # one byte short of the resident minimum: the rows come on demand, and the freed bytes become expert slots
    assert short["embedding"]["mode"] == "rows" and short["embedding"]["reason"] == \
        "the budget cannot hold the table resident"
    assert short["budget"]["slots"] > base["budget"]["slots"] and short["budget"]["total"] <= need - 1
    assert short["gpu_bytes"]["total"] <= short["budget"]["total"]
    # a partial pool with the table over 1/16 of the budget: rows on demand; asked to keep it: resident
    assert share["embedding"]["mode"] == "rows" and "of the budget" in share["embedding"]["reason"]
    assert kept["embedding"]["mode"] == "resident" and not kept["budget"]["full"]
    assert share["budget"]["slots"] > kept["budget"]["slots"]
    assert out["planes"]["planes"] == 4 and out["planes"]["embedding"]["slots"] == 16  # 5 + 5 + 5 + 1 slots
    for tag in ("short", "share", "kept", "planes"):
        assert out[tag]["diff"] <= LOGIT_TOL, (tag, out[tag]["diff"])
    # too small even with the rows on demand: refused with the smaller minimum that plan needs
    assert out["refused"] is not None and "give at least" in out["refused"]
    assert int(out["refused"].split("give at least ")[1].split(" ")[0]) < need
