"""The generation layer (py_engine/generation) over the NumPy reference backend, checked against llama.cpp's refs.

Free-running greedy decodes use the F32 fixture files (exact to ~1e-5, every margin of the compared steps is
far above that) or, for the Q8_0 file, the reference's Q8_0 activation emulation, which reproduces llama.cpp's
32 steps of micro-qwen35moe prompt 1 (including its '</think>' at step 18).
"""
import asyncio
import json
import math

import numpy as np
import pytest

from conftest import REFS
from diskformer.reference.backend import ReferenceBackend
from diskformer.reference.options import Options
from py_engine.generation import (AbortFlag, ContextFullError, Delta, Generator, GeneratorBusyError, Sampler,
                                  SamplingParams, ThinkingSplitter, check_backend, top_candidates)
from py_engine.generation.prefix import checkpoint_positions, plan_reuse
from py_engine.generation.sampling import apply_penalties, min_p_filter, softmax, top_k_filter, top_p_filter
from py_engine.tokenizer import render_chat

GREEDY = SamplingParams.greedy()
QUESTION = "Explain in one sentence what a mixture-of-experts model is."


def run(coro):
    return asyncio.run(coro)


def refs_prompt(stem, index):
    return json.loads((REFS / f"{stem}.json").read_text())["prompts"][index]


def make(fixture_models, stem, **kwargs):
    options = kwargs.pop("options", None)
    backend = ReferenceBackend.from_gguf(fixture_models / f"{stem}.gguf", options, **kwargs)
    return backend, Generator(backend, backend.tokenizer, backend.arch)


class Collect:
    def __init__(self):
        self.deltas = []

    def __call__(self, delta):
        assert isinstance(delta, Delta) and delta.kind in ("text", "thinking") and delta.text
        self.deltas.append(delta)

    def joined(self, kind):
        return "".join(d.text for d in self.deltas if d.kind == kind)


def assert_deltas_match(result, collect):
    assert collect.joined("text") == result.text
    assert collect.joined("thinking") == result.thinking


# --- greedy against llama.cpp ---------------------------------------------------------------------------------------
def test_greedy_chat_reproduces_llama_cpp_qwen3moe(fixture_models):
    ref = refs_prompt("micro-qwen3moe-f32", 1)
    backend, gen = make(fixture_models, "micro-qwen3moe-f32")
    collect = Collect()
    messages = [{"role": "user", "content": QUESTION}]
    result = run(gen.generate(messages, thinking=True, max_tokens=32, sampling=GREEDY, on_delta=collect))
    assert gen.cached_ids[:len(ref["prompt_ids"])] == ref["prompt_ids"]  # the template rendered the refs' prompt
    assert result.token_ids == ref["greedy_ids"]
    assert result.stop_reason == "length" and not result.aborted
    assert result.raw_text == backend.tokenizer.decode(ref["greedy_ids"]) == ref["greedy_text"]
    assert result.text == result.raw_text and result.thinking == ""  # no '<think>' at the start: all answer
    assert_deltas_match(result, collect)
    s = result.stats
    assert (s.prompt_tokens, s.prefilled_tokens, s.reused_tokens, s.generated_tokens, s.decode_steps) == \
           (len(ref["prompt_ids"]), len(ref["prompt_ids"]), 0, 32, 31)
    assert s.prefill_tokens_per_s > 0 and s.decode_tokens_per_s > 0 and 0 < s.first_token_seconds <= s.total_seconds
    # one prompt prefill, then one call per fed token
    assert backend.prefill_calls == [(0, len(ref["prompt_ids"]))] + [(len(ref["prompt_ids"]) + i, 1) for i in range(31)]


def test_greedy_raw_prompt_reproduces_llama_cpp_qwen35moe(fixture_models):
    ref = refs_prompt("micro-qwen35moe-f32", 1)
    _, gen = make(fixture_models, "micro-qwen35moe-f32")
    result = run(gen.complete(ref["text"], max_tokens=32, sampling=GREEDY))
    assert result.token_ids == ref["greedy_ids"]


