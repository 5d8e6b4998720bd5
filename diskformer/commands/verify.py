"""`diskformer verify STORE_DIR`: recompute every checksum of a model store.

Exit 0 when the store is sound; 1 with what is damaged (header.bin, dense planes, expert records) and what to do.
"""
import argparse
import asyncio
import json
import sys
from pathlib import Path

from py_engine.store import verify
from py_engine.store.local import DirectorySink
from py_engine.store.repair import summary

PROG = "diskformer verify"


async def _verify(folder: Path):
    sink = DirectorySink(folder)
    try:
        return await verify(sink)
    finally:
        sink.close()


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path, help="the store folder (made by `diskformer ingest`)")
    ap.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = ap.parse_args(argv)
    if not args.store.is_dir():
        print(f"{PROG}: {args.store} is not a folder", file=sys.stderr)
        return 1
    try:
        report = asyncio.run(_verify(args.store))
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.to_dict()))
    if report.ok:
        if not args.json:
            print(f"{args.store}: sound (every checksum matches)")
        return 0
    if report.problem and not report.complete:
        print(f"{PROG}: {args.store}: {report.problem}", file=sys.stderr)
    else:
        print(f"{PROG}: {args.store} is damaged: {summary(report)}. Run `diskformer ingest MODEL.gguf "
              f"{args.store}` with the GGUF it was made from to repair it, or remove the folder.", file=sys.stderr)
    return 1
