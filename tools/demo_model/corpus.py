"""Build the demo model's training corpus from the local Python standard library (PSF licence), deterministically.

Documents, one JSON object per line in CORPUS.jsonl ({"kind": "text"|"chat", "text": ...}):

* reference texts, one set per documented name (qa_pairs.py): "json.dumps: <the prose of its docstring>" and two
  short forms carrying its answer (the first sentences of the docstring);
* chat pairs, ChatML conversations asking about the name in many phrasings ("What does json.dumps do?", "Explain
  json.dumps.", "What is a Python list?", ...) answered with its answer; the assistant turn carries an empty
  thinking block, as Qwen3.5's template renders it with thinking off. Names of the held-out split get none;
* the language reference pages of `pydoc_data.topics` (what help() shows), as plain paragraphs.

Names are the stdlib's modules, classes, functions and methods (read with `ast`, never imported) and the
built-ins: classes, functions, exceptions and the methods of the built-in classes, whose docstrings are read from
the running interpreter's `__doc__` strings (C code, no source to parse; the text is fixed for a Python version)
and, for `dict` (whose docstring is only signatures), from its pydoc_data.topics page. Only prose is kept: code
examples, doctests, grammar blocks, headings and anything non-ASCII are dropped; each paragraph becomes one line.
With --questions it also writes the held-out questions and every name's answer, for evaluate.py --questions.

The output depends only on the stdlib's files and the interpreter (Python version recorded in the header line),
not on file-system order, hashing or time: files, items and paragraphs are visited in sorted order and the
documents are then put in a fixed order by the sha256 of their text.

    python tools/demo_model/corpus.py --out build/demo_model/corpus.jsonl --questions build/demo_model/questions.json
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import re
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qa_pairs import builtin_items, qa_documents  # noqa: E402

# Directories of the stdlib that are not documentation-like prose (tests, tools, vendored code, encodings tables)
SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "ensurepip", "distutils",
             "encodings", "lib-dynload", "__pycache__", "pydoc_data", "__phello__", "config-3.11-x86_64-linux-gnu"}
# modules that implement os.path are asked about under that name
MODULE_ALIASES = {"posixpath": "os.path"}

_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|const|exc|obj|term|ref|envvar|option|keyword|pep|rfc)"
                   r":`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``|`([^`]*)`")
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])[.!?](?=\s+[A-Z]|$)")


def clean_inline(text: str) -> str:
    """Drop reST roles and literal quotes, keep their text; collapse whitespace."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    return _SPACES.sub(" ", text).strip()


def is_prose(lines: list) -> bool:
    """A paragraph worth keeping: unindented, ASCII, no doctest/grammar, mostly letters, at least 5 words."""
    if not lines or any(ln.startswith((" ", "\t", ">>>", "...")) for ln in lines):
        return False
    text = clean_inline(" ".join(lines))
    if not text.isascii() or "::=" in text or re.fullmatch(r"[\W_]+", lines[-1]):
        return False  # non-ASCII, grammar rules, "Title\n*****" headings
    letters = sum(c.isalpha() or c == " " for c in text)
    return letters >= 0.8 * len(text) and len(text.split()) >= 3


def paragraphs(doc: str) -> list:
    """The prose paragraphs of a docstring or documentation page, each as one cleaned line; a paragraph that is
    not prose is None (so callers can tell whether the first paragraph survived)."""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        lines = [ln.rstrip() for ln in block.split("\n") if ln.strip()]
        out.append(clean_inline(" ".join(lines)) if is_prose(lines) else None)
    return out


def first_sentences(paragraph: str, limit: int = 240):
    """The leading sentences of a paragraph, as many as fit in `limit` characters (at least the first one); None
    when the paragraph introduces something that follows (ends with ':')."""
    if paragraph.endswith(":"):
        return None
    ends = [m.end() for m in _SENTENCE_END.finditer(paragraph)]
    if not ends:
        return paragraph if paragraph.endswith((".", "!", "?")) else paragraph + "."
    cut = ends[0]
    for e in ends[1:]:
        if e > limit:
            break
        cut = e
    return paragraph[:cut]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    name = ".".join(parts)
    return MODULE_ALIASES.get(name, name)


