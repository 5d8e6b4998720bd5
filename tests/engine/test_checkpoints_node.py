"""Checkpoints of the recurrent state on the GPU engine (Pyodide + Dawn on lavapipe in Node), micro-qwen35moe-f32
with an f32 KV cache: three chat turns resume from the state kept at the last answer's header and prefill only the
new turn, with the greedy answers of fresh runs; a restored state gives the logits of a full prefill (within 1e-5);
the store engine (the chat app's path) keeps them too, counted in its GPU budget, with a partial expert pool.
"""
import asyncio

import pytest

from diskformer.node_engine import run_in_node
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource

STEM = "micro-qwen35moe-f32"
QUESTIONS = ["Explain in one sentence what a mixture-of-experts model is.", "And in two sentences?",
             "And in one word?"]

ENGINE_CODE = r'''
from py_engine.engine.decoder import Decoder
from py_engine.engine.gpu_backend import GpuBackend
from py_engine.generation import Generator, SamplingParams
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer, render_chat

GREEDY = SamplingParams.greedy()


async def turns(gen, questions, fresh):
    """Each question asked after the previous answers; fresh: every turn from a reset state."""
    messages, out = [], []
    for q in questions:
        messages = messages + [{"role": "user", "content": q}]
        if fresh:
            gen.reset()
        r = await gen.generate(messages, thinking=False, max_tokens=6, sampling=GREEDY, stop_ids=[])
        prompt = gen.tokenizer.encode(render_chat(messages, gen.arch, False))
        s = r.stats
        out.append({"ids": r.token_ids, "prompt": prompt, "reused": s.reused_tokens, "prefilled": s.prefilled_tokens,
                    "restored": s.restored_checkpoint, "reset": s.cache_reset})
        messages = messages + [r.as_message()]
    return out


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


async def main(args):
    dec = await Decoder.open(args["model"], n_ctx=256, kv_format="f32")
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args["model"]).metadata)
    backend = GpuBackend(dec)
    gen = Generator(backend, tok, backend.arch)
    out = {"checkpoints": backend.state_checkpoints, "bytes": dec.stats["checkpoint_bytes"]}
    out["resumed"] = await turns(gen, args["questions"], fresh=False)
    out["saved"], out["restored"] = dec.checkpoints.saved, dec.checkpoints.restored
    out["fresh"] = await turns(gen, args["questions"], fresh=True)

    # a reply stopped midway while the next greedy step was queued (the stop seen before its token is picked: the
    # state holds one token more than the conversation), then a follow-up: back to a checkpoint all the same
    gen.reset()
    shown, checks = [0], [0]

    def tick(d):
        shown[0] += 1

    def stop_requested():
        if shown[0] >= 3:
            checks[0] += 1
        return checks[0] >= 2  # not at the check right after the third piece, at the next one (the loop's top)
    first = [{"role": "user", "content": args["questions"][0]}]
    r = await gen.generate(first, thinking=False, max_tokens=20, sampling=GREEDY, stop_ids=[], on_delta=tick,
                           abort=stop_requested)
    out["aborted"] = {"stop": r.stop_reason, "n_cached": backend.n_cached, "cached": len(gen.cached_ids)}
    follow = first + [r.as_message(), {"role": "user", "content": args["questions"][1]}]
    r2 = await gen.generate(follow, thinking=False, max_tokens=6, sampling=GREEDY, stop_ids=[])
    gen.reset()
    r3 = await gen.generate(follow, thinking=False, max_tokens=6, sampling=GREEDY, stop_ids=[])
    out["after_abort"] = {"ids": r2.token_ids, "fresh_ids": r3.token_ids, "restored": r2.stats.restored_checkpoint,
                          "reset": r2.stats.cache_reset}

    # the logits after a restore against those of a full prefill of the same prompt
    prompt = out["resumed"][-1]["prompt"]
    m = len(prompt) // 2
    gen.reset()
    await backend.prefill(prompt, 0)
    full = list(backend._logits)
    backend.reset()
    await backend.prefill(prompt[:m], 0)
    backend.save_checkpoint()
    await backend.prefill([7, 8, 9, 10, 11] * 4, m)  # a diverging tail folded into the state
    out["restored_to"] = backend.restore_checkpoint(m + 3)
    await backend.prefill(prompt[m:], m)
    out["logits_diff"] = max_diff(full, backend._logits)
    out["argmax"] = [full.index(max(full)), backend._logits.index(max(backend._logits))]
    # the control: the same steps with only the position set back (the tail left in the state) differ
    backend.reset()
    await backend.prefill(prompt[:m], 0)
    await backend.prefill([7, 8, 9, 10, 11] * 4, m)
    dec.pos = m
    await backend.prefill(prompt[m:], m)
    out["unrestored_diff"] = max_diff(full, backend._logits)
    # a reset forgets the checkpoints (their KV rows are overwritten)
    backend.reset()
    out["after_reset"] = backend.restore_checkpoint(0)
    out["held_after_reset"] = dec.checkpoints.positions()
    dec.release()
    out["store"] = await store_turns(args)
    return out


async def store_turns(args):
    """The chat app's engine: a store with the smallest expert pool (every layer misses: tokens stop early on the
    GPU and the CPU pages experts in), the checkpoints counted in its budget."""
    from pathlib import Path
    from py_engine.engine.store_decoder import StoreDecoder
    from py_engine.store.local import DirectorySink

    sink = DirectorySink(Path(args["store"]))
    dec = await StoreDecoder.open_store(sink, n_ctx=256, kv_format="f32", budget_bytes="min", routing="early_stop")
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args["model"]).metadata)
    gen = Generator(GpuBackend(dec), tok, "qwen35moe")
    out = {"full": dec.plan.full, "kv_state": dec.plan.kv_state, "kv_bytes": dec.cache.nbytes,
           "checkpoint_bytes": dec.checkpoints.nbytes}
    out["resumed"] = await turns(gen, args["questions"], fresh=False)
    out["fresh"] = await turns(gen, args["questions"], fresh=True)
    dec.release()
    return out
'''