def test_greedy_stops_at_the_stop_token(fixture_models):
    # llama.cpp's plain-argmax refs continue past <|im_end|>/<|endoftext|>; generation stops there
    backend, gen = make(fixture_models, "micro-gqa-qwen35moe-f32")
    ref = refs_prompt("micro-gqa-qwen35moe-f32", 0)
    im_end = backend.tokenizer.token_to_id["<|im_end|>"]
    assert ref["greedy_ids"][1] == im_end
    result = run(gen.complete(ref["text"], max_tokens=32, sampling=GREEDY))
    assert result.token_ids == ref["greedy_ids"][:1]
    assert (result.stop_reason, result.stop_token) == ("stop", im_end)
    assert im_end not in gen.cached_ids  # the stop token is not fed to the model

    ref2 = refs_prompt("micro-gqa-qwen35moe-f32", 2)  # argmax of step 0 is <|endoftext|>
    result = run(gen.complete(ref2["text"], max_tokens=32, sampling=GREEDY))
    assert result.token_ids == [] and result.text == "" and result.stop_token == ref2["greedy_ids"][0]
    # a custom stop set: without the stop ids the refs' continuation goes on
    result = run(gen.complete(ref["text"], max_tokens=4, sampling=GREEDY, stop_ids=[]))
    assert result.token_ids == ref["greedy_ids"][:4] and result.stop_reason == "length"


def test_thinking_is_separated_from_the_answer(fixture_models):
    # micro-qwen35moe (Q8_0) prompt 1: llama.cpp's greedy output has '</think>' (id 460) at step 18
    ref = refs_prompt("micro-qwen35moe", 1)
    backend, gen = make(fixture_models, "micro-qwen35moe", options=Options(dtype=np.float32, q8_activations=True))
    close = backend.tokenizer.token_to_id["</think>"]
    assert ref["greedy_ids"][18] == close
    collect = Collect()
    result = run(gen.generate_ids(ref["prompt_ids"], max_tokens=24, sampling=GREEDY, on_delta=collect,
                                  in_thinking=True))
    ids = ref["greedy_ids"][:24]
    assert result.token_ids == ids
    dec = backend.tokenizer.decode
    assert result.thinking == dec(ids[:18]).strip("\n") and result.thinking
    assert result.text == dec(ids[19:]).lstrip("\n") and result.text
    assert "</think>" not in result.text + result.thinking and "</think>" in result.raw_text
    assert_deltas_match(result, collect)
    assert [d.kind for d in collect.deltas] == sorted((d.kind for d in collect.deltas), reverse=True)
    # the same output without an open block is all answer
    gen.reset()
    result = run(gen.generate_ids(ref["prompt_ids"], max_tokens=24, sampling=GREEDY))
    assert result.thinking == "" and result.text == result.raw_text


def test_qwen35_thinking_prompt_streams_thinking(fixture_models):
    _, gen = make(fixture_models, "micro-qwen35moe-f32")
    messages = [{"role": "user", "content": QUESTION}]
    collect = Collect()
    result = run(gen.generate(messages, thinking=True, max_tokens=8, sampling=GREEDY, on_delta=collect))
    assert result.text == "" and result.thinking and {d.kind for d in collect.deltas} == {"thinking"}
    prompt = gen.tokenizer.decode(gen.cached_ids[:result.stats.prompt_tokens])
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")
    result = run(gen.generate(messages, thinking=False, max_tokens=8, sampling=GREEDY))
    assert result.thinking == "" and result.text


# --- sampling -------------------------------------------------------------------------------------------------------
def sample_text(gen, seed, n=16):
    gen.reset()
    params = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
    return run(gen.generate([{"role": "user", "content": QUESTION}], max_tokens=n, sampling=params, stop_ids=[]))


