"""Where the bench's model store lies: a folder (Node, the host's disk mounted into Pyodide) or, in a browser tab,
an OPFS folder named "opfs:FOLDER" (ingested there by the tab's bench worker, lab/browser_bench/bench_worker.js).

`open_store(store)` gives (sink, reader): the reader is the one the chat page uses in a tab (a pool of reader
workers, py_engine/app/store_load.parallel_reader), None elsewhere (the engine picks its own: Node's fs)."""
from pathlib import Path

OPFS_PREFIX = "opfs:"


def is_opfs(store: str) -> bool:
    return str(store).startswith(OPFS_PREFIX)


async def open_store(store: str):
    """(sink, reader or None) of the store `store`; release the reader (reader.release()) after the decoder."""
    if is_opfs(store):
        from py_engine.app.store_load import parallel_reader
        from py_engine.engine.store_weights import open_store as read_manifest
        from py_engine.store.opfs import OPFSStorage

        storage, folder = OPFSStorage(), store[len(OPFS_PREFIX):]
        sink = storage.sink(folder)
        manifest, _ = await read_manifest(sink)
        return sink, await parallel_reader(storage, folder, manifest)
    from py_engine.store.local import DirectorySink

    return DirectorySink(Path(store)), None
