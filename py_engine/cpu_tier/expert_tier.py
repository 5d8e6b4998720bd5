"""The CPU expert tier from Python: a thin wrapper over web/cpu_tier/pool.js, through Pyodide's js FFI.

A missed expert that will not be reused soon can be computed where its record lies, on the CPU, instead of being
uploaded into a GPU slot (llama.cpp's experts-on-CPU offload; Fiddler, Kamahori et al. 2024): its weights are MBs,
its input and output a few KB. The pool's workers run a WebAssembly SIMD kernel of the expert FFN (gate, up, SwiGLU
or GEGLU, down) with the GPU kernels' math (Q8_0 and Q4_0 products on inputs quantised as ggml does; F32 as is) on
records held in shared memory, and return the router-weighted sum per token for the GPU to add.

    tier = await CpuExpertTier.open(manifest["layout"]["experts"], slots=16)
    tier.record(3).assign(record_bytes)        # or have the store read the record straight into that view
    out = tier.compute(x, slots=[3, 5], weights=[0.7, 0.3])   # a JS Float32Array, n_tokens * n_embd
    tier.close()

`compute` blocks the calling thread until the workers are done (no promise to await: an await from Python costs
more than a small request); it needs a thread that may block, such as the engine's worker or Node's main thread.
`compute_async` awaits instead. Pyodide only.
"""
import js
from pyodide.ffi import to_js

from ..gpu.jsutil import load_program

POOL_PATH = "/cpu_tier/pool.js"  # where the host serves web/cpu_tier/pool.js
_import_module = None


def _js_object(d: dict):
    return to_js(d, dict_converter=js.Object.fromEntries)


def _import(url: str):
    global _import_module
    if _import_module is None:
        _import_module = load_program("import_module.js")
    return _import_module(url)


class CpuExpertTier:
    """A pool of CPU workers computing routed experts from records held in shared memory."""

    def __init__(self, pool):
        self.pool = pool
        self.n_embd = int(pool.nEmbd)
        self.n_ff = int(pool.nFf)
        self.record_size = int(pool.recordSize)
        self.slots = int(pool.slots)

    @classmethod
    async def open(cls, layout: dict, *, workers: int | None = None, slots: int = 8, tokens: int = 1,
                   jobs: int | None = None, url: str | None = None, activation: str = "swiglu") -> "CpuExpertTier":
        """A pool for records of `layout` (the store manifest's expert layout): `slots` records held, requests of
        up to `tokens` rows of x and `jobs` experts (default: slots); `workers` defaults to the cores less one;
        `activation`: "swiglu" (silu(gate)·up) or "geglu" (gelu(gate)·up, tanh form)."""
        url = url or js.URL.new(POOL_PATH, js.location.href).href
        module = await _import(url)
        options = {"layout": layout, "slots": slots, "tokens": tokens, "jobs": jobs or slots, "activation": activation}
        if workers:
            options["workers"] = workers
        return cls(await module.createExpertPool(_js_object(options)))

    def record(self, slot: int):
        """The record slot's bytes in shared memory (a JS Uint8Array view): fill it with `.assign(bytes)` or read
        the record into it."""
        return self.pool.record(slot)

    def _request(self, x, slots, tokens, weights):
        if not hasattr(x, "subarray"):  # Python floats: into a JS Float32Array
            view = memoryview(x).cast("B")
            arr = js.Float32Array.new(view.nbytes // 4)
            js.Uint8Array.new(arr.buffer).assign(view)
            x = arr
        jobs = {"slots": list(slots)}
        if tokens is not None:
            jobs["tokens"] = list(tokens)
        if weights is not None:
            jobs["weights"] = [float(w) for w in weights]
        return x, _js_object(jobs)

    def compute(self, x, slots, tokens=None, weights=None):
        """Σ over jobs j of weights[j] · FFN(record in slots[j], row tokens[j] of x), one row of n_embd per token,
        as a JS Float32Array. x: a JS Float32Array or a Python buffer of f32 (n_tokens * n_embd); tokens default
        to 0, weights to 1. Blocks until done."""
        x, jobs = self._request(x, slots, tokens, weights)
        return self.pool.computeSync(x, jobs)

    async def compute_async(self, x, slots, tokens=None, weights=None):
        """`compute`, awaiting the workers instead of blocking."""
        x, jobs = self._request(x, slots, tokens, weights)
        return await self.pool.compute(x, jobs)

    def expert_output(self, job: int):
        """Job `job`'s FFN output in the last request, before weighting (a JS Float32Array of n_embd)."""
        return self.pool.expertOutput(job)

    async def measure(self, jobs: int | None = None, repeats: int = 5) -> dict:
        """The tier's rate here (ms per request of `jobs` experts, record bytes/s, experts/s), timed on the records
        in slots 0 .. jobs-1 as they stand: for the choice between computing a miss here and uploading it."""
        options = {"repeats": repeats}
        if jobs:
            options["jobs"] = jobs
        got = await self.pool.measure(_js_object(options))
        return {"ms": float(got.ms), "bytes_per_s": float(got.bytesPerS), "experts_per_s": float(got.expertsPerS)}

    def close(self) -> None:
        self.pool.close()
