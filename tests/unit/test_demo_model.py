"""The shipped demo model (demo/*.gguf): llama.cpp's qwen35moe layout, a tokenizer llama.cpp can use as written,
greedy chat replies made of real words (>= 90 % of their words occur in the training text), and replies on the
asked topic for questions phrased in ways it was not trained on."""
import re
import sys
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "demo" / "diskformer-demo-qwen35moe-q8_0.gguf"
WORDS = REPO / "demo" / "training-words.txt"
MAX_BYTES = 15 * 1024 * 1024
F32_SUFFIXES = ("norm.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight", "ssm_a",
                "ssm_dt.bias")


@pytest.fixture(scope="module")
def reader():
    if not DEMO.is_file():
        pytest.fail(f"the demo model is missing: {DEMO.relative_to(REPO)}")
    return gguf.GGUFReader(str(DEMO))


def field(reader, key):
    return reader.fields[key].contents()


def test_file_is_small_qwen35moe_q8_0(reader):
    assert DEMO.stat().st_size <= MAX_BYTES
    assert field(reader, "general.architecture") == "qwen35moe"
    assert field(reader, "general.file_type") == 7  # mostly Q8_0
    n_layers = field(reader, "qwen35moe.block_count")
    interval = field(reader, "qwen35moe.full_attention_interval")
    assert field(reader, "qwen35moe.attention.recurrent_layers") == [(i + 1) % interval != 0 for i in range(n_layers)]
    assert not all(field(reader, "qwen35moe.attention.recurrent_layers"))  # at least one full-attention layer


def test_tensor_types_follow_llama_cpp(reader):
    names = {t.name: t for t in reader.tensors}
    assert "token_embd.weight" in names and "output.weight" in names and "output_norm.weight" in names
    for name, t in names.items():
        expect = "F32" if len(t.shape) == 1 or name.endswith(F32_SUFFIXES) else "Q8_0"
        assert t.tensor_type.name == expect, name
    ssm_a = [t for n, t in names.items() if n.endswith(".ssm_a")]
    assert ssm_a and all((t.data < 0).all() for t in ssm_a)  # stored as -exp(A_log)


def test_tokenizer_metadata(reader):
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    assert field(reader, "tokenizer.ggml.model") == "gpt2"
    assert field(reader, "tokenizer.ggml.pre") == "qwen35"
    assert field(reader, "tokenizer.ggml.add_bos_token") is False
    assert tokens[-5:] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    assert types[-5:] == [3, 3, 3, 4, 4]  # CONTROL x3, USER_DEFINED x2
    assert tokens[field(reader, "tokenizer.ggml.bos_token_id")] == "<|endoftext|>"
    assert tokens[field(reader, "tokenizer.ggml.padding_token_id")] == "<|endoftext|>"
    assert tokens[field(reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"
    assert tokens[:3] == ["!", '"', "#"] and tokens[94:96] == ["¡", "¢"]  # GPT-2 byte tokens, Qwen order
    assert "<|im_start|>" in field(reader, "tokenizer.chat_template")


def test_merges_stay_inside_pre_tokens(reader):
    """Each learned token is a single qwen35 pre-token, so llama.cpp (which merges inside pre-tokens only) can
    produce every token of the vocabulary the model was trained on."""
    from py_engine.tokenizer.byte_map import symbols_to_bytes
    from py_engine.tokenizer.pretokenize import rules_for, split_words

    rules = rules_for("qwen35")
    tokens = field(reader, "tokenizer.ggml.tokens")
    for text in tokens[256:-5]:
        word = symbols_to_bytes(text).decode("utf-8")
        assert split_words(word, rules) == [word], text


def test_greedy_replies_are_real_words():
    pytest.importorskip("numpy")
    if not (REPO / "diskformer" / "reference" / "model.py").is_file():
        pytest.skip("diskformer.reference (the numpy model) is not there")
    sys.path.insert(0, str(REPO / "tools" / "demo_model"))
    from evaluate import BAR, PROMPTS, DemoChat, load_words, real_word_fraction

    chat = DemoChat(DEMO)
    replies = [chat.reply(q) for q in PROMPTS]
    assert all(re.search(r"[A-Za-z]{3}", r) for r in replies), replies  # every prompt gets a worded reply
    fraction, n_words, missing = real_word_fraction(replies, load_words(WORDS))
    assert n_words >= 25, replies
    assert fraction >= BAR, (fraction, missing, replies)
    # the model learned its training answers: a question from the corpus gets its docstring's first sentence
    assert replies[3].startswith("Dict subclass for counting hashable items."), replies[3]
    assert replies[5] == "Built-in mutable sequence.", replies[5]  # "What is a Python list?": list's docstring


def test_heldout_phrasings_get_replies_on_topic():
    """The first 20 questions of the held-out phrasings split (corpus.py's, rebuilt from this Python's stdlib):
    most replies are about the name asked (topic.py's measure). 16 of these 20 on the shipped file (149 of all
    200, demo/README.md)."""
    pytest.importorskip("numpy")
    if sys.version_info[:3] != (3, 11, 7):
        pytest.skip("the held-out questions and answers are those of Python 3.11.7's standard library")
    sys.path.insert(0, str(REPO / "tools" / "demo_model"))
    import sysconfig

    from corpus import build
    from evaluate import DemoChat
    from topic import topic_shares

    _, record = build(Path(sysconfig.get_paths()["stdlib"]))
    record["questions"] = [q for q in record["questions"] if q["split"] == "phrasing"]
    results = topic_shares(DemoChat(DEMO), record, limit=20)["phrasing"]
    assert results["asked"] == 20
    assert results["on_topic"] >= 14, [(i["question"], i["reply"]) for i in results["items"] if not i["on_topic"]]


def test_real_word_measure_can_fail():
    sys.path.insert(0, str(REPO / "tools" / "demo_model"))
    from evaluate import load_words, real_word_fraction

    words = load_words(WORDS)
    assert {"the", "module", "return", "json"} <= words
    fraction, n, missing = real_word_fraction(["Thwe qzxv module blorf returns"], words)
    assert n == 5 and missing == ["Thwe", "qzxv", "blorf"] and fraction == pytest.approx(0.4)
