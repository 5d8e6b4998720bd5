"""The OPFS backend (Pyodide in a dedicated worker only): model folders under navigator.storage's private root.

Big files (dense.bin, experts.bin, header.bin) are written through FileSystemSyncAccessHandle: synchronous, no
promise to await per write (an await costs 85-200 us from Python), files grow by writing, so the quota grows with
use. manifest.json is replaced whole through createWritable(), which commits atomically on close(): a crash
never leaves half a manifest. A write the browser refuses for space (QuotaExceededError) becomes QuotaExceeded.

Also here: `storage_report()` (persist() / estimate(): what the model needs against what the origin may use) and
`model_lock()` (Web Locks: one tab ingests a model folder at a time).
"""
import asyncio
from contextlib import asynccontextmanager

import js
from pyodide.ffi import create_once_callable, create_proxy, to_js

try:  # Pyodide >= 0.26 passes JS null as `jsnull`, not None
    from pyodide.ffi import jsnull
except ImportError:
    jsnull = None

from .errors import QuotaExceeded, StoreError

ROOT_DIR = "diskformer"


def _opts(**kw):
    return to_js(kw, dict_converter=js.Object.fromEntries)


def _js_error_name(e) -> str:
    return str(getattr(e, "name", "") or "") + " " + str(e)


def _is_not_found(e) -> bool:
    return "NotFoundError" in _js_error_name(e)


async def _root():
    top = await js.navigator.storage.getDirectory()
    return await top.getDirectoryHandle(ROOT_DIR, _opts(create=True))


class OPFSStorage:
    def sink(self, model: str) -> "OPFSSink":
        if not model or "/" in model or model in (".", ".."):
            raise ValueError(f"bad model folder name {model!r}")
        return OPFSSink(model)

    async def models(self):
        root = await _root()
        names = []
        it = root.keys()
        while True:
            nxt = await it.next()
            if nxt.done:
                break
            names.append(str(nxt.value))
        return sorted(names)

    async def remove(self, model: str):
        root = await _root()
        try:
            await root.removeEntry(model, _opts(recursive=True))
        except Exception as e:
            if not _is_not_found(e):
                raise


class OPFSSink:
    writes_block = True  # write() finishes its work before returning

    def __init__(self, model: str):
        self.model = model
        self._dir = None
        self._handles = {}
        self._opening = {}

    async def _folder(self):
        if self._dir is None:
            root = await _root()
            self._dir = await root.getDirectoryHandle(self.model, _opts(create=True))
        return self._dir

    async def _handle(self, file: str, create: bool):
        h = self._handles.get(file)
        if h is not None:
            return h
        # Writes of one unit run concurrently: the first one opens the handle, the others wait for it (a second
        # createSyncAccessHandle on the same file would fail: the handle is exclusive).
        opening = self._opening.get(file)
        if opening is None:
            opening = self._opening[file] = asyncio.ensure_future(self._open_handle(file, create))
        try:
            return await opening
        finally:
            self._opening.pop(file, None)

    async def _open_handle(self, file: str, create: bool):
        d = await self._folder()
        fh = await d.getFileHandle(file, _opts(create=create))
        h = await fh.createSyncAccessHandle()
        self._handles[file] = h
        return h

    async def write(self, file: str, offset: int, data):
        h = await self._handle(file, True)
        try:
            n = h.write(to_js(memoryview(data)), _opts(at=offset))
        except Exception as e:
            if "QuotaExceeded" in _js_error_name(e):
                raise QuotaExceeded(f"the browser refused to grow {self.model}/{file}: {e}") from None
            raise
        if n != len(data):
            raise QuotaExceeded(f"the browser wrote {n} of {len(data)} bytes to {self.model}/{file}")

    async def read(self, file: str, offset: int, n: int) -> bytes:
        h = self._handles.get(file)
        if h is not None:  # being written here: read through the same (exclusive) handle
            buf = js.Uint8Array.new(n)
            got = h.read(buf, _opts(at=offset))
            return buf.subarray(0, got).to_bytes()
        # Otherwise through a File snapshot, which takes no lock (verify and a reader pool may run meanwhile).
        d = await self._folder()
        try:
            fh = await d.getFileHandle(file)
        except Exception as e:
            if _is_not_found(e):
                raise FileNotFoundError(f"{self.model}/{file} does not exist") from None
            raise
        f = await fh.getFile()
        return (await f.slice(offset, offset + n).arrayBuffer()).to_bytes()

    async def flush(self):
        for h in self._handles.values():
            h.flush()

    async def put(self, file: str, data: bytes):
        d = await self._folder()
        fh = await d.getFileHandle(file, _opts(create=True))
        w = await fh.createWritable()
        try:
            await w.write(to_js(memoryview(data)))
            await w.close()
        except Exception as e:
            await w.abort()
            if "QuotaExceeded" in _js_error_name(e):
                raise QuotaExceeded(f"the browser refused to write {self.model}/{file}: {e}") from None
            raise

    async def get(self, file: str):
        d = await self._folder()
        try:
            fh = await d.getFileHandle(file)
        except Exception as e:
            if _is_not_found(e):
                return None
            raise
        f = await fh.getFile()
        return (await f.arrayBuffer()).to_bytes()

    async def files(self) -> dict:
        d = await self._folder()
        out = {}
        it = d.entries()
        while True:
            nxt = await it.next()
            if nxt.done:
                break
            name, handle = nxt.value
            name = str(name)
            if name in self._handles:
                out[name] = int(self._handles[name].getSize())
            elif str(handle.kind) == "file":
                out[name] = int((await handle.getFile()).size)
        return out

    def close(self):
        """Release the sync handles (they lock their files: readers cannot open them meanwhile)."""
        for h in self._handles.values():
            h.flush()
            h.close()
        self._handles.clear()

    async def clear(self):
        self.close()
        root = await _root()
        try:
            await root.removeEntry(self.model, _opts(recursive=True))
        except Exception as e:
            if not _is_not_found(e):
                raise
        self._dir = None


