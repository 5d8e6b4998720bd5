"""Gemma 4's SentencePiece-style BPE against llama.cpp: the 183 strings of the gemma4 fixtures (both toy
vocabularies, special parsing on and off, detokenization), every gemma4 model's prompts, round trips, streaming,
stop tokens and the chat template."""
import json

import pytest

from conftest import GEMMA4_FIXTURES, GEMMA4_REFS
from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import StreamDecoder, Tokenizer, render_chat
from py_engine.tokenizer.sentencepiece import SentencePieceTokenizer
from py_engine.tokenizer.spm_bpe import split_pieces

CASES = json.loads((GEMMA4_FIXTURES / "tokenizer" / "gemma4-toy.json").read_text())["cases"]
VOCABS = {"micro": "micro-gemma4", "tiny": "tiny-gemma4"}
REF_STEMS = sorted(p.stem for p in GEMMA4_REFS.glob("*.json") if "prompts" in json.loads(p.read_text()))
HELLO = [{"role": "user", "content": "Hello"}]
_cache = {}


def load(models_dir, stem) -> Tokenizer:
    if stem not in _cache:
        _cache[stem] = Tokenizer.from_gguf_metadata(read_gguf_file(models_dir / f"{stem}.gguf").metadata)
    return _cache[stem]


def stream(tok, ids) -> list:
    dec = StreamDecoder(tok)
    return [dec.feed(i) for i in ids] + [dec.flush()]


def test_fixture_set():
    assert len(CASES) == 183 and len(REF_STEMS) == 4


@pytest.mark.parametrize("vocab", sorted(VOCABS))
@pytest.mark.parametrize("mode", ["special", "nospecial"])
def test_toy_vocab_cases_match_llama_cpp(gemma4_models, vocab, mode):
    tok = load(gemma4_models, VOCABS[vocab])
    assert isinstance(tok, SentencePieceTokenizer) and tok.pre == "gemma4"
    wrong_ids, wrong_text = [], []
    for case in CASES:
        want = case[vocab]
        got = tok.encode(case["text"], parse_special=(mode == "special"))
        if got != want[f"ids_{mode}"]:
            wrong_ids.append((case["index"], case["text"], got, want[f"ids_{mode}"]))
        if tok.decode(want[f"ids_{mode}"]) != want[f"detok_{mode}"]:
            wrong_text.append((case["index"], case["text"]))
    assert not wrong_ids, f"{len(wrong_ids)} of {len(CASES)} differ, first: {wrong_ids[:3]}"
    assert not wrong_text, f"detokenization differs for {wrong_text[:5]}"


@pytest.mark.parametrize("vocab", sorted(VOCABS))
def test_round_trips_and_streaming(gemma4_models, vocab):
    tok = load(gemma4_models, VOCABS[vocab])
    lossy = []
    for case in CASES:
        for parse_special in (True, False):
            ids = tok.encode(case["text"], parse_special=parse_special)
            text = tok.decode(ids)
            if text != case["text"]:
                lossy.append(case["text"])
                continue
            assert "".join(stream(tok, ids)) == text, case["index"]
        assert (tok.decode(tok.encode(case["text"], parse_special=False)) == case["text"]) == \
            case["nospecial_roundtrip"], case["index"]
    # only the literal '▁' comes back as a space (the vocabulary writes spaces that way)
    assert set(lossy) == {c["text"] for c in CASES if not c["nospecial_roundtrip"]}
    assert all("\u2581" in t for t in lossy)


@pytest.mark.parametrize("stem", REF_STEMS)
def test_model_prompts_match_llama_cpp(gemma4_models, stem):
    tok = load(gemma4_models, stem)
    ref = json.loads((GEMMA4_REFS / f"{stem}.json").read_text())
    for p in ref["prompts"]:
        ids = p["prompt_ids"]
        assert tok.encode(p["text"]) == ids
        assert tok.decode(ids) == p["prompt_detokenized"]
        pieces = [bytes(x) if isinstance(x, list) else x.encode("utf-8") for x in p["prompt_pieces"]]
        assert [tok.token_to_piece(i) for i in ids] == pieces
        assert tok.decode(p["greedy_ids"]) == p["greedy_text"]
        assert "".join(stream(tok, p["greedy_ids"])) == p["greedy_text"]