def test_seeded_sampling_is_deterministic_and_seed_dependent(fixture_models):
    _, gen = make(fixture_models, "micro-qwen3moe-f32")
    a, b, c = sample_text(gen, 1), sample_text(gen, 1), sample_text(gen, 2)
    assert a.token_ids == b.token_ids and a.text == b.text and a.stats.seed == 1
    assert a.token_ids != c.token_ids
    greedy = run(gen.generate([{"role": "user", "content": QUESTION}], max_tokens=16, sampling=GREEDY,
                              stop_ids=[]))
    assert a.token_ids != greedy.token_ids  # temperature 1 over 461 near-uniform logits is not greedy
    # a backend that serves only 64 candidates samples from those: still deterministic
    _, narrow = make(fixture_models, "micro-qwen3moe-f32", max_candidates=64)
    assert sample_text(narrow, 7).token_ids == sample_text(narrow, 7).token_ids


def test_top_k_keeps_k():
    ids, logits = [3, 1, 2, 0], [4.0, 3.0, 2.0, 1.0]
    assert top_k_filter(ids, logits, 2) == ([3, 1], [4.0, 3.0])
    assert top_k_filter(ids, logits, 0) == (ids, logits)
    assert top_k_filter(ids, logits, 9) == (ids, logits)
    picks = {Sampler(SamplingParams(temperature=5.0, top_k=2, top_p=1.0, min_p=0.0, seed=s)).pick(ids, logits)
             for s in range(200)}
    assert picks == {3, 1}


def test_top_p_threshold():
    logits = [math.log(0.5), math.log(0.3), math.log(0.2)]
    ids = [10, 11, 12]
    assert top_p_filter(ids, logits, 0.5)[0] == [10]
    assert top_p_filter(ids, logits, 0.75)[0] == [10, 11]
    assert top_p_filter(ids, logits, 0.85)[0] == [10, 11, 12]
    assert top_p_filter(ids, logits, 1.0)[0] == ids
    assert top_p_filter(ids, logits, 0.01)[0] == [10]  # keeps at least one


def test_min_p_threshold():
    logits = [math.log(0.5), math.log(0.3), math.log(0.2)]
    ids = [10, 11, 12]
    assert min_p_filter(ids, logits, 0.5)[0] == [10, 11]  # 0.3/0.5 = 0.6 >= 0.5, 0.2/0.5 = 0.4 < 0.5
    assert min_p_filter(ids, logits, 0.39)[0] == [10, 11, 12]
    assert min_p_filter(ids, logits, 1.0)[0] == [10]
    assert min_p_filter(ids, logits, 0.0)[0] == ids


def test_repetition_penalty_math():
    p = SamplingParams(repeat_penalty=2.0, repeat_last_n=64)
    ids, logits = apply_penalties([5, 6, 7], [2.0, -1.0, 0.5], history=[5, 6, 6], params=p)
    assert dict(zip(ids, logits)) == {5: 1.0, 6: -2.0, 7: 0.5}  # positive divided, negative multiplied, once
    assert ids == [5, 7, 6]  # re-sorted
    # only the last N tokens count
    ids, logits = apply_penalties([5, 6], [2.0, 1.0], [5, 6], SamplingParams(repeat_penalty=2.0, repeat_last_n=1))
    assert dict(zip(ids, logits)) == {5: 2.0, 6: 0.5}
    assert apply_penalties([5], [2.0], [5], SamplingParams(repeat_penalty=2.0, repeat_last_n=0)) == ([5], [2.0])
    # frequency and presence penalties (llama.cpp: logit -= count * freq + presence)
    ids, logits = apply_penalties([5, 6], [2.0, 1.0], [5, 5, 5], SamplingParams(frequency_penalty=0.5,
                                                                                  presence_penalty=0.25))
    assert dict(zip(ids, logits)) == {5: 2.0 - 1.5 - 0.25, 6: 1.0}
    # a truncated candidate list drops a token pushed below its last logit (an unseen token might beat it)
    ids, _ = apply_penalties([5, 6, 7], [3.0, 2.0, 1.0], [5], SamplingParams(repeat_penalty=4.0), complete=False)
    assert ids == [6, 7]
    ids, _ = apply_penalties([5, 6, 7], [3.0, 2.0, 1.0], [5], SamplingParams(repeat_penalty=4.0), complete=True)
    assert ids == [6, 7, 5]


