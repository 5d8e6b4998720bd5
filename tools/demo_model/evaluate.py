"""Measure the demo model: greedy replies to fixed chat prompts and the share of their words that occur in the
training text (the bar: at least 90 %); and, with --questions, the topic measure (topic.py) on the held-out questions
that corpus.py writes: (a) held-out phrasings about trained names, (b) held-out names asked with trained phrasings.

Replies come from the numpy reference model (diskformer.reference) run on the exported GGUF, with the engine's
tokenizer and ChatML template (thinking off) built from the GGUF's own metadata, so the whole shipped path is
measured, not the training code. Words are the [A-Za-z]+ runs of a reply, compared case-insensitively with the
words of the training corpus (special tokens left out of it).

    python tools/demo_model/evaluate.py demo/diskformer-demo-qwen35moe-q8_0.gguf --words demo/training-words.txt
    python tools/demo_model/evaluate.py demo/diskformer-demo-qwen35moe-q8_0.gguf --questions build/demo_model/questions.json
    # the word list itself, from the corpus:
    python tools/demo_model/evaluate.py --corpus build/demo_model/corpus.jsonl --write-words demo/training-words.txt
    # export check: the torch checkpoint against the reference on the F32 twin (needs torch)
    python tools/demo_model/evaluate.py --check-torch build/demo_model/model.pt --twin build/demo_model/f32.gguf
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PROMPTS = (
    "What does json.dumps do?",
    "What does os.path.join do?",
    "What is the random module for?",
    "What is collections.Counter?",
    "How do I read a file in Python?",  # not a training question: free text from the model
    "What is a Python list?",
)
SPLITS = (("phrasing", "(a) held-out phrasings, trained names"), ("name", "(b) held-out names, trained phrasings"))
MAX_NEW_TOKENS = 64
BAR = 0.90
_WORD = re.compile(r"[A-Za-z]+")
_SPECIAL = re.compile(r"<\|endoftext\|>|<\|im_start\|>|<\|im_end\|>|</?think>")


def words_of(text: str) -> list:
    return _WORD.findall(text)


def corpus_words(corpus: Path) -> list:
    """Sorted distinct lower-case words of the corpus documents, special tokens removed."""
    found = set()
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["kind"] != "header":
                found.update(w.lower() for w in words_of(_SPECIAL.sub(" ", doc["text"])))
    return sorted(found)


def load_words(path: Path) -> frozenset:
    return frozenset(w for w in path.read_text(encoding="ascii").split() if w)


def real_word_fraction(texts, vocabulary) -> tuple:
    """(fraction of words found, number of words, the words not found) over all texts together."""
    words = [w for t in texts for w in words_of(t)]
    missing = [w for w in words if w.lower() not in vocabulary]
    if not words:
        return 0.0, 0, missing
    return 1.0 - len(missing) / len(words), len(words), missing


class DemoChat:
    """Greedy chat replies from a GGUF through the numpy reference model."""

    def __init__(self, gguf_path):
        from diskformer.reference.model import ReferenceModel
        from py_engine.gguf import read_gguf_file
        from py_engine.tokenizer import Tokenizer, render_chat

        self.model = ReferenceModel(str(gguf_path))
        self.tokenizer = Tokenizer.from_gguf_metadata(read_gguf_file(str(gguf_path)).metadata)
        self.render_chat = render_chat
        self.arch = self.model.config.arch

    def reply(self, question: str, max_new_tokens: int = MAX_NEW_TOKENS) -> str:
        prompt = self.render_chat([{"role": "user", "content": question}], self.arch, thinking=False)
        self.model.reset()
        logits = self.model.prefill(self.tokenizer.encode(prompt))
        out = []
        for _ in range(max_new_tokens):
            token = int(np.argmax(logits))
            if self.tokenizer.is_stop(token):
                break
            out.append(token)
            logits = self.model.step(token)
        return self.tokenizer.decode(out)


def check_torch(checkpoint: Path, twin: Path, lengths=(1, 9, 64, 200)) -> float:
    """Largest |torch - reference| / max|reference| over random id sequences, on the F32 twin of the export."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from export_gguf import load_model

    from diskformer.reference.model import ReferenceModel

    model = load_model(checkpoint)
    ref = ReferenceModel(str(twin))
    rng = np.random.default_rng(0)
    worst = 0.0
    for n in lengths:
        ids = rng.integers(0, model.cfg.n_vocab, n)
        with torch.no_grad():
            ours = model(torch.from_numpy(ids)[None])[0][0].double().numpy()
        ref.reset()
        theirs = ref.prefill(ids, all_logits=True)
        err = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
        print(f"{n:4d} tokens: max relative logit difference {err:.2e}, argmax equal "
              f"{(ours.argmax(-1) == theirs.argmax(-1)).mean():.3f}", file=sys.stderr)
        worst = max(worst, err)
    return worst


