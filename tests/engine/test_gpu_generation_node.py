"""Chat generation through the GPU engine (Pyodide + Dawn on lavapipe in Node): GpuBackend under the Generator.

One Node process: micro-qwen3moe-f32 with an f32 KV cache (the refs' configuration, where the engine matches
llama.cpp to ~1e-5) answers the refs' ChatML prompt greedily and must reproduce llama.cpp's greedy_ids; the second
turn reuses the cached prefix (truncating the KV cache) and must equal the same turn computed from a reset state;
the top-k candidates agree with the refs' step-0 logits; an abort keeps the text so far.
"""

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from lab import ENGINE_SIDE


STEM = "micro-qwen3moe-f32"
QUESTION = "Explain in one sentence what a mixture-of-experts model is."

ENGINE_CODE = r'''
from py_engine.engine.decoder import Decoder
from py_engine.engine.gpu_backend import GpuBackend
from py_engine.generation import AbortFlag, Generator, SamplingParams
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer

GREEDY = SamplingParams.greedy()


def summary(result, gen, deltas):
    return {"ids": result.token_ids, "text": result.text, "thinking": result.thinking,
            "stop": result.stop_reason, "deltas": deltas, "cached": gen.cached_ids,
            "reused": result.stats.reused_tokens, "prefilled": result.stats.prefilled_tokens}


async def turn(gen, messages, max_tokens, abort=None, on_token=None):
    deltas = []

    def on_delta(d):
        deltas.append([d.kind, d.text])
        if on_token:
            on_token()

    result = await gen.generate(messages, thinking=True, max_tokens=max_tokens, sampling=GREEDY,
                                on_delta=on_delta, abort=abort)
    return result, summary(result, gen, deltas)


async def main(args):
    dec = await Decoder.open(args["model"], n_ctx=256, kv_format="f32")
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args["model"]).metadata)
    backend = GpuBackend(dec)
    gen = Generator(backend, tok, backend.arch)
    out = {"n_ctx": backend.n_ctx, "vocab": backend.vocab_size, "truncate": backend.supports_truncate}

    messages = [{"role": "user", "content": args["question"]}]
    r1, out["turn1"] = await turn(gen, messages, 32)

    # the top candidates of the prompt's last position, straight from the backend
    gen.reset()
    await backend.prefill(args["prompt_ids"], 0)
    ids, logits = await backend.next_candidates(5)
    greedy_id, greedy_logit = await backend.next_candidates(1)
    out["top5"] = [ids, logits]
    out["top1"] = [greedy_id, greedy_logit]
    # the greedy fast path: announced k = 1, only the GPU's argmax and its logit come back
    gen.reset()
    backend.expect_candidates(1)
    await backend.prefill(args["prompt_ids"], 0)
    out["top1_fast"] = list(await backend.next_candidates(1))
    try:
        await backend.next_candidates(5)
        out["wider_after_greedy"] = "no error"
    except RuntimeError as e:
        out["wider_after_greedy"] = str(e)
    backend.expect_candidates(None)
    gen.reset()

    # turn 2 after turn 1: the prefix is reused (and the KV cache truncated where the new prompt diverges) ...
    await turn(gen, messages, 8)
    messages2 = messages + [r1.as_message(), {"role": "user", "content": "And in two words?"}]
    _, out["turn2_reused"] = await turn(gen, messages2, 8)
    # ... and must equal the same turn from a fresh state
    gen.reset()
    _, out["turn2_fresh"] = await turn(gen, messages2, 8)

    # abort after three shown pieces: the text so far is kept, the state stays usable
    flag = AbortFlag()
    count = [0]

    def tick():
        count[0] += 1
        if count[0] == 3:
            flag.abort()

    _, out["aborted"] = await turn(gen, messages, 32, abort=flag, on_token=tick)
    _, out["after_abort"] = await turn(gen, messages, 32)
    out["queued_taken"] = backend.queued_taken
    out["gpu_bytes"] = backend.gpu_bytes()
    out["decoder_stats"] = dec.summary()
    dec.release()
    out["app"] = await app_session(args)
    return out


async def app_session(args):
    """The worker's Session (py_engine/app) driven as the page drives it, with progress events collected."""
    import asyncio
    import os
    from py_engine.app import direct_fetch
    from py_engine.app.errors import BadModelFile, BudgetTooSmall, Busy, NoModelLoaded
    from py_engine.app.gpu_need import gpu_need
    from py_engine.app.session import Session
    from py_engine.store.local import FileSource

    out = {}
    s = Session()
    for name, call in (("no_model", s.generate([{"role": "user", "content": "hi"}])),
                       ("budget", s.load({"kind": "path", "path": args["model"]}, {"budget_bytes": 1000})),
                       ("bad_file", s.load({"kind": "path", "path": args["not_gguf"]}))):
        try:
            await call
            out[name] = None
        except (NoModelLoaded, BudgetTooSmall, BadModelFile) as e:
            out[name] = [type(e).__name__, str(e)]

    # the direct path's copy: byte ranges of a source into a local file, with progress
    events = []
    copy = direct_fetch.mem_path("copy.gguf")
    src = FileSource(args["model"])
    header = await direct_fetch.read_header(src)
    n = await direct_fetch.fetch_to_file(src, copy, events.append, chunk=1 << 20)
    with open(copy, "rb") as a, open(args["model"], "rb") as b:
        out["copy_equal"] = a.read() == b.read()
    os.unlink(copy)
    out["copy_events"] = events
    out["need"] = gpu_need(header, 256, "f32").as_dict()

    load_events = []
    out["load"] = await s.load({"kind": "path", "path": args["model"]}, {"n_ctx": 256, "kv": "f32"},
                               load_events.append)
    out["load_events"] = [e["stage"] for e in load_events]

    greedy = {"temperature": 0}
    messages = [{"role": "user", "content": args["question"]}]
    deltas = []
    out["reply"] = await s.generate(messages, True, greedy, 32, deltas.append)
    out["reply_deltas"] = deltas

    # stop from a concurrent task (as the worker handles the page's `stop` message between two tokens)
    seen = asyncio.Event()
    count = [0]

    def on_event(e):
        count[0] += 1
        if count[0] == 4:
            seen.set()

    async def stopper():
        await seen.wait()
        try:  # a second reply while one runs is refused, and the first goes on
            await s.generate(messages, True, greedy, 4)
            out["second_reply"] = None
        except Busy as e:
            out["second_reply"] = str(e)
        return s.stop()

    stopping = asyncio.ensure_future(stopper())
    out["stopped"] = await s.generate(messages, True, greedy, 32, on_event)
    out["stop_answer"] = await stopping
    out["stop_idle"] = s.stop()
    bad = {}
    for key, call in (("last_not_user", s.generate(messages + [{"role": "assistant", "content": "x"}])),
                      ("bad_role", s.generate([{"role": "robot", "content": "x"}])),
                      ("bad_sampling", s.generate(messages, sampling={"temprature": 1})),
                      ("bad_top_p", s.generate(messages, sampling={"top_p": 0}))):
        try:
            await call
            bad[key] = None
        except ValueError as e:
            bad[key] = str(e)
    out["bad_requests"] = bad
    out["stats"] = s.stats()
    out["reset"] = s.reset()
    out["after_reset"] = await s.generate(messages, True, greedy, 32)
    s.unload()
    try:  # reported, not raised: the other checks of this one Node run stay visible when the store path breaks
        out["store"] = await store_session(args)
    except Exception:
        import traceback
        out["store"] = {"error": traceback.format_exc()}
    return out


async def store_session(args):
    """The store path: ingest into a model store (in memory here, OPFS in the browser), then run from it with the
    experts streamed into the smallest pool the budget allows."""
    import re
    from py_engine.app.errors import BudgetTooSmall
    from py_engine.app.session import Session
    from py_engine.store.local import MemoryStorage

    storage = MemoryStorage()
    s = Session(storage=lambda: storage)
    out = {}
    src = {"kind": "path", "path": args["model"]}
    opts = {"n_ctx": 256, "kv": "f32", "budget_bytes": 1000}
    try:
        await s.load(src, opts)
    except BudgetTooSmall as e:
        out["budget_error"] = str(e)
    out["stored_after_refusal"] = await storage.models()
    minimum = int(re.search(r"give at least (\d+) B", out["budget_error"]).group(1))
    greedy = {"temperature": 0}
    messages = [{"role": "user", "content": args["question"]}]
    # a pool with a slot for every expert: no budget given
    out["full_load"] = await s.load({"kind": "stored", "name": "micro-qwen3moe-f32.gguf"}, dict(opts, budget_bytes=None))
    out["full_reply"] = await s.generate(messages, True, greedy, 32)
    # the smallest pool: experts paged in per layer
    events = []
    out["load"] = await s.load({"kind": "stored", "name": "micro-qwen3moe-f32.gguf"}, dict(opts, budget_bytes=minimum),
                               events.append)
    out["load_events"] = sorted({e["stage"] for e in events})
    out["reply"] = await s.generate(messages, True, greedy, 32)
    out["stats"] = s.stats()
    s.unload()
    return out
'''


