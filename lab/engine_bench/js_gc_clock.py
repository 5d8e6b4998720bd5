"""Time spent in the JavaScript engine's garbage collector (V8's, where the runtime reports it: Node's `gc`
performance entries), so that a bench figure can say which slow steps were the collector pausing the one thread that
encodes, submits and awaits the GPU's work, rather than the GPU or the engine.

In Node, Dawn's binding polls the device on every turn of the event loop while a GPU promise is pending, and each
turn leaves JS objects behind (lab/gpu_probes/wait_garbage.mjs): a major collection of what the waits built up stops
the thread for 10-30 ms at a point nobody chose."""
from pyodide.code import run_js

_OBSERVER_JS = r"""
(() => {
  const types = (typeof PerformanceObserver === 'undefined') ? [] : (PerformanceObserver.supportedEntryTypes || []);
  if (!types.includes('gc')) return undefined;  // Pyodide turns undefined into None (null into its JsNull)
  // flat [startTime, duration, kind, forced, ...]: kind as Node's perf_hooks constants (1 minor, 4 major,
  // 8 incremental, 16 weak callbacks); forced: asked for by gc() (flag 4). Entries reach the observer a task after
  // the collection, so `settle` before reading them
  const log = { times: [] };
  log.observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const d = e.detail || e;
      log.times.push(e.startTime, e.duration, d.kind, (d.flags & 4) ? 1 : 0);
    }
  });
  log.observer.observe({ entryTypes: ['gc'] });
  log.settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return log;
})()
"""

KINDS = {1: "minor", 4: "major", 8: "incremental", 16: "weak"}


class JsGcClock:
    """Observes the JS collector while open. `now()` is a point on its clock (performance.now(), ms); after
    `await settle()`, `spent(t0, t1)` sums the collections that started between two such points."""

    def __init__(self):
        self._log = None
        self._entries = []
        self.forced = 0  # collections asked for by collect()

    def __enter__(self):
        self._log = run_js(_OBSERVER_JS)
        return self

    def __exit__(self, *exc):
        if self._log is not None:
            self._log.observer.disconnect()
        return False

    def now(self) -> float:
        import js

        return float(js.performance.now())

    async def settle(self):
        """Wait a task, so that collections up to now have reached the observer; then take its entries."""
        if self._log is None:
            return
        await self._log.settle()
        flat = self._log.times.to_py()
        # a forced collection is the bench's own, between phases (collect): not a phase's
        self._entries = [(flat[i], flat[i + 1], int(flat[i + 2])) for i in range(0, len(flat), 4) if not flat[i + 3]]

    async def collect(self) -> bool:
        """A full collection now, where the runtime offers one (Node started with --expose-gc): called before a
        timed phase, so that it does not pay for the garbage the phases before it left (as JMH collects between
        iterations). Returns whether it ran."""
        import js

        if self._log is None or not hasattr(js, "gc"):
            return False
        js.gc()
        self.forced += 1
        await self._log.settle()
        return True

    def spent(self, t0: float, t1: float, over_ms: float = 1.0) -> dict:
        """Collections that started in [t0, t1): count and ms by kind, and each one longer than `over_ms` as
        [ms after t0, its ms, kind]."""
        if self._log is None:
            return {"available": False, "reason": "the JS runtime reports no garbage-collection entries"}
        inside = [e for e in self._entries if t0 <= e[0] < t1]
        by_kind = {}
        for _, ms, kind in inside:
            name = KINDS.get(kind, str(kind))
            count, total = by_kind.get(name, (0, 0.0))
            by_kind[name] = (count + 1, total + ms)
        return {"available": True, "collected_before": self.forced > 0,
                "ms": round(sum(ms for _, ms, _ in inside), 3),
                "by_kind": {k: {"count": c, "ms": round(ms, 3)} for k, (c, ms) in sorted(by_kind.items())},
                "long": [[round(start - t0, 3), round(ms, 3), KINDS.get(kind, str(kind))]
                         for start, ms, kind in inside if ms > over_ms]}