def test_bos_stops_spaces_and_bytes(gemma4_models):
    tok = load(gemma4_models, "micro-gemma4")
    bos, eos, turn_end, tool_response = (tok.token_to_id[t] for t in ("<bos>", "<eos>", "<turn|>",
                                                                        "<|tool_response>"))
    assert (tok.bos_id, tok.eos_id) == (bos, eos) == (2, 1)
    assert tok.encode("Hi", add_special=True)[0] == bos  # always, as llama.cpp does for gemma4
    assert tok.encode("Hi", add_special=True)[1:] == tok.encode("Hi")
    assert tok.stop_ids == {eos, turn_end, tool_response}
    assert tok.token_to_piece(tok.token_to_id["\u2581"]) == b" "
    nl2 = tok.token_to_id.get("\n\n")
    if nl2 is not None:  # a newline run that is a token stays whole
        assert tok.encode("a\n\nb")[1:2] == [nl2]
    # a character outside the toy vocabulary falls back to its UTF-8 bytes as <0xNN> tokens
    ids = tok.encode("\u0416")  # 'Ж'
    assert [tok.tokens[i] for i in ids] in (["\u0416"], ["<0xD0>", "<0x96>"])
    assert tok.decode(ids) == "\u0416"
    channel = tok.token_to_id["<|channel>"]  # user-defined: matched with special parsing off too
    assert tok.encode("<|channel>", parse_special=False) == [channel]
    assert tok.encode("<|turn>", parse_special=False) != [tok.token_to_id["<|turn>"]]


def test_pre_split():
    assert split_pieces("a b\n\nc \n") == ["a\u2581b", "\n\n", "c\u2581", "\n"]
    assert split_pieces("") == []
    assert split_pieces("\r\n x") == ["\r", "\n", "\u2581x"]


def test_chat_template_matches_llama_cpp(gemma4_models):
    for stem in REF_STEMS:
        want = json.loads((GEMMA4_REFS / f"{stem}.json").read_text())["about"]["apply_template_hello"]
        assert render_chat(HELLO, "gemma4", thinking=False) == "<bos>" + want
    # fixture prompt 1 is the template's rendering of one user question
    prompt = json.loads((GEMMA4_REFS / "micro-gemma4.json").read_text())["prompts"][1]
    question = "Explain in one sentence what a mixture-of-experts model is."
    assert render_chat([{"role": "user", "content": question}], "gemma4", thinking=False) == prompt["text"]
    tok = load(gemma4_models, "micro-gemma4")
    assert tok.encode(prompt["text"])[:3] == [tok.bos_id, tok.token_to_id["<|turn>"], tok.token_to_id["user"]]


def test_chat_template_thinking_system_and_history():
    msgs = [{"role": "system", "content": "  Be brief. "}, {"role": "user", "content": "Hi\n"},
            {"role": "assistant", "content": "<|channel>thought\nsay hi<channel|>Hello!"},
            {"role": "user", "content": "Again"}]
    history = ("<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n<|turn>user\nAgain<turn|>\n")
    assert render_chat(msgs, "gemma4", thinking=False) == (
        "<bos><|turn>system\nBe brief.<turn|>\n" + history + "<|turn>model\n<|channel>thought\n<channel|>")
    assert render_chat(msgs, "gemma4", thinking=True) == (
        "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n" + history + "<|turn>model\n")
    assert render_chat(HELLO, "gemma4", thinking=True) == (
        "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\n")
    assert render_chat(HELLO, "gemma4", thinking=False, add_generation_prompt=False) == (
        "<bos><|turn>user\nHello<turn|>\n")
    with pytest.raises(ValueError, match="unknown role"):
        render_chat([{"role": "narrator", "content": "x"}], "gemma4", thinking=False)


def test_cli_tokenize_and_detokenize(gemma4_models, capsys):
    from diskformer.commands import detokenize, tokenize
    model = str(gemma4_models / "micro-gemma4.gguf")
    prompt = json.loads((GEMMA4_REFS / "micro-gemma4.json").read_text())["prompts"][1]
    assert tokenize.main([model, prompt["text"]]) == 0
    assert json.loads(capsys.readouterr().out) == {"ids": prompt["prompt_ids"]}
    assert detokenize.main([model, json.dumps(prompt["prompt_ids"])]) == 0
    assert json.loads(capsys.readouterr().out) == {"text": prompt["prompt_detokenized"]}
