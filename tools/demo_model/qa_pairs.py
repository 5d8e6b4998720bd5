"""Question -> answer pairs and reference texts for the demo corpus, and the held-out split that measures them.

Every documented name (a stdlib module, class, function or method, or a built-in) has an *answer*: the first
sentences of its docstring. The corpus gets, per name:

* reference texts, "json.dumps: Serialize obj ..." (the docstring's prose, like help()), "Help on function
  json.dumps: <answer>" and "Function json.dumps. <answer>", so a name met only in text is tied to its answer;
* chat pairs, the answer to each of the TRAIN_TEMPLATES phrasings ("What does json.dumps do?", "Explain json.dumps.",
  ...), and for built-ins also "What is a Python list?"-style phrasings.

The held-out split is fixed by sha256 of the name, so it does not depend on order or on the Python run:
(a) two phrasings, HELDOUT_TEMPLATES, are never in the corpus; they are asked about names that are;
(b) about 7 % of the names (HELDOUT_PERCENT; only names whose answer no other name shares, never the README's
    examples) get no chat pair at all, only their reference texts; they are asked with training phrasings.
"""
from __future__ import annotations

import builtins
import hashlib
import inspect
import re

CHAT_TURN = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{a}<|im_end|>\n"

TRAIN_TEMPLATES = (
    "What does {s} do?",
    "What is {s}?",
    "Explain {s}.",
    "What is {s} for?",
    "How do I use {s}?",
    "Tell me about {s}.",
    "Describe {s}.",
    "What is the purpose of {s}?",
    "Can you explain {s}?",
    "I have a question about {s}.",
)
HELDOUT_TEMPLATES = (
    "Could you tell me what {s} does?",
    "Give me a short summary of {s}.",
)
# extra phrasings for built-ins, the way people ask about them ("What is a Python list?")
BUILTIN_TEMPLATES = {
    "class": ("What is a Python {n}?", "What is the {n} type in Python?", "What is {n} in Python?"),
    "exception": ("What is {n} in Python?", "When does Python raise {n}?"),
    "function": ("What does the built-in {n} function do?", "What does {n}() do in Python?"),
    "method": ("What does {n}() do in Python?",),
}
HELDOUT_PERCENT = 7
# names the README shows: always trained on
ALWAYS_TRAINED = frozenset({"json.dumps", "os.path.join", "random", "collections.Counter", "list", "open"})
# built-ins that `site` adds (help, exit, ...) differ with how Python starts; they are left out
_SITE_TYPES = {"_Helper", "Quitter", "_Printer"}
# built-ins whose docstring is only call signatures: their description from the language reference pages
# (pydoc_data.topics, what help() shows), emphasis marks removed
TOPIC_FALLBACK = {"dict": "typesmapping"}
_EMPHASIS = re.compile(r"\*(\w[^*]*)\*")
_SIGNATURE = re.compile(r"^[\w.]+\(.*\)\s*(?:-+>\s*(.*))?$")


def name_hash(name: str, salt: str = "") -> int:
    return int(hashlib.sha256((salt + name).encode("utf-8")).hexdigest()[:12], 16)


def subject(name: str, kind: str) -> str:
    """How a question names its subject: modules as "the json module", everything else by its dotted name."""
    return f"the {name} module" if kind == "module" else name


def strip_signatures(doc: str) -> str:
    """Built-in docstrings start with call signatures ("int([x]) -> integer"); drop them, keeping a description
    that follows an arrow on the same line when it is prose ("zip(*iterables) --> Yield tuples ...")."""
    out = []
    lines = inspect.cleandoc(doc).split("\n")
    while lines and (_SIGNATURE.match(lines[0]) or (out == [] and lines[0].startswith((" ", "\t")))):
        tail = _SIGNATURE.match(lines[0])
        if tail and tail.group(1) and len(tail.group(1).split()) >= 3 and tail.group(1)[0].isupper():
            out.append(tail.group(1))
            lines.pop(0)
            break
        lines.pop(0)
    return "\n".join(out + lines).strip()