@pytest.fixture(scope="module")
def engine_out(fixture_models, refs_dir):
    prompt = protocol.load_refs(STEM, refs_dir)["prompts"][1]
    args = {"model": str(fixture_models / f"{STEM}.gguf"), "question": QUESTION, "prompt_ids": prompt["prompt_ids"],
            "not_gguf": str(fixture_models / "SHA256SUMS")}
    return prompt, run_in_node(ENGINE_CODE, args, mounts=[fixture_models], timeout=300)


def test_greedy_chat_reproduces_llama_cpp(engine_out):
    prompt, out = engine_out
    t1 = out["turn1"]
    n_prompt = len(prompt["prompt_ids"])
    assert out["truncate"] is True and out["vocab"] == 461 and out["n_ctx"] == 256
    assert t1["cached"][:n_prompt] == prompt["prompt_ids"]  # the template rendered the refs' prompt exactly
    assert t1["ids"] == prompt["greedy_ids"]
    assert t1["stop"] == "length" and t1["prefilled"] == n_prompt and t1["reused"] == 0
    assert "".join(t for k, t in t1["deltas"] if k == "text") == t1["text"]
    assert len(t1["deltas"]) > 1


def test_greedy_steps_are_queued_ahead(engine_out):
    """Greedy decoding queues each next step behind the current one (GpuBackend.decode_step): the outputs above
    (llama.cpp's greedy ids, the reused second turn, the abort) were produced that way."""
    _, out = engine_out
    assert out["queued_taken"] > 32


