"""Answer GET/HEAD for one file (on disk or built in memory): validators, conditional requests, one byte range.

Written out rather than borrowed from Starlette's FileResponse so every rule is ours and tested: a stable ETag
from (inode, size, mtime_ns), `If-None-Match` -> 304, `If-Range`, a single Range -> 206, anything unsatisfiable
-> 416 with `Content-Range: bytes */size`, and bodies streamed in 1 MiB chunks read in a worker thread so a
multi-GiB model never sits in memory and the event loop never blocks on disk.
"""
import os
from email.utils import formatdate

import anyio
from starlette.responses import Response, StreamingResponse

from diskformer.ranges import WHOLE, RangeNotSatisfiable, parse_range

CHUNK_BYTES = 1 << 20


class FileShrank(OSError):
    """The file got shorter while its body was being sent: the response cannot be completed honestly."""

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".map": "application/json",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".wgsl": "text/plain; charset=utf-8",
    ".py": "text/x-python; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".ts": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".tar": "application/x-tar",
    ".gz": "application/gzip",
    ".tgz": "application/gzip",
    ".bz2": "application/x-bzip2",
    ".xz": "application/x-xz",
    ".gguf": "application/octet-stream",
    ".bin": "application/octet-stream",
}


def media_type_for(name: str) -> str:
    return MEDIA_TYPES.get(os.path.splitext(name)[1].lower(), "application/octet-stream")


def file_etag(st: os.stat_result) -> str:
    """Strong ETag that changes whenever the file is replaced (inode), resized or rewritten (mtime_ns)."""
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


def http_date(seconds: float) -> str:
    return formatdate(seconds, usegmt=True)


def _etag_list_matches(header: str, etag: str) -> bool:
    """If-None-Match uses weak comparison: W/"x" matches "x"; '*' matches anything that exists."""
    if header.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in header.split(","))


def _if_range_allows(header, etag: str, last_modified: str) -> bool:
    """If-Range needs a strong match on the ETag, or the exact Last-Modified date, for the Range to apply."""
    if header is None:
        return True
    header = header.strip()
    if header.startswith('"') or header.startswith("W/"):
        return header == etag and not etag.startswith("W/")
    return header == last_modified


async def _file_chunks(path: str, start: int, length: int):
    f = await anyio.to_thread.run_sync(open, path, "rb")
    try:
        await anyio.to_thread.run_sync(f.seek, start)
        remaining = length
        while remaining > 0:
            chunk = await anyio.to_thread.run_sync(f.read, min(CHUNK_BYTES, remaining))
            if not chunk:
                # Headers already promised `length` bytes; stopping short lets the server close the connection.
                raise FileShrank(f"{os.path.basename(path)} shrank while being sent ({remaining} bytes missing); "
                                 "the connection was closed")
            remaining -= len(chunk)
            yield chunk
    finally:
        await anyio.to_thread.run_sync(f.close)


async def _memory_chunks(data: bytes, start: int, length: int):
    view = memoryview(data)
    for off in range(start, start + length, CHUNK_BYTES):
        yield bytes(view[off:min(off + CHUNK_BYTES, start + length)])


def _respond(request, size: int, etag: str, last_modified: str, media_type: str, chunks, extra_headers) -> Response:
    headers = {
        "Accept-Ranges": "bytes",
        "ETag": etag,
        "Last-Modified": last_modified,
        "Cache-Control": "no-cache",
        **extra_headers,
    }
    inm = request.headers.get("if-none-match")
    if inm is not None and _etag_list_matches(inm, etag):
        return Response(status_code=304, headers=headers)

    range_header = request.headers.get("range")
    if not _if_range_allows(request.headers.get("if-range"), etag, last_modified):
        range_header = None
    try:
        span = parse_range(range_header, size)
    except RangeNotSatisfiable as e:
        headers.update({"Content-Range": f"bytes */{size}", "Content-Type": "text/plain; charset=utf-8"})
        body = b"" if request.method == "HEAD" else f"416 range not satisfiable: {e}\n".encode()
        headers["Content-Length"] = str(len(body))
        return Response(body, status_code=416, headers=headers)

    headers["Content-Type"] = media_type
    if span is WHOLE:
        status, start, length = 200, 0, size
    else:
        status, start, length = 206, span.start, span.length
        headers["Content-Range"] = span.content_range()
    headers["Content-Length"] = str(length)
    if request.method == "HEAD" or length == 0:
        return Response(b"", status_code=status, headers=headers)
    return StreamingResponse(chunks(start, length), status_code=status, headers=headers)


def file_response(request, path: str, st: os.stat_result, extra_headers=None) -> Response:
    """Serve the regular file at `path` (already vetted by safe_paths.resolve_file), with `st` its stat."""
    return _respond(request, st.st_size, file_etag(st), http_date(st.st_mtime), media_type_for(path),
                    lambda start, length: _file_chunks(path, start, length), extra_headers or {})


def bytes_response(request, data: bytes, name: str, etag: str, modified: float, extra_headers=None) -> Response:
    """Serve an in-memory file (the engine wheel) under the same rules as a file on disk."""
    return _respond(request, len(data), etag, http_date(modified), media_type_for(name),
                    lambda start, length: _memory_chunks(data, start, length), extra_headers or {})
