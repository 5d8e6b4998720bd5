"""Storage backends and sources outside the browser: in memory and in a directory, plus a local-file source.

Every backend offers the same small interface, which the ingest engine, `verify` and the catalogue use:

    storage.sink(model) -> sink            one model folder
    await storage.models() -> [name]       folders present
    await storage.remove(model)

    await sink.write(file, offset, data)   grows the file (with zeros) as needed
    await sink.read(file, offset, n)       fewer bytes only at the end of the file
    await sink.flush()                     make every write so far durable
    await sink.put(file, data)             replace a small file whole (the manifest)
    await sink.get(file) -> bytes | None
    await sink.files() -> {file: size}
    await sink.clear()                     delete the folder's files

A source is `size`, `identity()` -> {"name", "url", "size", "etag"} and `await read(offset, n)` -> exactly n bytes.
The OPFS backend and the HTTP / File sources live in opfs.py and sources.py.
"""
import os
from pathlib import Path

from .errors import QuotaExceeded


class MemoryStorage:
    """Model folders as dicts of bytearrays. `quota` (bytes over all folders) makes writes past it raise
    QuotaExceeded, as a browser's storage quota does."""

    def __init__(self, quota=None):
        self.quota = quota
        self.folders = {}

    def used(self) -> int:
        return sum(len(b) for files in self.folders.values() for b in files.values())

    def sink(self, model: str) -> "MemorySink":
        return MemorySink(self, model)

    async def models(self):
        return sorted(m for m, files in self.folders.items() if files)

    async def remove(self, model: str):
        self.folders.pop(model, None)


class MemorySink:
    writes_block = True  # write() finishes its work before returning

    def __init__(self, storage: MemoryStorage, model: str):
        self.storage, self.model = storage, model

    def _files(self) -> dict:
        return self.storage.folders.setdefault(self.model, {})

    def _grow(self, buf: bytearray, end: int):
        if end > len(buf):
            q = self.storage.quota
            if q is not None and self.storage.used() + end - len(buf) > q:
                raise QuotaExceeded(f"storage quota of {q} bytes exceeded")
            buf.extend(bytes(end - len(buf)))

    async def write(self, file: str, offset: int, data):
        buf = self._files().setdefault(file, bytearray())
        self._grow(buf, offset + len(data))
        buf[offset:offset + len(data)] = data

    async def read(self, file: str, offset: int, n: int) -> bytes:
        buf = self._files().get(file)
        if buf is None:
            raise FileNotFoundError(f"{self.model}/{file} does not exist")
        return bytes(buf[offset:offset + n])

    async def flush(self):
        pass

    async def put(self, file: str, data: bytes):
        files = self._files()
        old = files.get(file, bytearray())
        q = self.storage.quota
        if q is not None and self.storage.used() - len(old) + len(data) > q:
            raise QuotaExceeded(f"storage quota of {q} bytes exceeded")
        files[file] = bytearray(data)

    async def get(self, file: str):
        buf = self._files().get(file)
        return None if buf is None else bytes(buf)

    async def files(self) -> dict:
        return {name: len(b) for name, b in self._files().items()}

    async def clear(self):
        self.storage.folders.pop(self.model, None)


class DirectoryStorage:
    """Model folders under a directory on disk (CPython tools, the Node runner)."""

    def __init__(self, root):
        self.root = Path(root)

    def sink(self, model: str) -> "DirectorySink":
        if not model or "/" in model or "\\" in model or model in (".", ".."):
            raise ValueError(f"bad model folder name {model!r}")
        return DirectorySink(self.root / model)

    async def models(self):
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    async def remove(self, model: str):
        await self.sink(model).clear()
        d = self.root / model
        if d.is_dir():
            d.rmdir()


class DirectorySink:
    writes_block = True  # write() finishes its work before returning

    def __init__(self, folder: Path):
        self.folder = folder
        self._open = {}

    def _handle(self, file: str):
        f = self._open.get(file)
        if f is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / file
            f = open(path, "r+b" if path.exists() else "w+b")
            self._open[file] = f
        return f

    async def write(self, file: str, offset: int, data):
        f = self._handle(file)
        f.seek(offset)
        try:
            f.write(data)
        except OSError as e:
            if e.errno in (28, 122):  # ENOSPC, EDQUOT
                raise QuotaExceeded(f"no space left for {self.folder / file}: {e}") from e
            raise

    async def read(self, file: str, offset: int, n: int) -> bytes:
        if not (self.folder / file).exists():
            raise FileNotFoundError(f"{self.folder / file} does not exist")
        f = self._handle(file)
        f.seek(offset)
        return f.read(n)

    async def flush(self):
        for f in self._open.values():
            f.flush()
            os.fsync(f.fileno())

    async def put(self, file: str, data: bytes):
        # Write a temporary file and rename it over the old one, so a crash never leaves half a manifest.
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / (file + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.folder / file)

    async def get(self, file: str):
        path = self.folder / file
        return path.read_bytes() if path.exists() else None

    async def files(self) -> dict:
        for f in self._open.values():
            f.flush()
        if not self.folder.is_dir():
            return {}
        return {p.name: p.stat().st_size for p in self.folder.iterdir() if p.is_file()}

    def close(self):
        for f in self._open.values():
            f.close()
        self._open.clear()

    async def clear(self):
        self.close()
        if self.folder.is_dir():
            for p in self.folder.iterdir():
                p.unlink()


class FileSource:
    """A local file as an ingest source. The ETag stand-in is size + modification time, which changes when the
    file is rewritten in place."""

    def __init__(self, path):
        self.path = Path(path)
        st = self.path.stat()
        self.size = st.st_size
        self._etag = f"{st.st_size:x}-{st.st_mtime_ns:x}"
        self._f = open(self.path, "rb")

    def identity(self) -> dict:
        return {"name": self.path.name, "url": None, "size": self.size, "etag": self._etag}

    async def read(self, offset: int, n: int) -> bytes:
        self._f.seek(offset)
        return self._f.read(n)

    def close(self):
        self._f.close()


class BytesSource:
    """Bytes held in memory as an ingest source (a small file already fetched, tests)."""

    def __init__(self, data, name="bytes", etag=None):
        self.data, self.name, self.etag = bytes(data), name, etag
        self.size = len(self.data)

    def identity(self) -> dict:
        return {"name": self.name, "url": None, "size": self.size, "etag": self.etag}

    async def read(self, offset: int, n: int) -> bytes:
        return self.data[offset:offset + n]