def test_candidates_match_step0_logits(engine_out, refs_dir):
    prompt, out = engine_out
    ref = protocol.load_step0_logits(STEM, 1, refs_dir)
    ids, logits = out["top5"]
    assert ids == [int(i) for i in np.argsort(-ref, kind="stable")[:5]]
    np.testing.assert_allclose(logits, ref[ids], atol=1e-4)
    assert out["top1"][0] == [ids[0]] and out["top1"][1] == [logits[0]]
    # the greedy fast path reads the same token and logit back from the GPU's argmax
    assert out["top1_fast"] == out["top1"]
    assert "only the best token was read back" in out["wider_after_greedy"]


def test_second_turn_reuses_prefix_and_equals_fresh(engine_out):
    _, out = engine_out
    reused, fresh = out["turn2_reused"], out["turn2_fresh"]
    assert reused["reused"] > 40 and reused["prefilled"] < fresh["prefilled"]
    assert fresh["reused"] == 0
    assert reused["ids"] == fresh["ids"] and len(reused["ids"]) == 8


def test_abort_keeps_text_and_state_recovers(engine_out):
    prompt, out = engine_out
    a = out["aborted"]
    assert a["stop"] == "abort" and 1 <= len(a["ids"]) < 32
    assert a["ids"] == prompt["greedy_ids"][:len(a["ids"])]
    assert out["after_abort"]["ids"] == prompt["greedy_ids"]
    assert out["gpu_bytes"] > 4_000_000


