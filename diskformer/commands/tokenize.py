"""`diskformer tokenize MODEL.gguf TEXT [--no-special]`: print the token ids of TEXT as {"ids": [...]}.

Special tokens in TEXT (<|im_start|>, ...) become single ids unless --no-special; no BOS is added (like
llama-server's /tokenize with add_special false).
"""
import argparse
import json
import sys

from py_engine.gguf import GGUFError, read_gguf_file
from py_engine.tokenizer import Tokenizer


def load_tokenizer(path: str) -> Tokenizer:
    return Tokenizer.from_gguf_metadata(read_gguf_file(path).metadata)


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="diskformer tokenize", description="Print the token ids of a text as JSON.")
    ap.add_argument("model", help="GGUF model file (its tokenizer is used)")
    ap.add_argument("text", help="text to tokenize ('-' reads standard input)")
    ap.add_argument("--no-special", action="store_true",
                    help="treat control tokens such as <|im_start|> as plain text")
    args = ap.parse_args(argv)
    if args.text == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as e:
            print(f"diskformer tokenize: standard input is not UTF-8 text (byte {e.start} is "
                  f"0x{e.object[e.start]:02x})", file=sys.stderr)
            return 1
    else:
        text = args.text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
            print("diskformer tokenize: the text is not valid UTF-8", file=sys.stderr)
            return 1
    try:
        tok = load_tokenizer(args.model)
    except (OSError, GGUFError, ValueError) as e:
        print(f"diskformer tokenize: {args.model}: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"ids": tok.encode(text, parse_special=not args.no_special)}))
    return 0