@pytest.fixture(scope="module")
def engine_out(fixture_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoint_store")
    src = FileSource(fixture_models / f"{STEM}.gguf")
    try:
        asyncio.run(ingest(src, DirectoryStorage(root).sink(STEM)))
    finally:
        src.close()
    args = {"model": str(fixture_models / f"{STEM}.gguf"), "questions": QUESTIONS, "store": str(root / STEM)}
    return run_in_node(ENGINE_CODE, args, mounts=[fixture_models, root], timeout=600)


@pytest.mark.parametrize("engine", ["gguf", "store"])
def test_follow_ups_resume_from_the_turn_checkpoint(engine_out, engine):
    out = engine_out if engine == "gguf" else engine_out["store"]
    if engine == "gguf":
        assert out["checkpoints"] == 4 and out["bytes"] > 0
        assert out["restored"] == 2 and out["saved"] >= 4
    else:  # a partial pool, the checkpoints in the budget's KV/state share
        assert not out["full"] and out["kv_state"] >= out["kv_bytes"] + out["checkpoint_bytes"] > out["kv_bytes"]
    resumed, fresh = out["resumed"], out["fresh"]
    # (a) the greedy answers of every turn equal those of a fresh run
    assert [t["ids"] for t in resumed] == [t["ids"] for t in fresh]
    # (b) a follow-up prefills only the new turn: back to the start of the last answer's header, the old answer as
    # re-rendered, the new question and the header
    for before, t in zip(resumed, resumed[1:]):
        header = len(before["prompt"]) - 1 - before["prompt"][::-1].index(before["prompt"][0])  # its last <|im_start|>
        assert t["prompt"][:header] == before["prompt"][:header]
        assert not t["reset"] and t["restored"] == t["reused"] == header
        assert t["prefilled"] == len(t["prompt"]) - header
    new_turn = [t["prefilled"] for t in resumed[1:]]
    assert max(new_turn) < 0.7 * len(resumed[-1]["prompt"])  # not the conversation
    assert all(t["reused"] == 0 and t["prefilled"] == len(t["prompt"]) for t in fresh)


def test_a_stopped_reply_then_a_follow_up_resumes_from_a_checkpoint(engine_out):
    out = engine_out
    assert out["aborted"]["stop"] == "abort"
    assert out["aborted"]["n_cached"] == out["aborted"]["cached"] + 1  # the queued step past the stop
    assert out["after_abort"]["restored"] and not out["after_abort"]["reset"]
    assert out["after_abort"]["ids"] == out["after_abort"]["fresh_ids"]


def test_restored_state_gives_the_logits_of_a_full_prefill(engine_out):
    out = engine_out
    assert out["restored_to"] > 0
    assert out["logits_diff"] <= 1e-5, out["logits_diff"]
    assert out["unrestored_diff"] > 1e-3  # the restore is what makes them equal
    assert out["argmax"][0] == out["argmax"][1]
    assert out["after_reset"] == 0 and out["held_after_reset"] == []
