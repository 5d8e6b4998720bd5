"""The direct load path: a GGUF read by byte ranges (HTTP Range from the host or any URL, or slices of a picked File)
into the worker's in-memory file system, then opened by the GPU decoder like a local file.

This is the path until the engine loads from the OPFS model store (py_engine/store) and pages experts from it: it
needs the whole file in wasm memory for the duration of the upload (the copy is deleted once the weights are on
the GPU), so it suits the fixture and small models, not a 20 GB one.

The header is read first (a few ranges, py_engine.gguf.read_header_async), so a wrong file, an unsupported
architecture or a model above the GPU budget is refused before the bulk transfer starts.
"""
import os
import tempfile

from ..gguf import GGUFError
from ..gguf.sources import read_header_async
from .errors import BadModelFile
from .progress import ByteMeter

CHUNK = 8 << 20
MEM_DIR = os.path.join(tempfile.gettempdir(), "diskformer-direct")


def open_source(source: dict, base_url: str = None):
    """The byte source of a `load` request's {kind, name | url | file}: served and url go through HTTP Range."""
    from ..store.sources import BlobSource, HttpSource  # Pyodide only

    kind = source.get("kind")
    if kind == "served":
        from urllib.parse import quote

        import js
        name = source.get("name") or ""
        if not name or ".." in name.split("/"):
            raise BadModelFile(f"bad served model name {name!r}")
        return HttpSource.open(js.URL.new("/models/" + quote(name, safe="/"), base_url or js.location.href).href)
    if kind == "url":
        url = source.get("url") or ""
        if not (url.startswith("http://") or url.startswith("https://") or url.startswith("/")):
            raise BadModelFile(f"not an http(s) URL: {url!r}")
        return HttpSource.open(url)
    if kind == "file":
        f = source.get("file")
        if f is None or not hasattr(f, "slice"):
            raise BadModelFile("the 'file' source carries no File object")
        return _ready(BlobSource(f))
    raise BadModelFile(f"unknown model source kind {kind!r} (served, url, file, path)")


async def _ready(value):
    return value


def source_name(source: dict, src) -> str:
    if source.get("kind") == "served":
        return source["name"]
    return src.identity().get("name") or "model.gguf"


async def read_header(src):
    """The GGUFHeader of a byte source; a non-GGUF or damaged file raises BadModelFile."""
    async def read_range(start, end):
        return await src.read(start, end - start)

    try:
        return await read_header_async(read_range, src.size)
    except GGUFError as e:
        # what the file holds (its first bytes, a field) is for the details; the user reads what to do
        raise BadModelFile("not a usable GGUF file: choose a .gguf model file, or another model from the list",
                           str(e)) from None


async def fetch_to_file(src, path: str, progress, chunk: int = CHUNK) -> int:
    """Copy the whole source into `path`, reporting {stage: 'download', bytes, total, rate, eta} per chunk."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    meter = ByteMeter(src.size)
    done = 0
    try:
        with open(path, "wb") as f:
            while done < src.size:
                n = min(chunk, src.size - done)
                data = await src.read(done, n)
                if len(data) != n:
                    raise BadModelFile(f"short read: {len(data)} of {n} bytes at offset {done}")
                f.write(data)
                done += n
                progress(dict(stage="download", message="reading the model", **meter.fields(done)))
    except BaseException:
        if os.path.exists(path):
            os.unlink(path)
        raise
    return done


def mem_path(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.rsplit("/", 1)[-1]) or "model.gguf"
    return os.path.join(MEM_DIR, safe)
