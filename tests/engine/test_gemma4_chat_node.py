"""gemma4 chat through the worker's Session (py_engine/app, driven as the page drives it) on the GPU engine
(Pyodide + Dawn on lavapipe in Node), the direct path (every expert on the GPU).

micro-gemma4-f32 with an f32 KV cache answers the refs' Gemma chat prompt greedily: the template renders the refs'
prompt ids exactly and the reply reproduces llama.cpp's greedy ids as far as the exact-GELU refs' margins require
(free-running is not a pass/fail criterion past a small margin). A second turn resumes from a checkpoint taken at a
turn boundary (gemma4 cannot truncate its cached conversation: its sliding-window rings only go forward, so the
checkpoints copy them, engine/checkpoints.py) and equals the same turn computed from a reset state. The store path
ingests the file into a model store and streams the experts from it into the smallest pool: the same reply.
"""
import pytest

from conftest import GEMMA4_REFS
from diskformer.node_engine import run_in_node
from diskformer.reference import protocol

STEM = "micro-gemma4-f32"
QUESTION = "Explain in one sentence what a mixture-of-experts model is."
FOLLOW_UP = "And in two words?"
TURN_ID = 6  # <|turn>, which opens every turn (the fixtures' README)

ENGINE_CODE = r'''
import re
from py_engine.app.errors import BudgetTooSmall
from py_engine.app.gpu_need import gpu_need
from py_engine.app.session import Session
from py_engine.gguf import read_gguf_file
from py_engine.store.local import MemoryStorage

GREEDY = {"temperature": 0}


def reply(r, s):
    return {"ids": r["token_ids"], "text": r["text"], "stop": r["stop_reason"],
            "reused": r["stats"]["reused_tokens"], "prefilled": r["stats"]["prefilled_tokens"],
            "cached": list(s.model.generator.cached_ids)}


async def main(args):
    out = {}
    s = Session()
    out["load"] = await s.load({"kind": "path", "path": args["model"]}, {"n_ctx": 256, "kv": "f32"})
    out["need"] = gpu_need(read_gguf_file(args["model"]), 256, "f32").as_dict()
    out["kv_bytes"] = s.model.decoder.stats["kv_bytes"]
    out["checkpoints"] = s.model.decoder.stats["state_checkpoints"]
    first = [{"role": "user", "content": args["question"]}]
    out["turn1"] = reply(await s.generate(first, False, GREEDY, 32), s)
    second = first + [{"role": "assistant", "content": out["turn1"]["text"]},
                      {"role": "user", "content": args["follow_up"]}]
    out["turn2_reused"] = reply(await s.generate(second, False, GREEDY, 8), s)
    s.reset()
    out["turn2_fresh"] = reply(await s.generate(second, False, GREEDY, 8), s)
    s.unload()
    storage = MemoryStorage()
    stored = Session(storage=lambda: storage)
    opts = {"n_ctx": 256, "kv": "f32", "budget_bytes": 1000}
    try:
        await stored.load({"kind": "path", "path": args["model"]}, opts)
    except BudgetTooSmall as e:  # the smallest budget the model runs in, from the refusal's numbers
        minimum = int(re.search(r"give at least (\d+) B", str(e)).group(1))
    out["store_load"] = await stored.load({"kind": "stored", "name": "micro-gemma4-f32.gguf"},
                                          dict(opts, budget_bytes=minimum))
    out["store_turn1"] = reply(await stored.generate(first, False, GREEDY, 32), stored)
    stored.unload()
    return out
'''


@pytest.fixture(scope="module")
def chat_out(gemma4_models):
    models = gemma4_models.resolve()  # a linked folder: Node mounts the real path
    args = {"model": str(models / f"{STEM}.gguf"), "question": QUESTION, "follow_up": FOLLOW_UP}
    return run_in_node(ENGINE_CODE, args, mounts=[models], timeout=900)


def test_greedy_chat_reproduces_llama_cpp(chat_out):
    prompt = protocol.load_refs(STEM, GEMMA4_REFS)["prompts"][1]  # the Gemma chat prompt of the same question
    t1 = chat_out["turn1"]
    n_prompt = len(prompt["prompt_ids"])
    assert chat_out["load"]["arch"] == "gemma4" and chat_out["load"]["experts"] == "resident"
    assert t1["cached"][:n_prompt] == prompt["prompt_ids"]  # the template rendered the refs' prompt exactly
    need = protocol.free_run_required_prefix(protocol.exact_gelu_prompt(prompt), 0.002)
    assert need >= 16
    assert protocol.common_prefix_length(t1["ids"], prompt["greedy_ids"]) >= need
    assert t1["prefilled"] == n_prompt and t1["reused"] == 0


def test_second_turn_resumes_from_a_checkpoint_and_equals_fresh(chat_out):
    after, fresh = chat_out["turn2_reused"], chat_out["turn2_fresh"]
    ids = protocol.load_refs(STEM, GEMMA4_REFS)["prompts"][1]["prompt_ids"]
    model_turn = max(i for i, t in enumerate(ids) if t == TURN_ID)  # where the first reply's turn opens
    assert chat_out["load"]["n_ctx"] == 256 and chat_out["checkpoints"] == 4
    # the template renders the first reply without its empty thought block: the second prompt leaves the cached
    # tokens inside that turn, and the checkpoint at its start (the windows' rings as they were there) is restored
    assert after["reused"] == model_turn > 20 and fresh["reused"] == 0
    assert after["prefilled"] == fresh["prefilled"] - model_turn
    assert after["ids"] == fresh["ids"] and len(after["ids"]) >= 1


def test_gpu_need_is_what_the_cache_took(chat_out):
    """The page's budget check counts gemma4's per-layer caches (sliding-window rings sized for a GPU's prefill
    chunks, at least what the decoder took on lavapipe's smaller chunks)."""
    assert chat_out["need"]["kv_cache"] >= chat_out["kv_bytes"] > 0


def test_store_path_streams_experts_and_gives_the_same_reply(chat_out):
    load, streamed = chat_out["store_load"], chat_out["store_turn1"]
    assert load["path"] == "store" and load["experts"] == "streamed" and load["arch"] == "gemma4"
    assert streamed["ids"] == chat_out["turn1"]["ids"]
