"""Drivers for the sans-IO parser: read a growing prefix of a file from any source that serves byte ranges.

A source is `read_range(start, end) -> bytes` returning bytes [start, end) (like Blob.slice or an HTTP Range
request for bytes=start-(end-1)). The prefix starts at `initial_size` and grows to what the parser asks for, at
least doubling each time, never beyond the file, so a header of H bytes costs O(log H) requests.
"""
import os

from .errors import GGUFError, NeedMoreBytes
from .header import GGUFHeader
from .reader import parse_header

INITIAL_PREFIX = 1 << 20


def _prefix_protocol(file_size: int, initial_size: int):
    """Generator: yields (start, end) ranges to read, receives their bytes, returns the GGUFHeader."""
    if file_size < 0:
        raise ValueError(f"file_size must be >= 0, got {file_size}")
    if initial_size < 1:
        raise ValueError(f"initial_size must be >= 1, got {initial_size}")
    buf = bytearray()
    want = min(initial_size, file_size)
    while True:
        if want > len(buf):
            start = len(buf)
            chunk = yield (start, want)
            if len(chunk) != want - start:
                raise GGUFError(f"the byte source returned {len(chunk)} bytes for range {start}..{want} of a "
                                f"{file_size}-byte file")
            buf += chunk
        try:
            return parse_header(buf, file_size)
        except NeedMoreBytes as more:
            # parse_header with a known file_size only asks for bytes inside the file, and beyond the buffer.
            assert len(buf) < more.needed <= file_size, (len(buf), more.needed, file_size)
            want = min(file_size, max(more.needed, 2 * len(buf)))


def read_header_sync(read_range, file_size: int, initial_size: int = INITIAL_PREFIX) -> GGUFHeader:
    protocol = _prefix_protocol(file_size, initial_size)
    try:
        request = next(protocol)
        while True:
            request = protocol.send(read_range(*request))
    except StopIteration as done:
        return done.value


async def read_header_async(read_range_async, file_size: int, initial_size: int = INITIAL_PREFIX) -> GGUFHeader:
    protocol = _prefix_protocol(file_size, initial_size)
    try:
        request = next(protocol)
        while True:
            request = protocol.send(await read_range_async(*request))
    except StopIteration as done:
        return done.value


def read_gguf_file(path, initial_size: int = INITIAL_PREFIX) -> GGUFHeader:
    """Parse the header of a local GGUF file (reads only the header's bytes)."""
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size

        def read_range(start: int, end: int) -> bytes:
            f.seek(start)
            return f.read(end - start)

        return read_header_sync(read_range, file_size, initial_size)
