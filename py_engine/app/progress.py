"""Progress events of a request, as the page receives them: {type: 'progress', id, stage, ...fields}.

`ByteMeter` turns "bytes done so far" into the bytes / total / rate / eta fields of a load's progress bar (rate over
the whole transfer so far: steady enough to show, no smoothing state to get wrong). `js_poster(request_id)` posts
events from Python straight to the page (the worker's global postMessage), tagged with the request's id so the
page's EngineClient routes them to the request's progress callback.
"""
import time


class ByteMeter:
    def __init__(self, total: int, clock=time.perf_counter):
        self.total = int(total)
        self.clock = clock
        self.t0 = clock()

    def fields(self, done: int) -> dict:
        elapsed = self.clock() - self.t0
        rate = done / elapsed if elapsed > 0 and done > 0 else None
        eta = (self.total - done) / rate if rate and self.total else None
        return {"bytes": int(done), "total": self.total, "rate": rate, "eta": eta}


def js_poster(request_id):
    """A callable event(dict) posting {type: 'progress', id: request_id, elapsedMs, **event} to the page."""
    import js
    from pyodide.ffi import to_js

    t0 = time.perf_counter()

    def post(event: dict):
        msg = {"type": "progress", "id": request_id, "elapsedMs": round((time.perf_counter() - t0) * 1e3)}
        msg.update(event)
        js.postMessage(to_js(msg, dict_converter=js.Object.fromEntries))

    return post


def no_progress(_event: dict):
    pass