def builtin_items(topics: dict):
    """(name, kind, docstring) of the built-in classes and functions and of the public methods the built-in
    classes define themselves, from the interpreter's own __doc__ strings (the C sources' text, fixed for a given
    Python version; TOPIC_FALLBACK's pages of `topics` where a docstring is only signatures), in sorted order.
    Kinds: class, exception, function, method."""
    for name in sorted(vars(builtins)):
        obj = vars(builtins)[name]
        if name.startswith("_") or type(obj).__name__ in _SITE_TYPES:
            continue
        if isinstance(obj, type):
            kind = "exception" if issubclass(obj, BaseException) else "class"
        elif inspect.isbuiltin(obj):
            kind = "function"
        else:
            continue  # constants: None, True, Ellipsis, ...
        doc = strip_signatures(obj.__doc__ or "")
        if not doc and name in TOPIC_FALLBACK:
            doc = _EMPHASIS.sub(r"\1", topics[TOPIC_FALLBACK[name]]).split("\n\n", 1)[1]  # past the heading
        if doc:
            yield name, kind, doc
        if kind == "class":
            for attr in sorted(vars(obj)):
                method = vars(obj)[attr]
                if attr.startswith("_") or not callable(method) or not getattr(method, "__doc__", None):
                    continue
                method_doc = strip_signatures(method.__doc__)
                if method_doc:
                    yield f"{name}.{attr}", "method", method_doc


def choose_heldout_names(answers: dict) -> set:
    """About HELDOUT_PERCENT % of the names, by hash; only names whose answer is theirs alone (a shared answer
    would be learned from another name's pairs), never ALWAYS_TRAINED."""
    by_text = {}
    for name, (kind, answer) in answers.items():
        by_text.setdefault(answer, []).append(name)
    return {name for name, (kind, answer) in answers.items()
            if len(by_text[answer]) == 1 and name not in ALWAYS_TRAINED and name_hash(name) % 100 < HELDOUT_PERCENT}


def builtin_questions(name: str, kind: str) -> list:
    short = name.split(".")[-1] if kind == "method" else name
    return [t.format(n=name if kind == "method" else short) for t in BUILTIN_TEMPLATES.get(kind, ())]


def reference_texts(name: str, kind: str, paragraphs: list, answer) -> list:
    kind_word = "built-in class" if kind == "exception" else kind
    texts = [f"{name}: " + " ".join(paragraphs)]
    if answer:
        texts.append(f"Help on {kind_word} {name}: {answer}")
        texts.append(f"{kind_word.capitalize()} {name}. {answer}")
    return texts


def chat(question: str, answer: str) -> dict:
    return {"kind": "chat", "text": CHAT_TURN.format(q=question, a=answer)}


def qa_documents(entries: list) -> tuple:
    """entries: (name, kind, prose paragraphs, answer or None, is_builtin), in corpus order. Returns the corpus
    documents (reference texts and chat pairs, in entry order) and the evaluation record: every name's answer and
    the held-out questions."""
    answers = {}
    for name, kind, _, answer, _ in entries:
        if answer and name not in answers:
            answers[name] = (kind, answer)
    heldout = choose_heldout_names(answers)
    docs, done = [], set()
    for name, kind, paragraphs, answer, is_builtin in entries:
        if name in done:
            continue  # a name defined twice in a module: its first definition, as help() would show
        done.add(name)
        docs.extend({"kind": "text", "text": t} for t in reference_texts(name, kind, paragraphs, answer))
        if name not in answers or name in heldout:
            continue
        questions = [t.format(s=subject(name, kind)) for t in TRAIN_TEMPLATES]
        if is_builtin:
            questions += builtin_questions(name, kind)
        docs.extend(chat(q, answer) for q in questions)
    return docs, evaluation_record(answers, heldout)


def evaluation_record(answers: dict, heldout: set, per_split: int = 200) -> dict:
    """The held-out questions (at most per_split a split, picked by hash) with the names they ask about, and every
    name's answer (what a reply is compared with)."""
    trained = sorted((n for n in answers if n not in heldout), key=lambda n: (name_hash(n, "phrasing:"), n))
    unseen = sorted(heldout, key=lambda n: (name_hash(n, "name:"), n))
    questions = []
    for name in trained[:per_split]:
        template = HELDOUT_TEMPLATES[name_hash(name, "template:") % len(HELDOUT_TEMPLATES)]
        questions.append({"split": "phrasing", "name": name,
                          "question": template.format(s=subject(name, answers[name][0]))})
    for name in unseen[:per_split]:
        template = TRAIN_TEMPLATES[name_hash(name, "template:") % len(TRAIN_TEMPLATES)]
        questions.append({"split": "name", "name": name,
                          "question": template.format(s=subject(name, answers[name][0]))})
    return {"heldout_templates": list(HELDOUT_TEMPLATES), "heldout_names": sorted(heldout),
            "answers": {n: a for n, (k, a) in sorted(answers.items())}, "questions": questions}