def report_topics(chat, args) -> int:
    from topic import topic_shares

    record = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    results = topic_shares(chat, record, args.limit)
    for split, title in SPLITS:
        if split not in results:
            continue
        r = results[split]
        print(f"{title}: {r['on_topic']} of {r['asked']} on topic ({r['share']:.1%}), "
              f"mean F1 with the asked answer {r['mean_f1']:.2f}")
        for item in r["items"][:args.examples]:
            mark = "on topic" if item["on_topic"] else f"off topic, closest: {item['closest']}"
            print(f"  Q: {item['question']}\n  A: {item['reply']}\n     [{mark}; F1 {item['f1']}]")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the GGUF to evaluate")
    ap.add_argument("--words", help="training word list (one word a line)")
    ap.add_argument("--corpus", help="corpus .jsonl (to take the words from, or with --write-words)")
    ap.add_argument("--write-words", help="write the corpus's word list here and stop")
    ap.add_argument("--questions", help="held-out questions (corpus.py --questions): measure the topic shares")
    ap.add_argument("--limit", type=int, default=0, help="ask at most this many questions of each split (0: all)")
    ap.add_argument("--examples", type=int, default=6, help="replies to show per split")
    ap.add_argument("--json", help="also write the results here as JSON")
    ap.add_argument("--check-torch", metavar="CHECKPOINT", help="compare a torch checkpoint with --twin")
    ap.add_argument("--twin", help="F32 GGUF exported from --check-torch's checkpoint")
    args = ap.parse_args(argv)

    if args.write_words:
        if not args.corpus:
            ap.error("--write-words needs --corpus")
        words = corpus_words(Path(args.corpus))
        Path(args.write_words).write_text("\n".join(words) + "\n", encoding="ascii")
        print(f"wrote {args.write_words}: {len(words)} words", file=sys.stderr)
        return 0
    if args.check_torch:
        if not args.twin:
            ap.error("--check-torch needs --twin")
        worst = check_torch(Path(args.check_torch), Path(args.twin))
        print(f"worst relative difference {worst:.2e} ({'ok' if worst < 1e-3 else 'TOO LARGE'})")
        return 0 if worst < 1e-3 else 1
    if not args.model or not (args.words or args.corpus or args.questions):
        ap.error("give MODEL and --words, --corpus or --questions")
    if args.questions:
        return report_topics(DemoChat(args.model), args)

    vocabulary = load_words(Path(args.words)) if args.words else frozenset(corpus_words(Path(args.corpus)))
    chat = DemoChat(args.model)
    replies = [chat.reply(q) for q in PROMPTS]
    fraction, n_words, missing = real_word_fraction(replies, vocabulary)
    for q, r in zip(PROMPTS, replies):
        print(f"Q: {q}\nA: {r}\n")
    print(f"real words: {fraction:.1%} of {n_words} (bar {BAR:.0%}); not in the training text: {sorted(set(missing))}")
    if args.json:
        Path(args.json).write_text(json.dumps({"prompts": PROMPTS, "replies": replies, "fraction": fraction,
                                               "words": n_words, "missing": missing}, indent=1), encoding="utf-8")
    return 0 if fraction >= BAR else 1


if __name__ == "__main__":
    sys.exit(main())
