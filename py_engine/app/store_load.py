"""The store load path: the GGUF is streamed once into a model folder (py_engine/store: OPFS in the browser,
resumable, verified by checksums) and the engine runs from that folder with the routed experts paged into a GPU
pool sized by the budget (py_engine/engine/store_decoder.py). A model already stored loads without any download.

Progress: the ingest's phases become the page's stages — 'verify' (a resumed ingest re-hashing what it has) and
'download' — each with bytes / total / rate / eta.
"""
import re

from ..store import ingest
from .errors import BadModelFile, BudgetTooSmall, budget_too_small


def folder_name(name: str) -> str:
    """A model folder for a served name or a file name (no '/': subfolders of the host's models dir flatten)."""
    safe = name.replace("/", "__").strip()
    if not safe or safe in (".", ".."):
        raise BadModelFile(f"bad model name {name!r}")
    return safe


DAMAGE_ADVICE = "(Load it again from the same source to repair it, or use Remove from disk.)"
FROM_DISK_MESSAGE = "already stored in this browser: loaded from disk, nothing downloaded"


async def ingest_into(storage, folder, src, progress, lock=None, expected_sha256=None):
    """Stream `src` into storage's `folder` (resuming a partial one); returns the completed manifest. A folder that
    already holds this source complete costs no download: the page is told so (stage 'stored')."""
    moved = []

    def on_progress(p):
        moved.append(p.done)
        progress({"stage": "verify" if p.phase == "rehash" else "download",
                  "message": "checking what is already stored" if p.phase == "rehash" else "storing the model",
                  "bytes": p.done, "total": p.total, "rate": p.rate, "eta": p.eta})

    sink = storage.sink(folder)
    try:
        if lock is None:
            manifest = await ingest(src, sink, expected_sha256=expected_sha256, progress=on_progress)
        else:
            async with lock(folder):
                manifest = await ingest(src, sink, expected_sha256=expected_sha256, progress=on_progress)
    finally:
        # OPFS allows one sync access handle per file: an interrupted ingest that kept its handles would make the
        # next Load (the resume) fail, and the engine opens the folder afresh anyway
        close = getattr(sink, "close", None)
        if close is not None:
            close()
    if not moved:
        stored_progress(progress, manifest)
    return manifest


def stored_progress(progress, manifest=None):
    size = (manifest or {}).get("source", {}).get("size")
    event = {"stage": "stored", "message": FROM_DISK_MESSAGE}
    if size:
        event.update(bytes=size, total=size)
    progress(event)


async def open_stored(storage, folder, gpu, pipelines, n_ctx, kv, budget, cpu_tier=0, upload_progress=None):
    """(header, StoreDecoder) of a complete model folder; a budget below the model's minimum raises BudgetTooSmall.
    `cpu_tier`: workers of the CPU expert tier (0: off), used when the pool cannot hold every expert;
    `upload_progress(done, total)`: told as the weights reach the GPU (StoreOptions.upload_progress)."""
    from ..engine import budget as engine_budget
    from ..engine.store_decoder import StoreDecoder
    from ..engine.store_weights import StoreNotReady, open_store

    from ..store.check import StoreDamaged, open_checked

    try:
        sink = await open_checked(storage.sink(folder), folder)  # checks header and dense now, records when read
        manifest, header = await open_store(sink)
    except (StoreNotReady, StoreDamaged) as e:
        raise BadModelFile(f"{e} {DAMAGE_ADVICE}" if isinstance(e, StoreDamaged) else f"{folder}: {e}") from None
    reader = await parallel_reader(storage, folder, manifest)
    try:
        # prefetch_depth 1: when the pool cannot hold every expert, each layer's router look-ahead guesses the next
        # layer's experts and their reads start while the current layer's demand loads (docs/engine.md)
        dec = await StoreDecoder.open_store(sink, gpu, pipelines, n_ctx=n_ctx, kv_format=kv,
                                            budget_bytes=int(budget) if budget is not None else None,
                                            prefetch_depth=1, reader=reader, cpu_tier=int(cpu_tier or 0),
                                            upload_progress=upload_progress)
    except BaseException as e:
        if reader is not None:
            reader.release()
        if isinstance(e, engine_budget.BudgetTooSmall):
            raise budget_refusal(folder, budget, str(e)) from None
        if isinstance(e, StoreDamaged):  # an expert record read while loading
            raise BadModelFile(f"{e} {DAMAGE_ADVICE}") from None
        raise
    return header, dec


def budget_refusal(folder: str, budget, engine_message: str) -> BudgetTooSmall:
    """The engine's refusal ends "give at least N B (...)": the user is told N in MB, the formula is the details."""
    need = re.search(r"give at least (\d+) B", engine_message)
    if need is None or budget is None:
        return BudgetTooSmall("GPU budget too small for this model: raise the budget in Settings", engine_message)
    return budget_too_small(folder, int(need.group(1)), int(budget), engine_message)


READER_WORKERS = 4  # OPFS reads in flight at once, one per worker with its own read-only handle


async def parallel_reader(storage, folder, manifest):
    """In the browser, a pool of reader workers on the folder's experts.bin (py_engine/store/reader_pool.py), so a
    layer's missed records are read in parallel; None elsewhere (the engine picks its own reader)."""
    try:
        from ..store.opfs import OPFSStorage
    except ImportError:  # CPython: no browser storage
        return None
    if not isinstance(storage, OPFSStorage) or not (manifest["layout"].get("experts") or None):
        return None
    from ..engine.store_weights import ReaderPoolRecordReader
    from ..store.reader_pool import ReaderPool
    pool = await ReaderPool.open(folder, n_workers=READER_WORKERS)
    return ReaderPoolRecordReader(pool, manifest)
