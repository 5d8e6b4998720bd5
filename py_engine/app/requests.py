"""The chat app's typed requests, merged into py_engine.boot.REQUESTS (the worker hands every request to
boot.handle_request). A handler marked `streaming` also gets `progress`, a callable posting progress events for the
request's id (py_engine/app/progress.py).

    models                                   -> {served: [{name, size, builtin}], stored: [...], loaded, store_error}
    load     {source, options}               progress {stage, message, bytes, total, rate, eta} -> load info
    generate {messages, thinking, sampling, max_tokens}
                                             progress {kind: 'delta', channel, text} -> {text, thinking,
                                             stop_reason, message, token_ids, stats}
    stop                                     -> {stopped}
    stats                                    -> the session's figures
    reset                                    -> {reset: true} (new chat; the model stays)
    remove   {model}                         -> {removed}: a stored model (OPFS), unloaded first if loaded
"""
from .session import Session


def browser_store():
    """The OPFS model store when this is a dedicated worker that has one (sync access handles), else None."""
    try:
        import js
    except ImportError:
        return None
    storage = getattr(getattr(js, "navigator", None), "storage", None)
    if storage is None or not hasattr(storage, "getDirectory") or not hasattr(js, "FileSystemSyncAccessHandle"):
        return None
    from ..store.opfs import OPFSStorage
    return OPFSStorage()


def browser_store_lock(folder):
    from ..store.opfs import model_lock
    return model_lock(folder)


SESSION = Session(storage=browser_store, store_lock=browser_store_lock)


def streaming(fn):
    fn.wants_progress = True
    return fn


async def models() -> dict:
    served, stored, store_error = await _served_models(), [], None
    try:
        from ..store.catalogue import list_models

        storage = SESSION.storage()
        if storage is None:
            store_error = "no OPFS model store in this browser"
        else:
            stored = await list_models(storage)
    except Exception as e:  # OPFS refused (a private window, storage blocked): the page lists served models only
        store_error = f"{type(e).__name__}: {e}"
    return {"served": served, "stored": stored, "store_error": store_error,
            "loaded": SESSION.model.name if SESSION.model is not None else None}


async def _served_models() -> list:
    import js
    from pyodide.ffi import to_js

    response = await js.fetch("/api/models", to_js({"cache": "no-store"}, dict_converter=js.Object.fromEntries))
    if not response.ok:
        raise RuntimeError(f"GET /api/models failed: HTTP {response.status}")
    listed = (await response.json()).to_py()
    return [{"name": m["name"], "size": m["size"], "builtin": bool(m.get("builtin"))} for m in listed]


@streaming
async def load(source=None, options=None, *, progress) -> dict:
    if not source:
        raise ValueError("load needs a source: {kind: 'served' | 'url' | 'file', name | url | file}")
    return await SESSION.load(source, options, progress)


@streaming
async def generate(messages=None, thinking=False, sampling=None, max_tokens=None, *, progress) -> dict:
    return await SESSION.generate(messages, thinking, sampling, max_tokens, progress)


async def stop() -> dict:
    return SESSION.stop()


async def stats() -> dict:
    return SESSION.stats()


async def reset() -> dict:
    return SESSION.reset()


async def remove(model=None) -> dict:
    if not model:
        raise ValueError("remove needs {model: NAME}")
    from ..store.catalogue import remove as remove_stored

    storage = SESSION.storage()
    if storage is None:
        raise ValueError("there is no model store in this browser")
    if model not in await storage.models():
        raise ValueError(f"no stored model named {model!r}")
    unloaded = SESSION.model is not None and SESSION.model.name == model
    if unloaded:
        SESSION.unload()
    await remove_stored(storage, model)
    return {"removed": model, "unloaded": unloaded}


APP_REQUESTS = {"models": models, "load": load, "generate": generate, "stop": stop, "stats": stats,
                "reset": reset, "remove": remove}