def test_temperature_zero_is_greedy():
    ids, logits = [4, 2, 9], [1.0, 0.99, -3.0]
    for seed in range(20):
        assert Sampler(SamplingParams(temperature=0.0, seed=seed)).pick(ids, logits) == 4
    s = Sampler(SamplingParams.greedy(repeat_penalty=2.0))
    assert s.pick(ids, logits, history=[4]) == 2  # greedy after the penalty
    assert Sampler(GREEDY).candidates_needed(64) == 1 and s.candidates_needed(64) == 64
    assert Sampler(SamplingParams(candidates=200)).candidates_needed(64) == 64


def test_sampling_follows_the_distribution():
    ids, logits = [1, 2], [math.log(0.75), math.log(0.25)]
    sampler = Sampler(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3))
    draws = [sampler.pick(ids, logits) for _ in range(4000)]
    assert 0.72 < draws.count(1) / len(draws) < 0.78
    cold = Sampler(SamplingParams(temperature=0.05, top_k=0, top_p=1.0, min_p=0.0, seed=3))
    assert all(cold.pick(ids, logits) == 1 for _ in range(200))
    assert abs(sum(softmax([1.0, 2.0, 3.0])) - 1.0) < 1e-12


@pytest.mark.parametrize("bad, message", [
    (dict(temperature=-0.1), "temperature must be >= 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number"),
    (dict(top_k=-1), "top_k must be >= 0"),
    (dict(top_k=2.5), "top_k must be an integer"),
    (dict(top_p=0.0), "top_p must be > 0"),
    (dict(top_p=1.5), "top_p must be <= 1"),
    (dict(min_p=-0.1), "min_p must be >= 0"),
    (dict(repeat_penalty=0.0), "repeat_penalty must be > 0"),
    (dict(repeat_last_n=-2), "repeat_last_n must be >= -1"),
    (dict(seed=-1), "seed must be in 0.."),
    (dict(seed=True), "seed must be an integer"),
    (dict(candidates=0), "candidates must be in 1.."),
])
def test_sampling_parameters_are_validated(bad, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**bad)


def test_sampling_from_dict():
    assert SamplingParams.from_dict({"temperature": 0.5, "seed": 4}) == SamplingParams(temperature=0.5, seed=4)
    with pytest.raises(ValueError, match="unknown parameter.*top_z"):
        SamplingParams.from_dict({"top_z": 3})


def test_top_candidates_helper():
    assert top_candidates([0.5, 2.0, 2.0, -1.0], 3) == ([1, 2, 0], [2.0, 2.0, 0.5])
    with pytest.raises(ValueError):
        top_candidates([1.0], 0)


# --- prefix reuse ---------------------------------------------------------------------------------------------------
def two_turns(fixture_models, stem, **kwargs):
    backend, gen = make(fixture_models, stem, **kwargs)
    first = [{"role": "user", "content": QUESTION}]
    r1 = run(gen.generate(first, max_tokens=6, sampling=GREEDY, stop_ids=[]))
    cached = gen.cached_ids
    calls_before = len(backend.prefill_calls)
    second = first + [r1.as_message(), {"role": "user", "content": "And in two sentences?"}]
    r2 = run(gen.generate(second, max_tokens=6, sampling=GREEDY, stop_ids=[]))
    prompt2 = backend.tokenizer.encode(render(second, backend.arch))
    return backend, gen, cached, backend.prefill_calls[calls_before], prompt2, second, r2


def render(messages, arch):
    return render_chat(messages, arch, thinking=False)