def stdlib_files(root: Path) -> list:
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if any(part in SKIP_DIRS for part in rel[:-1]) or rel[-1].startswith("_") and rel[-1] != "__init__.py":
            continue
        if any(part.startswith("_") and part != "__init__.py" for part in rel):
            continue
        files.append(path)
    return files


def documented_items(tree: ast.Module, module: str):
    """(qualified name, kind, docstring) of the module and its public classes, functions and methods."""
    doc = ast.get_docstring(tree, clean=False)
    if doc:
        yield module, "module", doc
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            name = f"{module}.{node.name}"
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield name, "class" if isinstance(node, ast.ClassDef) else "function", doc
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                        sub_doc = ast.get_docstring(sub, clean=False)
                        if sub_doc:
                            yield f"{name}.{sub.name}", "method", sub_doc


def entry(name: str, kind: str, doc: str, is_builtin: bool):
    """(name, kind, prose paragraphs, answer, is_builtin) of one documented name, or None when its docstring has no
    prose; the answer is the first sentences of its first paragraph (None when that paragraph is not prose)."""
    paras = paragraphs(doc)
    kept = [p for p in paras if p]
    if not kept:
        return None
    answer = first_sentences(paras[0]) if paras[0] else None
    return name, kind, kept, answer if answer and len(answer.split()) >= 3 else None, is_builtin


def build(stdlib: Path) -> tuple:
    """The corpus documents and the evaluation record (qa_pairs.qa_documents)."""
    topics_file = stdlib / "pydoc_data" / "topics.py"
    topics = ast.literal_eval(topics_file.read_text(encoding="utf-8").split("=", 1)[1])
    entries = []
    for name, kind, doc in builtin_items(topics):
        entries.append(entry(name, kind, doc, True))
    for path in stdlib_files(stdlib):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = module_name(path, stdlib)
        for name, kind, doc in documented_items(tree, module):
            entries.append(entry(name, kind, doc, False))
    docs, record = qa_documents([e for e in entries if e])
    for key in sorted(topics):
        kept = [p for p in paragraphs(topics[key]) if p]
        if kept:
            docs.append({"kind": "text", "text": "\n".join(kept)})
    # a fixed shuffle (by content hash): training windows run across neighbouring documents, and a name's pairs side
    # by side would let the model copy an answer from the window instead of recalling it
    order = sorted(range(len(docs)), key=lambda i: (hashlib.sha256(docs[i]["text"].encode("utf-8")).digest(), i))
    return [docs[i] for i in order], record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="corpus .jsonl to write")
    ap.add_argument("--questions", help="also write the held-out questions and every name's answer here (.json)")
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"],
                    help="the standard library folder to read (default: this Python's)")
    args = ap.parse_args(argv)
    stdlib = Path(args.stdlib)
    if not (stdlib / "pydoc_data" / "topics.py").is_file():
        print(f"corpus.py: {stdlib} does not look like a Python standard library (no pydoc_data/topics.py)",
              file=sys.stderr)
        return 1
    if sys.version_info[:3] != (3, 11, 7):
        print(f"corpus.py: note: Python {sys.version.split()[0]}; the recorded sha256s are for 3.11.7 (the built-ins'"
              " docstrings come from the running interpreter)", file=sys.stderr)
    docs, record = build(stdlib)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        header = {"kind": "header", "python": sys.version.split()[0], "licence": "PSF-2.0 (Python standard library)"}
        f.write(json.dumps(header) + "\n")
        for d in docs:
            f.write(json.dumps(d) + "\n")
    if args.questions:
        Path(args.questions).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.questions}: {len(record['questions'])} held-out questions, "
              f"{len(record['heldout_names'])} held-out names of {len(record['answers'])}", file=sys.stderr)
    n_chat = sum(d["kind"] == "chat" for d in docs)
    n_chars = sum(len(d["text"]) for d in docs)
    print(f"wrote {out}: {len(docs)} documents ({n_chat} chat), {n_chars} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
