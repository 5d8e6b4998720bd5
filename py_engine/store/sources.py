"""Ingest sources in the browser (Pyodide): a URL read with HTTP Range requests, or a picked File / Blob.

Both give `size`, `identity()` and `await read(offset, n)`. The HTTP source learns size and ETag from its first
ranged request (no HEAD: some hosts answer HEAD differently from GET) and checks on every response that the ETag
is unchanged and the server honoured the range, so a file replaced on the server mid-download is an error, not a
silent mix of two files.
"""
import js
from pyodide.ffi import to_js

from .errors import SourceChanged, StoreError


def _opts(d):
    return to_js(d, dict_converter=js.Object.fromEntries)


class HttpSource:
    def __init__(self, url: str):
        self.url = url
        self.size = None
        self.etag = None

    @classmethod
    async def open(cls, url: str) -> "HttpSource":
        src = cls(url)
        resp = await src._get(0, 1)
        cr = str(resp.headers.get("Content-Range") or "")
        if resp.status != 206 or "/" not in cr or cr.endswith("/*"):
            raise StoreError(f"{url} does not support HTTP Range requests (status {resp.status}, "
                             f"Content-Range {cr!r}); the model cannot be streamed from it")
        src.size = int(cr.rsplit("/", 1)[1])
        src.etag = str(resp.headers.get("ETag") or "") or None
        await resp.arrayBuffer()
        return src

    async def _get(self, offset: int, n: int):
        headers = {"Range": f"bytes={offset}-{offset + n - 1}"}
        try:
            resp = await js.fetch(self.url, _opts({"headers": _opts(headers), "cache": "no-store"}))
        except Exception as e:
            raise StoreError(f"cannot reach {self.url}: {e}") from None
        if resp.status not in (200, 206):
            raise StoreError(f"GET {self.url} bytes {offset}..{offset + n - 1}: HTTP {resp.status} "
                             f"{resp.statusText}")
        return resp

    def identity(self) -> dict:
        return {"name": self.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0], "url": self.url,
                "size": self.size, "etag": self.etag}

    async def read(self, offset: int, n: int) -> bytes:
        resp = await self._get(offset, n)
        etag = str(resp.headers.get("ETag") or "") or None
        if self.etag and etag and etag != self.etag:
            raise SourceChanged(f"{self.url} changed during the download (ETag {self.etag} -> {etag})")
        if resp.status != 206 and not (offset == 0 and n == self.size):
            raise StoreError(f"{self.url} ignored the Range request for bytes {offset}..{offset + n - 1}")
        data = (await resp.arrayBuffer()).to_bytes()
        if len(data) != n:
            raise StoreError(f"{self.url} returned {len(data)} bytes for a {n}-byte range at {offset}")
        return data


class BlobSource:
    """A File the user picked (or any Blob). Its identity is name, size and lastModified."""

    def __init__(self, blob, name=None):
        self.blob = blob
        self.size = int(blob.size)
        self.name = name or str(getattr(blob, "name", "") or "blob")
        last = getattr(blob, "lastModified", None)
        self.etag = f"{self.size:x}-{int(last):x}" if last is not None else None

    def identity(self) -> dict:
        return {"name": self.name, "url": None, "size": self.size, "etag": self.etag}

    async def read(self, offset: int, n: int) -> bytes:
        buf = await self.blob.slice(offset, offset + n).arrayBuffer()
        return buf.to_bytes()
