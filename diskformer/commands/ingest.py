"""`diskformer ingest MODEL.gguf STORE_DIR`: stream a GGUF into a model store (the folder `run --store` takes).

The same ingest as the browser's (py_engine/store): resumable from its last checkpoint, one ingest per folder at a
time. On a store that is already complete, every checksum is verified and damaged parts are rewritten from the
GGUF (a repair), so running it again is always safe.
"""
import argparse
import asyncio
import sys
import time
from pathlib import Path

from py_engine.gguf import GGUFError
from py_engine.store import StoreError, ingest, verify
from py_engine.store.layout import DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE
from py_engine.store.local import DirectorySink, FileSource
from py_engine.store.repair import repair, summary
from .store_lock import FolderBusy, folder_lock

PROG = "diskformer ingest"
STORE_FILES = {HEADER_FILE, DENSE_FILE, EXPERTS_FILE, MANIFEST_FILE, MANIFEST_FILE + ".tmp"}


class ProgressLine:
    """A progress line on stderr, rewritten in place at most every half second (only on a terminal)."""

    def __init__(self, quiet: bool):
        self.show = not quiet and sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, p):
        now = time.monotonic()
        if not self.show or (now - self.last < 0.5 and p.done < p.total):
            return
        self.last = now
        eta = f"{p.eta:.0f} s left" if p.eta != float("inf") else ""
        sys.stderr.write(f"\r{p.phase}: {p.done / 2**20:,.0f} of {p.total / 2**20:,.0f} MiB "
                         f"({100 * p.done / max(p.total, 1):.0f} %), {p.rate / 2**20:.0f} MiB/s {eta}   ")
        sys.stderr.flush()

    def end(self):
        if self.show:
            sys.stderr.write("\n")


async def _ingest(model: Path, folder: Path, args) -> str:
    source, sink = FileSource(model), DirectorySink(folder)
    line = ProgressLine(args.quiet)
    try:
        manifest = await ingest(source, sink, expected_sha256=args.sha256, progress=line,
                                log=lambda msg: print(f"{PROG}: {msg}", file=sys.stderr))
        line.end()
        report = await verify(sink)
        if not report.ok:
            print(f"{PROG}: the store is damaged ({summary(report)}); repairing it from {model.name}",
                  file=sys.stderr)
            report = await repair(source, sink, report, log=lambda msg: print(f"{PROG}: {msg}", file=sys.stderr))
        return f"{folder}: {manifest['config']['architecture']} store of {model.name}, verified"
    finally:
        sink.close()
        source.close()


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="the GGUF file to ingest")
    ap.add_argument("store", type=Path, help="the store folder to make (or resume, or repair)")
    ap.add_argument("--sha256", default=None, help="the GGUF's expected sha256: the store is complete only if it "
                    "matches")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    if not args.model.is_file():
        print(f"{PROG}: no such file: {args.model}", file=sys.stderr)
        return 1
    if args.store.exists() and not args.store.is_dir():
        print(f"{PROG}: {args.store} is a file, not a folder", file=sys.stderr)
        return 1
    foreign = sorted(p.name for p in args.store.iterdir() if p.name not in STORE_FILES) if args.store.is_dir() else []
    if foreign:
        # a fresh ingest empties the folder: never someone's other files
        print(f"{PROG}: {args.store} holds other files ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''});"
              " give an empty or new folder for the store", file=sys.stderr)
        return 1
    try:
        with folder_lock(args.store, "ingesting into"):
            print(asyncio.run(_ingest(args.model, args.store, args)))
    except (OSError, GGUFError, StoreError, ValueError, FolderBusy) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return 0