# --- the worker's Session (py_engine/app) ---------------------------------------------------------------------------
def test_session_errors_are_readable(engine_out):
    _, out = engine_out
    app = out["app"]
    assert app["no_model"][0] == "NoModelLoaded" and "press Load" in app["no_model"][1]
    kind, msg = app["budget"]
    assert kind == "BudgetTooSmall" and "GPU budget too small" in msg and "raise the budget" in msg
    assert app["bad_file"][0] == "BadModelFile" and "not a usable GGUF" in app["bad_file"][1]


def test_session_need_matches_what_was_uploaded(engine_out):
    _, out = engine_out
    need, actual = out["app"]["need"], out["decoder_stats"]
    assert need["kv_cache"] == actual["kv_bytes"]
    assert abs(need["weights"] - actual["weights_bytes"]) <= 0.01 * actual["weights_bytes"]
    assert need["activations"] >= actual["activation_bytes"]


def test_direct_copy_with_progress(engine_out, fixture_models):
    _, out = engine_out
    app = out["app"]
    size = (fixture_models / f"{STEM}.gguf").stat().st_size
    assert app["copy_equal"] is True
    ev = app["copy_events"]
    assert [e["bytes"] for e in ev] == sorted(e["bytes"] for e in ev) and ev[-1]["bytes"] == ev[-1]["total"] == size
    assert all(e["stage"] == "download" and e["rate"] > 0 for e in ev) and ev[-1]["eta"] == 0


def test_session_generates_streams_and_stops(engine_out):
    prompt, out = engine_out
    app = out["app"]
    assert app["load"]["arch"] == "qwen3moe" and app["load"]["n_ctx"] == 256 and app["load"]["gpu_bytes"] > 0
    assert app["load_events"][0] == "header" and app["load_events"][-1] == "ready"
    reply = app["reply"]
    assert reply["token_ids"] == prompt["greedy_ids"] and reply["stop_reason"] == "length"
    deltas = app["reply_deltas"]
    assert len(deltas) > 1 and all(d["kind"] == "delta" and d["channel"] == "text" for d in deltas)
    assert "".join(d["text"] for d in deltas) == reply["text"]
    assert reply["stats"]["decode_tokens_per_s"] > 0 and reply["stats"]["first_token_seconds"] > 0
    stopped = app["stopped"]
    assert stopped["stop_reason"] == "abort" and 3 <= len(stopped["token_ids"]) < 32
    assert stopped["token_ids"] == prompt["greedy_ids"][:len(stopped["token_ids"])]
    assert app["stop_answer"] == {"stopped": True} and app["stop_idle"] == {"stopped": False}
    assert "already being generated" in app["second_reply"]
    assert app["stats"]["loaded"] == "micro-qwen3moe-f32.gguf" and app["stats"]["replies"] == 2
    assert app["after_reset"]["token_ids"] == prompt["greedy_ids"]


def test_store_path_streams_experts_and_reproduces_llama_cpp(engine_out):
    prompt, out = engine_out
    st = out["app"]["store"]
    assert "error" not in st, st.get("error")
    assert "GPU budget too small" in st["budget_error"] and "give at least" in st["budget_error"]
    assert st["stored_after_refusal"] == ["micro-qwen3moe-f32.gguf"]  # the ingest ran before the budget check
    assert st["full_load"]["experts"] == "resident" and st["full_load"]["pool"]["full"]
    assert st["full_reply"]["token_ids"] == prompt["greedy_ids"]
    load = st["load"]
    assert load["path"] == "store" and load["experts"] == "streamed" and not load["pool"]["full"]
    assert "download" not in st["load_events"] and "ready" in st["load_events"]  # already stored
    assert st["reply"]["token_ids"] == prompt["greedy_ids"]
    stats = st["reply"]["stats"]
    assert stats["experts"] == "streamed" and 0 <= stats["expert_hit_rate"] < 1
    assert stats["bytes_read_per_token"] > 0


