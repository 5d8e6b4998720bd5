"""Build the demo model's training corpus from the local Python standard library (PSF licence), deterministically.

Two kinds of documents, written one JSON object per line to CORPUS.jsonl ({"kind": "text"|"chat", "text": ...}):

* text: plain English paragraphs from the docstrings of the stdlib's modules, classes and functions (read with
  `ast`, never imported) and from `pydoc_data.topics` (the language reference pages that `help()` shows). Code
  examples, doctests, grammar blocks, headings and anything non-ASCII are dropped; each paragraph becomes one line.
* chat: ChatML conversations, so the chat format works: "What does json.dumps do?" -> the first sentences of
  `json.dumps`'s docstring, "What is the json module for?" -> the first sentences of its module docstring.
  The assistant turn carries an empty thinking block, as Qwen3.5's template renders it with thinking off.

The output depends only on the stdlib's files (Python version recorded in the output's header line), not on
file-system order, hashing or time: files, items and paragraphs are visited in sorted order.

    python tools/demo_model/corpus.py --out build/demo_model/corpus.jsonl
"""
from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import sysconfig
from pathlib import Path

# Directories of the stdlib that are not documentation-like prose (tests, tools, vendored code, encodings tables)
SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "ensurepip", "distutils",
             "encodings", "lib-dynload", "__pycache__", "pydoc_data", "__phello__", "config-3.11-x86_64-linux-gnu"}
# modules that implement os.path are asked about under that name
MODULE_ALIASES = {"posixpath": "os.path"}

CHAT_TURN = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{a}<|im_end|>\n"

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


def questions(name: str, kind: str) -> list:
    if kind == "module":
        return [f"What is the {name} module for?", f"Tell me about the {name} module."]
    if kind == "class":
        return [f"What is {name}?", f"What does the {name} class do?"]
    return [f"What does {name} do?", f"Explain {name}."]


def build(stdlib: Path) -> list:
    docs = []
    for path in stdlib_files(stdlib):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = module_name(path, stdlib)
        for name, kind, doc in documented_items(tree, module):
            paras = paragraphs(doc)
            kept = [p for p in paras if p]
            if not kept:
                continue
            docs.append({"kind": "text", "text": "\n".join(kept)})
            answer = first_sentences(paras[0]) if paras[0] else None
            if answer and len(answer.split()) >= 3:
                for q in questions(name, kind):
                    docs.append({"kind": "chat", "text": CHAT_TURN.format(q=q, a=answer)})
    topics_file = stdlib / "pydoc_data" / "topics.py"
    topics = ast.literal_eval(topics_file.read_text(encoding="utf-8").split("=", 1)[1])
    for key in sorted(topics):
        kept = [p for p in paragraphs(topics[key]) if p]
        if kept:
            docs.append({"kind": "text", "text": "\n".join(kept)})
    return docs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="corpus .jsonl to write")
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"],
                    help="the standard library folder to read (default: this Python's)")
    args = ap.parse_args(argv)
    stdlib = Path(args.stdlib)
    if not (stdlib / "pydoc_data" / "topics.py").is_file():
        print(f"corpus.py: {stdlib} does not look like a Python standard library (no pydoc_data/topics.py)",
              file=sys.stderr)
        return 1
    docs = build(stdlib)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        header = {"kind": "header", "python": sys.version.split()[0], "licence": "PSF-2.0 (Python standard library)"}
        f.write(json.dumps(header) + "\n")
        for d in docs:
            f.write(json.dumps(d) + "\n")
    n_chat = sum(d["kind"] == "chat" for d in docs)
    n_chars = sum(len(d["text"]) for d in docs)
    print(f"wrote {out}: {len(docs)} documents ({n_chat} chat), {n_chars} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
