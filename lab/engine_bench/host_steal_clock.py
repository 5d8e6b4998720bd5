"""CPU time the machine's hypervisor took from this host's CPUs (Linux's `steal` in /proc/stat), so that a bench
figure can say when its host-side times were slowed by work outside this machine.

On a virtual machine the physical CPUs under the vCPUs may also run other guests' work. Then every host-side step of
the engine (Python, the FFI, the WebGPU calls, Dawn's submit) slows alike, by up to ~2x, for seconds at a time
(docs/results/2026-12-06-h100-host-and-lead-ops.json: the decode's fast run lost 0.01 s to steal, its slow ones 0.3-2.4 s). Read
through Node's `fs` (Pyodide sees no /proc of its own); `available` is False elsewhere (a browser, not Linux)."""
from pyodide.code import run_js

# /proc/stat counts in USER_HZ ticks, which Linux fixes at 100 a second for user space (x86, arm64)
TICKS_PER_S = 100

_READER_JS = r"""
(() => {
  const fs = (typeof process !== 'undefined' && process.getBuiltinModule) ? process.getBuiltinModule('fs') : null;
  // undefined, not null: Pyodide turns undefined into None (null into its JsNull)
  if (fs === null) return undefined;
  // one read: [steal ticks of all CPUs, the number of CPUs], or undefined where /proc/stat cannot be read
  return () => {
    let text;
    try { text = fs.readFileSync('/proc/stat', 'utf8'); } catch (e) { return undefined; }
    let steal = null, cpus = 0;
    for (const line of text.split('\n')) {
      const f = line.trim().split(/\s+/);
      if (f[0] === 'cpu' && f.length > 8) steal = Number(f[8]);  // user nice system idle iowait irq softirq steal
      else if (/^cpu\d+$/.test(f[0])) cpus++;
    }
    return steal === null ? undefined : [steal, cpus];
  };
})()
"""


class HostStealClock:
    """`now()` reads the host CPUs' steal counter (None where it cannot); `spent(a, b)` is the steal between two
    reads. The counter moves in ticks of 10 ms a CPU: it tells about a whole bench run (seconds), not a phase."""

    def __init__(self):
        self._read = run_js(_READER_JS)

    def now(self):
        if self._read is None:
            return None
        got = self._read()
        return None if got is None else got.to_py()

    def spent(self, a, b) -> dict:
        if a is None or b is None:
            return {"available": False, "reason": "no /proc/stat here (not Linux, or not Node)"}
        return {"available": True, "steal_ms": (b[0] - a[0]) * 1e3 / TICKS_PER_S, "cpus": b[1]}