def fresh_answer(fixture_models, stem, messages):
    _, gen = make(fixture_models, stem)
    return run(gen.generate(messages, max_tokens=6, sampling=GREEDY, stop_ids=[])).token_ids


def test_prefix_reuse_prefills_only_new_tokens_kv_model(fixture_models):
    backend, gen, cached, first_call, prompt2, second, r2 = two_turns(fixture_models, "micro-qwen3moe-f32")
    assert backend.supports_truncate
    common = 0
    while common < min(len(cached), len(prompt2)) and cached[common] == prompt2[common]:
        common += 1
    # the old answer is re-rendered without the empty think block, so the cache diverges inside turn 1: truncate
    assert 10 < common < len(cached)
    assert first_call == (common, len(prompt2) - common)
    assert r2.stats.reused_tokens == common and r2.stats.prefilled_tokens == len(prompt2) - common
    assert backend.resets == 0 and not r2.stats.cache_reset
    assert r2.token_ids == fresh_answer(fixture_models, "micro-qwen3moe-f32", second)  # truncation is exact


def test_recurrent_model_resets_on_divergence_without_checkpoints(fixture_models):
    backend, gen, cached, first_call, prompt2, second, r2 = two_turns(fixture_models, "micro-qwen35moe-f32",
                                                                      state_checkpoints=0)
    assert not backend.supports_truncate
    assert first_call == (0, len(prompt2)) and r2.stats.cache_reset and r2.stats.reused_tokens == 0
    assert r2.token_ids == fresh_answer(fixture_models, "micro-qwen35moe-f32", second)


def test_recurrent_model_resumes_from_the_turn_checkpoint(fixture_models):
    """Three turns: each follow-up goes back to the state kept at the start of the last answer's header and
    prefills only the new turn (the old answer as re-rendered, the question, the header), whatever the length of
    the conversation; the answers equal those of a fresh run."""
    stem = "micro-qwen35moe-f32"
    backend, gen = make(fixture_models, stem)
    im_start = backend.tokenizer.token_to_id["<|im_start|>"]
    messages = [{"role": "user", "content": QUESTION}]
    previous_prompt = None
    for question in ("And in two sentences?", "And in one word?", None):
        prompt = backend.tokenizer.encode(render(messages, backend.arch))
        r = run(gen.generate(messages, max_tokens=6, sampling=GREEDY, stop_ids=[]))
        if previous_prompt is not None:
            header = max(i for i, t in enumerate(previous_prompt) if t == im_start)  # the last answer's header
            assert prompt[:header] == previous_prompt[:header] and not r.stats.cache_reset
            assert r.stats.restored_checkpoint == r.stats.reused_tokens == header
            assert r.stats.prefilled_tokens == len(prompt) - header
        assert r.token_ids == fresh_answer(fixture_models, stem, messages)
        previous_prompt = prompt
        if question:
            messages = messages + [r.as_message(), {"role": "user", "content": question}]
    # regenerate the last answer: back to the start of its header, only the header prefilled
    header = max(i for i, t in enumerate(prompt) if t == im_start)
    again = run(gen.generate(messages, max_tokens=6, sampling=GREEDY, stop_ids=[]))
    assert again.stats.reused_tokens == header and again.stats.prefilled_tokens == len(prompt) - header
    assert again.token_ids == r.token_ids
    # an edited last question: back to the start of that question
    edited = messages[:-1] + [{"role": "user", "content": "Or in three words?"}]
    e = run(gen.generate(edited, max_tokens=6, sampling=GREEDY, stop_ids=[]))
    asked = max(i for i, t in enumerate(prompt[:header]) if t == im_start)
    assert e.stats.reused_tokens == asked and e.token_ids == fresh_answer(fixture_models, stem, edited)


def test_checkpoint_positions():
    assert checkpoint_positions([5, 1, 2, 5, 3, 5, 4], 5, 0) == [3, 5]  # the last two turn starts
    assert checkpoint_positions([5, 1, 2, 5, 3, 5, 4], 5, 3) == [5]  # past what is kept already
    assert checkpoint_positions([5, 1, 2], 5, 0) == []  # a turn opening the prompt: nothing before it to keep
    assert checkpoint_positions([5, 1, 5], None, 0) == []


