"""The demo model's topic measure: is a reply about the name it was asked about?

A reply and every name's corpus answer (qa_pairs: the first sentences of its docstring) are compared as bags of
lower-case words ([a-z0-9]+ runs) by token F1 (2 * common words / (reply words + answer words), counting repeats
as SQuAD does). The reply's topic is the answer with the highest F1; the reply is ON TOPIC when that best answer
is the asked name's own answer (a tie with other answers counts; names whose answers are the same text share a
topic) and that F1 is above 0. An empty or wordless reply is off topic.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+")


def bag(text: str) -> Counter:
    return Counter(_WORD.findall(text.lower()))


@dataclass
class Verdict:
    on_topic: bool
    f1_asked: float  # F1 against the asked name's answer
    f1_best: float  # F1 against the closest answer
    closest: str  # a name whose answer is closest (the asked name when it is among them)


class TopicIndex:
    """Every name's answer, with an inverted index from word to the answers that hold it, so scoring a reply
    against thousands of answers touches only those that share a word with it."""

    def __init__(self, answers: dict):
        self.answers = answers
        texts = sorted(set(answers.values()))
        self.text_id = {t: i for i, t in enumerate(texts)}
        self.bags = [bag(t) for t in texts]
        self.sizes = [sum(b.values()) for b in self.bags]
        self.names_of = defaultdict(list)
        for name in sorted(answers):
            self.names_of[self.text_id[answers[name]]].append(name)
        self.holders = defaultdict(list)  # word -> [(answer id, count)]
        for i, b in enumerate(self.bags):
            for word, count in b.items():
                self.holders[word].append((i, count))

    def f1_all(self, reply: str) -> dict:
        """answer id -> F1 with the reply, for the answers sharing at least one word with it."""
        words = bag(reply)
        n_reply = sum(words.values())
        common = defaultdict(int)
        for word, count in words.items():
            for i, held in self.holders.get(word, ()):
                common[i] += min(count, held)
        return {i: 2 * c / (n_reply + self.sizes[i]) for i, c in common.items()}

    def judge(self, reply: str, name: str) -> Verdict:
        scores = self.f1_all(reply)
        asked = self.text_id[self.answers[name]]
        f1_asked = scores.get(asked, 0.0)
        if not scores:
            return Verdict(False, 0.0, 0.0, "")
        best = max(scores.values())
        on_topic = f1_asked > 0 and f1_asked == best
        closest = name if on_topic else self.names_of[min(i for i, s in scores.items() if s == best)][0]
        return Verdict(on_topic, f1_asked, best, closest)


def topic_shares(chat, record: dict, limit: int = 0) -> dict:
    """Ask the record's held-out questions (the first `limit` of each split, or all) through `chat.reply`; per
    split: counts, the on-topic share, the mean F1 with the asked name's answer, and every question's result."""
    index = TopicIndex(record["answers"])
    results = {}
    for question in record["questions"]:
        split = results.setdefault(question["split"], {"asked": 0, "on_topic": 0, "f1_sum": 0.0, "items": []})
        if limit and split["asked"] >= limit:
            continue
        reply = chat.reply(question["question"])
        verdict = index.judge(reply, question["name"])
        split["asked"] += 1
        split["on_topic"] += verdict.on_topic
        split["f1_sum"] += verdict.f1_asked
        split["items"].append({**question, "reply": reply, "on_topic": verdict.on_topic,
                               "f1": round(verdict.f1_asked, 3), "closest": verdict.closest})
    for split in results.values():
        split["share"] = split["on_topic"] / split["asked"] if split["asked"] else 0.0
        split["mean_f1"] = split.pop("f1_sum") / split["asked"] if split["asked"] else 0.0
    return results
