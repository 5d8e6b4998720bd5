"""Expert records read in parallel under Node (Pyodide in Node, `diskformer run --store`, the bench).

Python file reads in Pyodide go through its synchronous NODEFS mount: one record at a time, the event loop
blocked meanwhile. This reader asks Node's own `fs.promises` instead: every record of a batch is read at once on
libuv's thread pool (UV_THREADPOOL_SIZE threads, set by the runner), into a JS Uint8Array that the staging ring
copies straight into mapped GPU memory (no trip through Python memory), with one await per batch.
The store folder is mounted at the same absolute path on the host (diskformer/node/run_engine.mjs --mount), so
the path the engine sees is the host's.
"""
from .layout import EXPERTS_FILE

_reader_fn = None


def in_node() -> bool:
    """True when this Pyodide runs in Node (its fs is at hand), False in a browser or CPython."""
    try:
        import js
    except ImportError:
        return False
    proc = getattr(js, "process", None)
    return proc is not None and callable(getattr(proc, "getBuiltinModule", None))


def _js():
    global _reader_fn
    if _reader_fn is None:
        from ..gpu.jsutil import load_program
        _reader_fn = load_program("node_reader.js")
    return _reader_fn


class NodeRecordReader:
    """`read_record` / `read_records` of experts.bin through Node's fs, many reads in flight."""

    def __init__(self, path: str, manifest):
        ex = manifest["layout"]["experts"]
        if not ex:
            raise ValueError("the store holds no routed experts")
        self.path = path
        self.n_experts = ex["n_experts"]
        self.record_size = ex["record_size"]
        self.reads = 0
        self._fh = None

    @classmethod
    async def open(cls, folder, manifest):
        reader = cls(f"{folder}/{EXPERTS_FILE}", manifest)
        reader._fh = await _js().open(reader.path)
        return reader

    def offset(self, layer: int, expert: int) -> int:
        return (layer * self.n_experts + expert) * self.record_size

    async def read_records(self, layer: int, experts) -> list:
        from pyodide.ffi import to_js
        offsets = to_js([self.offset(layer, int(e)) for e in experts])
        try:
            got = await _js().readMany(self._fh, offsets, self.record_size)
        except Exception as exc:  # a JS error: say which file
            raise OSError(f"{self.path}: {exc}; the store is damaged or was removed, ingest it again") from None
        self.reads += len(experts)
        return list(got)

    async def read_record(self, layer: int, expert: int):
        return (await self.read_records(layer, [expert]))[0]

    async def measure(self, offsets, in_flight: int) -> float:
        """Seconds to read the records at `offsets` in waves of `in_flight` parallel reads (the bench's limits)."""
        import time
        from pyodide.ffi import to_js
        t0 = time.perf_counter()
        for i in range(0, len(offsets), in_flight):
            await _js().readMany(self._fh, to_js(offsets[i:i + in_flight]), self.record_size)
        return time.perf_counter() - t0

    def release(self):
        if self._fh is not None:
            self._fh.close()
            self._fh = None


async def record_reader_for(sink, manifest):
    """The parallel Node reader for a store folder on a local disk when running in Node, else None (the caller
    keeps its sink-based reader)."""
    folder = getattr(sink, "folder", None)
    if folder is None or not in_node():
        return None
    return await NodeRecordReader.open(str(folder), manifest)
