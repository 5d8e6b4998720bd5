"""The demo model's training corpus (tools/demo_model/corpus.py, qa_pairs.py) and its topic measure (topic.py):
question -> answer pairs in many phrasings, the built-ins, and a held-out split that never leaks into training."""
import re
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "demo_model"))

import corpus  # noqa: E402
import qa_pairs  # noqa: E402
from topic import TopicIndex  # noqa: E402

_USER_TURN = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>")
_ANSWER = re.compile(r"</think>\n\n(.*?)<\|im_end\|>", re.S)


@pytest.fixture(scope="module")
def built():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    docs, record = corpus.build(stdlib)
    chats = [d["text"] for d in docs if d["kind"] == "chat"]
    asked = {_USER_TURN.search(t).group(1): _ANSWER.search(t).group(1) for t in chats}
    texts = [d["text"] for d in docs if d["kind"] == "text"]
    return docs, record, asked, texts


def test_every_answered_name_is_asked_in_every_training_phrasing(built):
    docs, record, asked, _ = built
    trained = [n for n in record["answers"] if n not in set(record["heldout_names"])]
    assert len(trained) > 4000
    for name in trained[::97]:
        kind = "module" if f"What is the {name} module for?" in asked else None
        subject = qa_pairs.subject(name, kind)
        for template in qa_pairs.TRAIN_TEMPLATES:
            assert asked.get(template.format(s=subject)) == record["answers"][name], (name, template)


def test_builtins_are_in_the_corpus_with_python_phrasings(built):
    _, record, asked, texts = built
    assert asked["What is a Python list?"] == "Built-in mutable sequence."
    assert asked["What is a Python dict?"].startswith("A mapping object maps hashable values to arbitrary objects.")
    assert asked["What does the built-in len function do?"] == "Return the number of items in a container."
    assert asked["What does str.split() do in Python?"].startswith("Return a list of the substrings in the string")
    assert asked["What is int?"].startswith("Convert a number or string to an integer")  # signature lines dropped
    assert "open: Open file and return a stream." in "\n".join(texts)
    assert "exit" not in record["answers"] and "help" not in record["answers"]  # site's additions are left out


def test_heldout_phrasings_and_names_never_reach_training(built):
    _, record, asked, texts = built
    for question in asked:
        assert not question.startswith(("Could you tell me what", "Give me a short summary of")), question
    heldout = set(record["heldout_names"])
    answers = record["answers"]
    assert 0.05 * len(answers) < len(heldout) < 0.10 * len(answers)
    assert not heldout & qa_pairs.ALWAYS_TRAINED
    joined = "\n".join(texts)
    asked_answers = set(asked.values())
    for name in sorted(heldout):
        assert answers[name] not in asked_answers, name  # no chat pair answers it, under any name
        assert f"\n{name}: " in f"\n{joined}", name  # its reference text is there


def test_evaluation_questions_are_the_heldout_split(built):
    _, record, asked, _ = built
    heldout = set(record["heldout_names"])
    by_split = {"phrasing": [], "name": []}
    for q in record["questions"]:
        by_split[q["split"]].append(q)
    assert len(by_split["phrasing"]) == len(by_split["name"]) == 200
    for q in by_split["phrasing"]:
        assert q["name"] not in heldout and q["question"] not in asked
        assert any(q["question"] == t.format(s=qa_pairs.subject(q["name"], "module")) or
                   q["question"] == t.format(s=q["name"]) for t in qa_pairs.HELDOUT_TEMPLATES), q
    for q in by_split["name"]:
        assert q["name"] in heldout and q["question"] not in asked
    assert len({q["name"] for q in record["questions"]}) == 400


def test_corpus_is_deterministic_and_shuffled(built):
    docs, record, _, _ = built
    again, record_again = corpus.build(Path(sysconfig.get_paths()["stdlib"]))
    assert again == docs and record_again == record
    # neighbours are unrelated: a name's pairs (same answer) are not side by side
    answers = [_ANSWER.search(d["text"]).group(1) for d in docs[:2000] if d["kind"] == "chat"]
    assert len(answers) > 1000 and sum(a == b for a, b in zip(answers, answers[1:])) < 5


def test_builtin_signatures_are_stripped():
    doc = "int([x]) -> integer\nint(x, base=10) -> integer\n\nConvert a number or string to an integer."
    assert qa_pairs.strip_signatures(doc) == "Convert a number or string to an integer."
    doc = "zip(*iterables, strict=False) --> Yield tuples until an input is exhausted.\n\n   >>> list(zip('ab'))"
    assert qa_pairs.strip_signatures(doc).startswith("Yield tuples until an input is exhausted.\n")
    doc = "dict() -> new empty dictionary\ndict(mapping) -> new dictionary from a mapping's\n    (key, value) pairs"
    assert qa_pairs.strip_signatures(doc) == ""
    assert qa_pairs.strip_signatures("Return the number of items in a container.") == \
        "Return the number of items in a container."


def test_topic_measure_picks_the_closest_answer():
    index = TopicIndex({"len": "Return the number of items in a container.",
                        "json.dumps": "Serialize obj to a JSON formatted str.",
                        "json.encoder.dumps": "Serialize obj to a JSON formatted str.",
                        "list": "Built-in mutable sequence."})
    right = index.judge("Serialize obj to a JSON formatted string.", "json.dumps")
    assert right.on_topic and right.f1_asked == pytest.approx(2 * 6 / (7 + 7))
    assert index.judge("Serialize obj as JSON.", "json.encoder.dumps").on_topic  # same answer text: same topic
    wrong = index.judge("An object-oriented interface to .netrc files.", "list")
    assert not wrong.on_topic and wrong.f1_asked == 0.0
    other = index.judge("Return the number of items in the sequence.", "list")
    assert not other.on_topic and other.closest == "len" and other.f1_best > 0.5
    assert not index.judge("", "len").on_topic
