"""Learn the demo model's byte-level BPE on the corpus and encode the corpus into token ids.

Vocabulary layout, like Qwen's and like ../shared/tools/make_tiny.py: the 256 GPT-2 byte tokens in Qwen's id order,
then one token per learned merge, then `<|endoftext|> <|im_start|> <|im_end|>` (CONTROL) and `<think> </think>`
(USER_DEFINED) as the last ids.

Words are cut with the engine's llama.cpp-exact `qwen35` pre-tokenizer (py_engine.tokenizer.pretokenize), after the
special tokens are cut out, so merges never cross a pre-token boundary and llama.cpp tokenizes with the exported
vocabulary exactly as here. Ties between equally frequent pairs go to the smaller pair (deterministic). The corpus
is then encoded with the engine's Tokenizer built from the learned vocabulary: the ids the model trains on are the
ids llama.cpp and the engine produce at inference.

    python tools/demo_model/bpe_train.py --corpus build/demo_model/corpus.jsonl --merges 3000 --out build/demo_model
writes OUT/tokenizer.json (tokens, token_types, merges, special ids) and OUT/tokens.npy (uint16 ids, documents
separated by <|endoftext|>).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from py_engine.tokenizer import SpecialIds, Tokenizer  # noqa: E402
from py_engine.tokenizer.byte_map import BYTE_TO_CHAR, text_to_symbols  # noqa: E402
from py_engine.tokenizer.pretokenize import rules_for, split_words  # noqa: E402

# gguf.TokenType values (NORMAL 1, CONTROL 3, USER_DEFINED 4), kept literal so this module does not need gguf
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4
SPECIALS = [("<|endoftext|>", CONTROL), ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL),
            ("<think>", USER_DEFINED), ("</think>", USER_DEFINED)]
_SPECIAL_RE = re.compile("|".join(re.escape(t) for t, _ in SPECIALS))


def byte_tokens() -> list:
    """The 256 byte tokens in Qwen's id order: the printable bytes first ('!'..'~', '¡'..'¬', '®'..'ÿ'), then the
    other bytes in byte order (GPT-2's bytes_to_unicode order)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    rest = [b for b in range(256) if b not in set(printable)]
    return [BYTE_TO_CHAR[b] for b in printable + rest]


def read_documents(corpus: Path) -> list:
    docs = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] != "header":
                docs.append(d["text"])
    return docs


def word_counts(docs) -> Counter:
    """Pre-tokenized words (as byte-level symbol strings) and how often they occur, special tokens cut out."""
    rules = rules_for("qwen35")
    counts = Counter()
    for doc in docs:
        for fragment in _SPECIAL_RE.split(doc):
            if fragment:
                counts.update(split_words(fragment, rules))
    return Counter({text_to_symbols(w): c for w, c in counts.items()})


def learn_merges(counts: Counter, n_merges: int) -> list:
    """Classic BPE with incremental pair counts: each step merges the most frequent adjacent pair."""
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pair_count = Counter()
    where = defaultdict(set)  # pair -> indices of words that contain it
    for i, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_count[pair] += freq[i]
            where[pair].add(i)
    merges = []
    while len(merges) < n_merges and pair_count:
        best = min(pair_count.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        a, b = best
        for i in sorted(where.pop(best, ())):
            w, f = words[i], freq[i]
            for pair in zip(w, w[1:]):  # remove the word's old pairs
                pair_count[pair] -= f
                if pair_count[pair] <= 0:
                    del pair_count[pair]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for pair in zip(out, out[1:]):
                pair_count[pair] += f
                where[pair].add(i)
        pair_count.pop(best, None)
    return merges


def build_vocab(merges) -> tuple:
    tokens = byte_tokens()
    types = [NORMAL] * len(tokens)
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
            types.append(NORMAL)
    special_ids = {}
    for text, kind in SPECIALS:
        special_ids[text] = len(tokens)
        tokens.append(text)
        types.append(kind)
    return tokens, types, special_ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="corpus .jsonl from corpus.py")
    ap.add_argument("--merges", type=int, default=3000)
    ap.add_argument("--out", required=True, help="folder for tokenizer.json and tokens.npy")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    docs = read_documents(Path(args.corpus))
    merges = learn_merges(word_counts(docs), args.merges)
    tokens, types, special_ids = build_vocab(merges)
    merge_texts = [f"{a} {b}" for a, b in merges]
    (out / "tokenizer.json").write_text(json.dumps(
        {"tokens": tokens, "token_types": types, "merges": merge_texts, "special_ids": special_ids},
        ensure_ascii=False), encoding="utf-8")

    special = SpecialIds(bos=special_ids["<|endoftext|>"], eos=special_ids["<|im_end|>"],
                         pad=special_ids["<|endoftext|>"])
    tok = Tokenizer(tokens, merge_texts, pre="qwen35", token_types=types, special=special)
    ids = []
    for doc in docs:
        ids.extend(tok.encode(doc, parse_special=True))
        ids.append(special_ids["<|endoftext|>"])
    if len(tokens) > 65535:
        raise SystemExit("vocabulary too large for uint16 ids")
    np.save(out / "tokens.npy", np.asarray(ids, dtype=np.uint16))
    n_chars = sum(len(d) for d in docs)
    print(f"{len(merges)} merges, vocabulary {len(tokens)}; corpus {n_chars} characters -> {len(ids)} tokens "
          f"({n_chars / len(ids):.2f} chars/token)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
