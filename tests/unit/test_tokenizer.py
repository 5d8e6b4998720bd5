"""Tokenizer against llama.cpp: the 156 Qwen3-vocabulary strings (qwen2 and qwen35 pre-tokenizers, special
parsing on and off, detokenization) and every fixture model's prompts, plus streaming decode."""
import json

import pytest

from conftest import FIXTURES, REFS
from diskformer.commands.detokenize import parse_ids
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import StreamDecoder, Tokenizer
from py_engine.tokenizer.char_classes import classify, classify_codepoint
from py_engine.tokenizer.pretokenize import rules_for, split_words

CASES = json.loads((FIXTURES / "tokenizer" / "qwen3.json").read_text())["cases"]
PRE_MODELS = {"qwen2": "qwen3vocab-qwen3moe", "qwen35": "qwen3vocab-qwen35moe"}
REF_STEMS = sorted(p.stem for p in REFS.glob("*.json") if "prompts" in json.loads(p.read_text()))
_cache = {}


def load(models_dir, stem) -> Tokenizer:
    if stem not in _cache:
        _cache[stem] = Tokenizer.from_gguf_metadata(read_gguf_file(models_dir / f"{stem}.gguf").metadata)
    return _cache[stem]


def stream(tok, ids) -> list:
    dec = StreamDecoder(tok)
    return [dec.feed(i) for i in ids] + [dec.flush()]


def test_eleven_reference_models():
    assert len(REF_STEMS) == 11


@pytest.mark.parametrize("pre", sorted(PRE_MODELS))
@pytest.mark.parametrize("mode", ["special", "nospecial"])
def test_qwen3_vocab_cases_match_llama_cpp(fixture_models, pre, mode):
    tok = load(fixture_models, PRE_MODELS[pre])
    assert tok.pre == pre
    wrong_ids, wrong_text = [], []
    for case in CASES:
        want = case[pre]
        got = tok.encode(case["text"], parse_special=(mode == "special"))
        if got != want[f"ids_{mode}"]:
            wrong_ids.append((case["index"], case["text"], got, want[f"ids_{mode}"]))
        if tok.decode(want[f"ids_{mode}"]) != want[f"detok_{mode}"]:
            wrong_text.append((case["index"], case["text"]))
    assert not wrong_ids, f"{len(wrong_ids)} of {len(CASES)} differ, first: {wrong_ids[:3]}"
    assert not wrong_text, f"detokenization differs for {wrong_text[:5]}"


@pytest.mark.parametrize("pre", sorted(PRE_MODELS))
def test_round_trip_and_streaming_on_all_cases(fixture_models, pre):
    tok = load(fixture_models, PRE_MODELS[pre])
    for case in CASES:
        for parse_special in (True, False):
            ids = tok.encode(case["text"], parse_special=parse_special)
            assert tok.decode(ids) == case["text"], case["index"]
            chunks = stream(tok, ids)
            assert "".join(chunks) == case["text"], case["index"]
            assert not any("\ufffd" in c for c in chunks if "\ufffd" not in case["text"]), case["index"]


def test_qwen35_differs_exactly_where_marked(fixture_models):
    q2, q35 = load(fixture_models, PRE_MODELS["qwen2"]), load(fixture_models, PRE_MODELS["qwen35"])
    for case in CASES:
        for mode, flag in (("special", True), ("nospecial", False)):
            differs = q2.encode(case["text"], flag) != q35.encode(case["text"], flag)
            assert differs == case["qwen35_differs"][mode], case["index"]


@pytest.mark.parametrize("stem", REF_STEMS)
def test_model_prompts_match_llama_cpp(fixture_models, stem):
    tok = load(fixture_models, stem)
    ref = json.loads((REFS / f"{stem}.json").read_text())
    for p in ref["prompts"]:
        ids = p["prompt_ids"]
        assert tok.encode(p["text"]) == ids
        assert tok.decode(ids) == p["prompt_detokenized"]
        pieces = [bytes(x) if isinstance(x, list) else x.encode("utf-8") for x in p["prompt_pieces"]]
        assert [tok.token_to_piece(i) for i in ids] == pieces
        # greedy continuations split characters across byte tokens: llama.cpp's text has U+FFFD there too
        assert tok.decode(p["greedy_ids"]) == p["greedy_text"]
        assert "".join(stream(tok, p["greedy_ids"])) == p["greedy_text"]