def test_session_refuses_bad_requests_readably(engine_out):
    _, out = engine_out
    bad = out["app"]["bad_requests"]
    assert bad["last_not_user"] == "the last message must be the user's"
    assert "expected {role: system|user|assistant, content}" in bad["bad_role"]
    assert "unknown sampling settings: temprature" in bad["bad_sampling"]
    assert "top_p must be > 0.0" in bad["bad_top_p"]


# --- a recurrent model: queued greedy steps cannot be undone there -------------------------------------------------

STEM35 = "micro-qwen35moe-f32"

RECURRENT_CODE = r'''
from py_engine.engine.decoder import Decoder
from py_engine.engine.gpu_backend import GpuBackend
from py_engine.generation import AbortFlag, Generator, SamplingParams
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer

GREEDY = SamplingParams.greedy()


async def main(args):
    dec = await Decoder.open(args["model"], n_ctx=256, kv_format="f32")
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args["model"]).metadata)
    backend = GpuBackend(dec)
    gen = Generator(backend, tok, backend.arch)
    messages = [{"role": "user", "content": args["question"]}]
    out = {"truncate": backend.supports_truncate}

    async def turn(msgs, n, abort=None):
        r = await gen.generate(msgs, thinking=True, max_tokens=n, sampling=GREEDY, abort=abort)
        return r, {"ids": r.token_ids, "stop": r.stop_reason, "reused": r.stats.reused_tokens,
                   "consistent": backend.n_cached == len(gen.cached_ids)}

    for chains in (True, False):  # queued greedy steps, then one readback per step before the next is encoded
        dec.chains = chains
        gen.reset()
        tag = "queued" if chains else "plain"
        r1, out[tag + "_turn1"] = await turn(messages, 24)
        messages2 = messages + [r1.as_message(), {"role": "user", "content": "And in two words?"}]
        _, out[tag + "_turn2"] = await turn(messages2, 8)
        gen.reset()
        _, out[tag + "_turn2_fresh"] = await turn(messages2, 8)
        flag = AbortFlag()
        count = [0]

        def tick(d):
            count[0] += 1
            if count[0] == 4:
                flag.abort()
        r = await gen.generate(messages, thinking=True, max_tokens=24, sampling=GREEDY, abort=flag, on_delta=tick)
        out[tag + "_aborted"] = {"ids": r.token_ids, "stop": r.stop_reason,
                                 "consistent": backend.n_cached == len(gen.cached_ids)}
        _, out[tag + "_after_abort"] = await turn(messages, 24)
        out[tag + "_taken"] = backend.queued_taken

    # the bench's queued decode, one and two steps queued behind the one read back, against steps read one by one
    from lab.engine_bench.timing import queued_steps
    prompt = args["prompt_ids"]
    for ahead in (1, 2):
        dec.reset()
        first, _ = await dec.step_prompt_argmax(prompt)
        out[f"ahead{ahead}"] = [first] + (await queued_steps(dec, first, 12, ahead))[2]
    # in runs of several tokens a submit (the bench's --tokens-per-submit; the last run shorter)
    for ahead, per in ((1, 5), (2, 3)):
        dec.reset()
        first, _ = await dec.step_prompt_argmax(prompt)
        out[f"runs{per}_ahead{ahead}"] = [first] + (await queued_steps(dec, first, 12, ahead, per))[2]
    dec.reset()
    ids = [(await dec.step_prompt_argmax(prompt))[0]]
    for _ in range(12):
        ids.append((await dec.step_argmax(ids[-1]))[0])
    out["one_by_one"] = ids
    # queued steps fed on the GPU after steps the host wrote the parameters of (the id copied into them) and after
    # queued ones (the argmax left them: Decoder.next_step_on_gpu), in turns
    dec.reset()
    mixed = [(await dec.step_prompt_argmax(prompt))[0]]
    mixed.append((await dec.collect_argmax(dec.launch_argmax(None)))[0])
    mixed.append((await dec.collect_argmax(dec.launch_argmax(None)))[0])
    mixed.append((await dec.step_argmax(mixed[-1]))[0])
    mixed.append((await dec.collect_argmax(dec.launch_argmax(None)))[0])
    mixed.extend(i for i, _ in await dec.collect_argmax_run(dec.launch_argmax_run(3)))
    mixed.append((await dec.collect_argmax(dec.launch_argmax(None)))[0])
    mixed.append((await dec.step_argmax(mixed[-1]))[0])
    mixed.extend(i for i, _ in await dec.collect_argmax_run(dec.launch_argmax_run(2)))
    out["mixed"] = mixed
    dec.reset()
    first, _ = await dec.step_prompt_argmax(prompt)
    handles = [dec.launch_argmax(None), dec.launch_argmax(None)]
    out["queued_after_prompt"] = [first] + [(await dec.collect_argmax(h))[0] for h in handles]
    handles = [dec.launch_argmax(ids[-1]), dec.launch_argmax(None), dec.launch_argmax(None)]
    try:
        dec.launch_argmax(None)
        out["fourth_launch"] = "no error"
    except RuntimeError as e:
        out["fourth_launch"] = str(e)
    for h in handles:
        await dec.collect_argmax(h)
    dec.release()
    return out
'''


