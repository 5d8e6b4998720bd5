"""`diskformer detokenize MODEL.gguf IDS`: print the text of token ids as {"text": "..."}.

IDS is a JSON list ("[9707, 1879]") or ids separated by commas and/or spaces ("9707,1879", "9707 1879").
Control tokens are rendered as their text and invalid UTF-8 becomes U+FFFD, like llama-server's /detokenize.
"""
import argparse
import json
import re
import sys

from py_engine.gguf import GGUFError
from .tokenize import load_tokenizer


def parse_ids(spec: str) -> list:
    spec = spec.strip()
    if spec.startswith("["):
        try:
            ids = json.loads(spec)
        except RecursionError:
            raise ValueError("the JSON nests too deeply to be a list of ids") from None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValueError("the JSON must be a list of integers")
        return ids
    parts = [p for p in re.split(r"[,\s]+", spec) if p]
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"not a list of integer ids: {spec!r}") from None


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="diskformer detokenize", description="Print the text of token ids as JSON.")
    ap.add_argument("model", help="GGUF model file (its tokenizer is used)")
    ap.add_argument("ids", nargs="+", help="token ids: a JSON list, or separated by commas and/or spaces")
    args = ap.parse_args(argv)
    try:
        ids = parse_ids(" ".join(args.ids))
    except ValueError as e:
        print(f"diskformer detokenize: {e}", file=sys.stderr)
        return 2
    try:
        tok = load_tokenizer(args.model)
        text = tok.decode(ids)
    except (OSError, GGUFError, ValueError) as e:
        print(f"diskformer detokenize: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"text": text}, ensure_ascii=False))
    return 0