def test_stream_decoder_waits_for_complete_characters(fixture_models):
    tok = load(fixture_models, "micro-qwen3moe")  # toy vocabulary: an emoji is several byte tokens
    ids = tok.encode("🙂🚀")
    assert len(ids) > 2
    chunks = stream(tok, ids)
    assert "".join(chunks) == "🙂🚀"
    assert all(c in ("", "🙂", "🚀") for c in chunks)
    dec = StreamDecoder(tok)
    dec.feed(ids[0])
    assert dec.flush() == "\ufffd"  # an incomplete character at the end is replaced, as decode() does


def test_special_tokens_and_stop_ids(fixture_models):
    tok = load(fixture_models, PRE_MODELS["qwen2"])
    im_start, im_end, eot = (tok.token_to_id[t] for t in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"))
    assert tok.stop_ids == {im_end, eot} and tok.eos_id == im_end
    assert tok.vocab_size == 151936
    think = tok.token_to_id["<think>"]
    assert tok.encode("<think>x", parse_special=False)[0] == think  # user-defined: matched even with parsing off
    assert tok.encode("<|im_start|>", parse_special=False) != [im_start]
    assert tok.token_to_piece(im_start) == b"<|im_start|>"
    assert tok.token_to_piece(im_start, special=False) == b""
    assert tok.token_to_piece(151700) == b""  # [PAD...] rows are unused: no text
    assert tok.encode("") == []
    with pytest.raises(ValueError):
        tok.decode([tok.vocab_size])


def test_pre_tokenizer_rules():
    q2, q35 = rules_for("qwen2"), rules_for("qwen35")
    assert split_words("I'LL don't  go\n\n  x  ", q2) == ["I", "'LL", " don", "'t", " ", " go", "\n\n", " ", " x", "  "]
    assert split_words("12 ab!?\n\nc", q2) == ["1", "2", " ab", "!?\n\n", "c"]
    assert split_words("a ", q2) == ["a", " "]
    thai = "สวัสดี"
    assert split_words(thai, q35) == [thai] and len(split_words(thai, q2)) > 1
    with pytest.raises(ValueError):
        rules_for("llama3")


def test_character_classes_follow_llama_cpp_table():
    assert classify("a1 \n\t\u0301.\u00a0\x1c") == "LNSRWMPWP"  # U+001C is not whitespace for llama.cpp
    assert classify_codepoint(0x0CF3) == "M"   # assigned in Unicode 15 (newer than CPython 3.11's UCD 14)
    assert classify_codepoint(0x0897) == "P"   # assigned in Unicode 16 (Pyodide's UCD), unassigned for llama.cpp
    assert classify_codepoint(0x2EBF0) == "L"  # CJK extension I, Unicode 15.1


def test_metadata_errors():
    with pytest.raises(ValueError, match="tokenizer.ggml.model"):
        Tokenizer.from_gguf_metadata({"tokenizer.ggml.model": "llama"})
    with pytest.raises(ValueError, match="pre-tokenizer"):
        Tokenizer.from_gguf_metadata({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "falcon",
                                      "tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.merges": []})
    with pytest.raises(ValueError, match="duplicate"):
        Tokenizer(["a", "a"], [], "qwen2")


def test_detokenize_id_syntax():
    assert parse_ids("[1, 2, 3]") == [1, 2, 3]
    assert parse_ids("1,2 3 , 4") == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        parse_ids("1 two")


def test_cli_tokenize_and_detokenize(fixture_models, capsys):
    from diskformer.commands import detokenize, tokenize
    model = str(fixture_models / "qwen3vocab-qwen3moe.gguf")
    assert tokenize.main([model, "<|im_start|>user\nHello<|im_end|>"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ids": [151644, 872, 198, 9707, 151645]}
    assert tokenize.main([model, "<|im_end|>", "--no-special"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ids": [27, 91, 318, 6213, 91, 29]}
    assert detokenize.main([model, "9707,", "1879"]) == 0
    assert json.loads(capsys.readouterr().out) == {"text": "Hello world"}
    assert detokenize.main([model, "[151644, 872]"]) == 0
    assert json.loads(capsys.readouterr().out) == {"text": "<|im_start|>user"}
    assert detokenize.main([model, "999999"]) == 1
    assert "outside the vocabulary" in capsys.readouterr().err