async def storage_report(needed_bytes: int, ask_persist: bool = True) -> dict:
    """What the model needs against what this origin may store.

    persist() exists only on a page (not in workers): there it is asked for first; in a worker only persisted() is
    read, and the page should ask. persisted False means the browser may evict the store under storage pressure
    (headless Chromium always says False); `fits` compares the need with the quota left.
    """
    st = js.navigator.storage
    can_ask = ask_persist and hasattr(st, "persist")
    persisted = bool(await (st.persist() if can_ask else st.persisted()))
    est = await st.estimate()
    quota, usage = int(est.quota or 0), int(est.usage or 0)
    return {"needed": int(needed_bytes), "quota": quota, "usage": usage, "available": quota - usage,
            "persisted": persisted, "persist_asked": can_ask, "fits": needed_bytes <= quota - usage}


class ModelLocked(StoreError):
    """Another tab (or worker) holds the model's lock: it is downloading or resuming this model."""


@asynccontextmanager
async def model_lock(model: str):
    """Hold the Web Lock `diskformer-store:<model>` for the block, or raise ModelLocked at once if taken."""
    loop = asyncio.get_event_loop()
    got = loop.create_future()
    release = {}

    def executor(resolve, reject):
        release["resolve"] = resolve

    held = js.Promise.new(create_once_callable(executor))

    def on_lock(lock):
        taken = lock is not None and lock is not jsnull
        if not got.done():
            got.set_result(taken)
        return held if taken else None

    cb = create_proxy(on_lock)
    done = js.navigator.locks.request(f"diskformer-store:{model}", _opts(ifAvailable=True), cb)
    try:
        if not await got:
            raise ModelLocked(f"model {model!r} is being downloaded in another tab; wait for it or close that tab")
        yield
    finally:
        if "resolve" in release:
            release["resolve"]()
        try:
            await done
        finally:
            cb.destroy()


async def ingest_model(source, model: str, storage: "OPFSStorage | None" = None, **kw) -> dict:
    """The page's one call: hold the model's lock, refuse early when the quota cannot hold what is still to be
    written, ingest (resuming when possible), and release the file handles. kw goes to ingest()."""
    from .errors import StoreQuotaError
    from .ingest import ingest, read_source_header
    from .layout import StoreLayout

    storage = storage or OPFSStorage()
    async with model_lock(model):
        sink = storage.sink(model)
        try:
            header = await read_source_header(source)
            lay = StoreLayout(header)
            need = lay.header_size + lay.dense_size + (
                lay.experts.n_layers * lay.experts.n_experts * lay.experts.record_size if lay.experts else 0)
            have = sum((await sink.files()).values())
            report = await storage_report(max(0, need - have), ask_persist=False)
            if report["quota"] and not report["fits"]:
                raise StoreQuotaError(
                    f"not enough storage for {model}: it needs {need / 2**30:.2f} GiB ({report['needed'] / 2**30:.2f}"
                    f" GiB more), and this site may use only {report['available'] / 2**30:.2f} GiB more. Remove "
                    "other models or allow persistent storage.")
            return await ingest(source, sink, **kw)
        finally:
            sink.close()
