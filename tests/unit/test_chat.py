"""ChatML rendering for qwen3moe / qwen35moe, checked against llama.cpp's /apply-template of the fixture models."""
import json

import pytest

from conftest import REFS
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer, render_chat

HELLO = [{"role": "user", "content": "Hello"}]


def ref(stem):
    return json.loads((REFS / f"{stem}.json").read_text())


@pytest.mark.parametrize("stem", sorted(p.stem for p in REFS.glob("*.json") if "prompts" in json.loads(p.read_text())))
def test_matches_llama_cpp_apply_template(stem):
    about = ref(stem)["about"]
    arch = "qwen35moe" if "qwen35moe" in stem else "qwen3moe"
    want = about["apply_template_hello"]
    # the fixture GGUFs all carry Qwen3's template (no <think> opener); qwen35moe adds Qwen3.5's opener
    opener = "<think>\n" if arch == "qwen35moe" else ""
    assert render_chat(HELLO, arch, thinking=True) == want + opener
    assert render_chat(HELLO, arch, thinking=False) == want + "<think>\n\n</think>\n\n"


def test_chatml_layout_and_generation_prompts():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    base = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert render_chat(msgs, "qwen3moe", thinking=True) == base
    assert render_chat(msgs, "qwen35moe", thinking=True) == base + "<think>\n"
    assert render_chat(msgs, "qwen3moe", thinking=False) == base + "<think>\n\n</think>\n\n"
    assert render_chat(msgs, "qwen35moe", thinking=False) == base + "<think>\n\n</think>\n\n"
    assert render_chat(msgs, "qwen3moe", thinking=False, add_generation_prompt=False) == base[:-len(
        "<|im_start|>assistant\n")]


def test_history_drops_old_reasoning():
    msgs = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"},
    ]
    got = render_chat(msgs, "qwen3moe", thinking=True)
    assert got == ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                   "<|im_start|>user\nand 3+3?<|im_end|>\n<|im_start|>assistant\n")
    # an assistant turn after the last user query (a continued answer) keeps its reasoning, as in Qwen3's template
    tail = render_chat(msgs[:2], "qwen3moe", thinking=True, add_generation_prompt=False)
    assert tail.endswith("<|im_start|>assistant\n<think>\nadd them\n</think>\n\n4<|im_end|>\n")


def test_tool_results_and_errors():
    msgs = [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": "calling"},
            {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "20C"}]
    got = render_chat(msgs, "qwen3moe", thinking=False, add_generation_prompt=False)
    assert got.endswith("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n20C\n"
                        "</tool_response><|im_end|>\n")
    with pytest.raises(ValueError, match="role"):
        render_chat([{"role": "robot", "content": "x"}], "qwen3moe", thinking=True)
    with pytest.raises(ValueError, match="architecture"):
        render_chat(HELLO, "llama", thinking=True)


def test_rendered_prompt_tokenizes_to_single_special_ids(fixture_models):
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(fixture_models / "qwen3vocab-qwen35moe.gguf").metadata)
    ids = tok.encode(render_chat(HELLO, "qwen35moe", thinking=True))
    assert ids == [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198, 151667, 198]
    assert tok.token_text(ids[-2]) == "<think>"