@pytest.fixture(scope="module")
def recurrent_out(fixture_models):
    args = {"model": str(fixture_models / f"{STEM35}.gguf"), "question": QUESTION,
            "prompt_ids": [11, 42, 7, 300, 5]}
    # the bench's queued decode (lab/engine_bench) is run beside the engine
    return None, run_in_node(RECURRENT_CODE, args, mounts=[fixture_models], timeout=300, packages=[ENGINE_SIDE])


def test_recurrent_model_queued_greedy_equals_step_by_step(recurrent_out):
    _, out = recurrent_out
    assert out["truncate"] is False
    for key in ("turn1", "turn2", "turn2_fresh", "aborted", "after_abort"):
        assert out["queued_" + key]["ids"] == out["plain_" + key]["ids"], key
        assert out["queued_" + key]["consistent"], key  # the generator's count is the state's
    assert out["queued_taken"] > 24 and out["plain_taken"] == out["queued_taken"]  # nothing queued when off


def test_bench_queued_steps_one_or_two_ahead_equal_steps_one_by_one(recurrent_out):
    _, out = recurrent_out
    assert len(out["one_by_one"]) == 13
    assert out["ahead1"] == out["one_by_one"] and out["ahead2"] == out["one_by_one"]
    assert out["runs5_ahead1"] == out["one_by_one"] and out["runs3_ahead2"] == out["one_by_one"]
    assert "3 greedy steps are in flight" in out["fourth_launch"]


def test_queued_steps_after_host_written_steps_feed_the_right_token(recurrent_out):
    """A queued step (or run of steps in one submit) after a step read back one by one takes the argmax by a copy;
    after a queued step or run, from the parameters its last argmax left in the step buffer: either way the ids of
    steps read one by one."""
    _, out = recurrent_out
    assert out["mixed"] == out["one_by_one"][:12]
    assert out["queued_after_prompt"] == out["one_by_one"][:3]


def test_recurrent_model_reuses_state_across_turns_and_after_abort(recurrent_out):
    _, out = recurrent_out
    t2, fresh = out["queued_turn2"], out["queued_turn2_fresh"]
    assert t2["ids"] == fresh["ids"] and fresh["reused"] == 0
    assert out["queued_aborted"]["stop"] == "abort" and 1 <= len(out["queued_aborted"]["ids"]) < 24
    assert out["queued_after_abort"]["ids"] == out["queued_turn1"]["ids"]