def test_recurrent_model_reuses_a_pure_extension(fixture_models):
    backend, gen = make(fixture_models, "micro-qwen35moe-f32")
    ref = refs_prompt("micro-qwen35moe-f32", 1)
    r1 = run(gen.generate_ids(ref["prompt_ids"], max_tokens=5, sampling=GREEDY))
    extra = backend.tokenizer.encode("<|im_end|>\n<|im_start|>user\nMore.<|im_end|>\n<|im_start|>assistant\n")
    prompt2 = ref["prompt_ids"] + r1.token_ids + extra
    n_cached, resets = len(gen.cached_ids), backend.resets
    assert n_cached == len(ref["prompt_ids"]) + 4  # the last answer token was never fed
    r2 = run(gen.generate_ids(prompt2, max_tokens=5, sampling=GREEDY))
    assert backend.resets == resets and r2.stats.reused_tokens == n_cached
    assert r2.stats.prefilled_tokens == len(prompt2) - n_cached
    _, fresh = make(fixture_models, "micro-qwen35moe-f32")
    assert r2.token_ids == run(fresh.generate_ids(prompt2, max_tokens=5, sampling=GREEDY)).token_ids


def test_plan_reuse():
    assert plan_reuse([], [1, 2, 3], False) == (0, False)
    assert plan_reuse([1, 2], [1, 2, 3], False) == (2, False)  # extension
    assert plan_reuse([1, 2, 3], [1, 2, 3], True) == (2, False)  # same prompt: redo the last token for its logits
    assert plan_reuse([1, 2, 3], [1, 2, 3], False) == (0, True)
    assert plan_reuse([1, 2, 9, 9], [1, 2, 3], True) == (2, False)
    assert plan_reuse([1, 2, 9, 9], [1, 2, 3], False) == (0, True)


def test_same_prompt_twice_gives_the_same_answer(fixture_models):
    backend, gen = make(fixture_models, "micro-qwen3moe-f32")
    messages = [{"role": "user", "content": QUESTION}]
    a = run(gen.generate(messages, max_tokens=5, sampling=GREEDY, stop_ids=[]))
    b = run(gen.generate(messages, max_tokens=5, sampling=GREEDY, stop_ids=[]))
    assert a.token_ids == b.token_ids and b.stats.prefilled_tokens == 1


# --- context, abort, streaming, errors --------------------------------------------------------------------------
def test_context_full_before_start(fixture_models):
    ref = refs_prompt("micro-qwen3moe-f32", 1)
    n = len(ref["prompt_ids"])
    backend, gen = make(fixture_models, "micro-qwen3moe-f32", n_ctx=n)
    with pytest.raises(ContextFullError, match=f"context full: {n} tokens of {n} ") as err:
        run(gen.generate_ids(ref["prompt_ids"], sampling=GREEDY))
    assert (err.value.n_tokens, err.value.n_ctx) == (n, n) and backend.prefill_calls == []


def test_context_full_while_decoding_keeps_the_text(fixture_models):
    ref = refs_prompt("micro-qwen3moe-f32", 1)
    n = len(ref["prompt_ids"])
    backend, gen = make(fixture_models, "micro-qwen3moe-f32", n_ctx=n + 3)
    result = run(gen.generate_ids(ref["prompt_ids"], sampling=GREEDY))  # no max_tokens: until the context ends
    assert result.stop_reason == "context_full"
    assert result.token_ids == ref["greedy_ids"][:4]  # 3 fed + the last one sampled from the final position
    assert result.text == backend.tokenizer.decode(ref["greedy_ids"][:4])
    assert result.message.startswith(f"context full: {n + 3} tokens of {n + 3}")
    assert backend.n_cached == n + 3


