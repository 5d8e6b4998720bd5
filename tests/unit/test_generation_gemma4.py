"""Generation with gemma4 over the NumPy reference backend: the chat template, greedy decoding against llama.cpp's
exact-GELU refs, stop tokens, and Gemma 4's thought channel split from the answer."""
import asyncio
import json

import pytest

from conftest import GEMMA4_REFS
from diskformer.reference.backend import ReferenceBackend
from py_engine.generation import Generator, SamplingParams, ThinkingSplitter
from py_engine.generation.thinking import prompt_opens_thinking, thinking_tags

GREEDY = SamplingParams.greedy()
QUESTION = "Explain in one sentence what a mixture-of-experts model is."
GEMMA_TAGS = thinking_tags("gemma4")


def run(coro):
    return asyncio.run(coro)


def make(gemma4_models, stem):
    backend = ReferenceBackend.from_gguf(gemma4_models / f"{stem}.gguf")  # float32, exact GELU
    return backend, Generator(backend, backend.tokenizer, backend.arch)


def test_greedy_chat_reproduces_llama_cpp_exact_gelu(gemma4_models):
    ref = json.loads((GEMMA4_REFS / "micro-gemma4-f32.json").read_text())["prompts"][1]
    backend, gen = make(gemma4_models, "micro-gemma4-f32")
    result = run(gen.generate([{"role": "user", "content": QUESTION}], thinking=False, max_tokens=32,
                              sampling=GREEDY))
    assert gen.cached_ids[:len(ref["prompt_ids"])] == ref["prompt_ids"]  # the template rendered the refs' prompt
    assert result.token_ids == ref["exact_gelu"]["argmax"] == ref["greedy_ids"]
    assert result.stop_reason == "length"
    assert result.text == result.raw_text == backend.tokenizer.decode(ref["greedy_ids"]) and result.thinking == ""


def test_generation_stops_at_end_of_turn(gemma4_models):
    backend, gen = make(gemma4_models, "micro-gemma4-f32")
    turn_end = backend.tokenizer.token_to_id["<turn|>"]
    ref = json.loads((GEMMA4_REFS / "micro-gemma4-f32.json").read_text())["prompts"][1]
    # a stop set holding the refs' first token ends the answer before any token
    result = run(gen.complete(ref["text"], max_tokens=4, sampling=GREEDY, stop_ids=[ref["greedy_ids"][0]]))
    assert result.token_ids == [] and result.stop_reason == "stop"
    assert turn_end in backend.tokenizer.stop_ids and backend.tokenizer.eos_id in backend.tokenizer.stop_ids


@pytest.mark.parametrize("in_thinking, stream, thinking, text", [
    (False, "<|channel>thought\nplan it<channel|>The answer.", "plan it", "The answer."),
    (False, "The answer.", "", "The answer."),
    (True, "plan it\n<channel|>The answer.", "plan it", "The answer."),
    (False, "<|chan", "", "<|chan"),
])
def test_thought_channel_is_split_in_every_chunking(in_thinking, stream, thinking, text):
    for cut in range(len(stream) + 1):
        splitter = ThinkingSplitter(in_thinking, GEMMA_TAGS)
        pieces = splitter.feed(stream[:cut]) + splitter.feed(stream[cut:]) + splitter.flush()
        got = {k: "".join(t for kind, t in pieces if kind == k) for k in ("thinking", "text")}
        assert (got["thinking"], got["text"]) == (thinking, text), cut


def test_prompt_thinking_state_follows_the_template():
    from py_engine.tokenizer import render_chat
    hello = [{"role": "user", "content": "Hello"}]
    assert not prompt_opens_thinking(render_chat(hello, "gemma4", thinking=False), GEMMA_TAGS)  # closed channel
    assert not prompt_opens_thinking(render_chat(hello, "gemma4", thinking=True), GEMMA_TAGS)  # the model opens it
    assert thinking_tags("qwen3moe") == ("<think>", "</think>")
