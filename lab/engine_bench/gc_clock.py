"""Time spent in Python's cyclic garbage collector, so that a bench figure can say how much of a phase's wall clock
was the collector rather than the GPU or the engine's own work (a full collection walks every live object:
inside Pyodide, after a model is loaded, that can be tens of milliseconds at an unpredictable point)."""
import gc
import time


class GcClock:
    """Registered in gc.callbacks while open: totals of collections and their milliseconds, per generation."""

    def __init__(self):
        self.ms = 0.0
        self.collections = [0, 0, 0]
        self.full_ms = 0.0
        self._t0 = None

    def _callback(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            ms = (time.perf_counter() - self._t0) * 1e3
            self._t0 = None
            self.ms += ms
            gen = int(info.get("generation", 0))
            self.collections[gen] += 1
            if gen == 2:
                self.full_ms += ms

    def __enter__(self):
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc):
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        return False

    def snapshot(self) -> dict:
        return {"gc_ms": self.ms, "gc_full_ms": self.full_ms, "gc_collections": list(self.collections)}


def spent(before: dict, after: dict) -> dict:
    """What the collector did between two snapshots: milliseconds (all, full collections) and collections per
    generation."""
    return {"ms": round(after["gc_ms"] - before["gc_ms"], 3),
            "full_ms": round(after["gc_full_ms"] - before["gc_full_ms"], 3),
            "collections": [a - b for a, b in zip(after["gc_collections"], before["gc_collections"])]}