def test_abort_mid_stream_keeps_the_text(fixture_models):
    ref = refs_prompt("micro-qwen3moe-f32", 1)
    backend, gen = make(fixture_models, "micro-qwen3moe-f32")
    flag, collect = AbortFlag(), Collect()

    def on_delta(delta):
        collect(delta)
        if len(collect.deltas) == 3:
            flag.abort()

    result = run(gen.generate_ids(ref["prompt_ids"], max_tokens=32, sampling=GREEDY, on_delta=on_delta, abort=flag))
    assert result.aborted and result.stop_reason == "abort"
    assert 3 <= len(result.token_ids) < 32 and result.token_ids == ref["greedy_ids"][:len(result.token_ids)]
    assert result.text == collect.joined("text") == backend.tokenizer.decode(result.token_ids)
    # an abort before anything ran: nothing generated, the cache stays consistent for the next turn
    result = run(gen.generate_ids(ref["prompt_ids"], sampling=GREEDY, abort=lambda: True))
    assert result.aborted and result.token_ids == [] and len(gen.cached_ids) == backend.n_cached
    result = run(gen.generate_ids(ref["prompt_ids"], max_tokens=4, sampling=GREEDY, abort=asyncio.Event()))
    assert result.token_ids == ref["greedy_ids"][:4]


def test_stream_iterator_yields_the_deltas(fixture_models):
    _, gen = make(fixture_models, "micro-qwen35moe-f32")
    messages = [{"role": "user", "content": QUESTION}]

    async def consume():
        stream = gen.stream(messages, thinking=False, max_tokens=12, sampling=GREEDY)
        deltas = [d async for d in stream]
        return deltas, stream.result

    deltas, result = run(consume())
    assert deltas and "".join(d.text for d in deltas if d.kind == "text") == result.text
    assert len(result.token_ids) == 12 or result.stop_reason == "stop"

    async def failing():
        return [d async for d in gen.stream(messages, max_tokens=0)]

    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        run(failing())


def test_busy_and_bad_input(fixture_models):
    backend, gen = make(fixture_models, "micro-qwen3moe-f32")
    errors = []

    async def reentrant(delta):
        try:
            await gen.generate_ids([1, 2], max_tokens=1)
        except GeneratorBusyError as e:
            errors.append(e)

    run(gen.generate_ids([1, 2, 3], max_tokens=2, sampling=GREEDY, on_delta=reentrant, stop_ids=[]))
    assert errors
    with pytest.raises(ValueError, match="outside the vocabulary"):
        run(gen.generate_ids([1, backend.vocab_size], max_tokens=1))
    with pytest.raises(ValueError, match="prompt is empty"):
        run(gen.generate_ids([], max_tokens=1))
    with pytest.raises(TypeError, match="lacks .*next_candidates"):
        check_backend(object())


@pytest.mark.parametrize("in_thinking, stream, thinking, text", [
    (False, "<think>\nplan it\n</think>\n\nThe answer.", "plan it", "The answer."),
    (True, "\nplan it\n\n</think>\n\nThe answer.\n", "plan it", "The answer.\n"),
    (False, "  Just text <think> inside", "", "  Just text <think> inside"),
    (True, "unfinished thought\n", "unfinished thought", ""),
    (False, "  ", "", "  "),
    (False, "<thin", "", "<thin"),
    (True, "a\n\nb</think", "a\n\nb</think", ""),
])
def test_thinking_splitter_every_chunking(in_thinking, stream, thinking, text):
    for cut in range(len(stream) + 1):
        for cut2 in range(cut, len(stream) + 1):
            splitter = ThinkingSplitter(in_thinking)
            pieces = []
            for chunk in (stream[:cut], stream[cut:cut2], stream[cut2:]):
                pieces += splitter.feed(chunk)
            pieces += splitter.flush()
            got = {k: "".join(t for kind, t in pieces if kind == k) for k in ("thinking", "text")}
            assert (got["thinking"], got["text"]) == (thinking, text), (cut, cut2)
