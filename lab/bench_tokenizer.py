"""Tokenizer speed: encode ~100 kB of English (docstrings of the Python standard library) in CPython.

    python -m lab.bench_tokenizer [MODEL.gguf]

Default model: the fixture with the real Qwen3 vocabulary (fixtures/models/qwen3vocab-qwen3moe.gguf, made by
../shared/fixtures/make_models.py). Prints the tokenizer build time, the first (cold: empty word cache) and a
second (warm) encode of the text, in seconds and MB/s. Target: cold encode under 1 s.
"""
import argparse
import importlib
import inspect
import sys
import time
from pathlib import Path

from py_engine.gguf import read_gguf_file
from py_engine.tokenizer import Tokenizer

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen3vocab-qwen3moe.gguf"
SOURCE_MODULES = ("argparse", "collections", "subprocess", "threading", "asyncio.events", "json", "pathlib",
                  "typing", "logging", "unittest.case", "email.message", "http.client", "dataclasses",
                  "functools", "itertools", "os", "re", "socket", "tarfile", "zipfile", "inspect", "pickle",
                  "decimal", "datetime", "statistics", "textwrap", "shutil", "tempfile", "contextlib", "enum")


def english_text(target_bytes: int = 100_000) -> str:
    """Docstrings of standard-library modules and their members, in a fixed order, cut to `target_bytes`."""
    parts, size = [], 0
    for name in SOURCE_MODULES:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module)]
        for _, member in sorted(vars(module).items()):
            if (inspect.isclass(member) or inspect.isfunction(member)) and member.__module__ == module.__name__:
                docs.append(inspect.getdoc(member))
        for doc in docs:
            if doc:
                parts.append(doc)
                size += len(doc.encode("utf-8")) + 2
                if size >= target_bytes:
                    return "\n\n".join(parts).encode("utf-8")[:target_bytes].decode("utf-8", "ignore")
    raise RuntimeError(f"the standard-library docstrings gave only {size} bytes, fewer than {target_bytes}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench_tokenizer", description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL), help="GGUF file whose tokenizer to use")
    ap.add_argument("--bytes", type=int, default=100_000, help="size of the English text (default 100000)")
    args = ap.parse_args(argv)
    if not Path(args.model).exists():
        print(f"bench_tokenizer: {args.model} not found (make the fixtures with "
              f"../shared/fixtures/make_models.py fixtures/models)", file=sys.stderr)
        return 2
    text = english_text(args.bytes)
    mb = len(text.encode("utf-8")) / 1e6
    t0 = time.perf_counter()
    tok = Tokenizer.from_gguf_metadata(read_gguf_file(args.model).metadata)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    ids = tok.encode(text)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    tok.encode(text)
    t_warm = time.perf_counter() - t0
    print(f"model {Path(args.model).name}: vocab {tok.vocab_size}, pre-tokenizer {tok.pre}, build {t_build:.3f} s")
    print(f"text {mb * 1e6:.0f} bytes -> {len(ids)} tokens")
    print(f"encode cold {t_cold:.3f} s ({mb / t_cold:.2f} MB/s), warm {t_warm:.3f} s ({mb / t_warm:.2f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
