"""What the engine worker runs right after Pyodide has installed this package: the WebGPU self-test.

`self_test()` asks for an adapter and a device (with the adapter's own limits, since WebGPU's defaults are far below
what model weights need), runs one real compute kernel (shaders/selftest/selftest_saxpy.wgsl) and checks every output
exactly against values computed here. It returns the adapter facts and the check result as a plain dict, which the
worker hands to the page. `handle_request()` is the worker's entry point for every typed request after boot.

The `js` / `pyodide` modules exist only inside Pyodide, so they are imported inside the functions that need them:
the module (and its pure parts: inputs, expected values, shader lookup) also imports under CPython for tests.
"""
import struct
import time
from pathlib import Path

from .gpu.params import ParamsLayout

SELFTEST_SHADER = "selftest/selftest_saxpy.wgsl"  # a path inside the shaders folder
SELFTEST_N = 4096
WORKGROUP_SIZE = 256  # must match WG in the shader
SELFTEST_A = 1.5

# Limits the engine needs raised above WebGPU's defaults (the defaults cap a storage binding at 128 MiB, 8 storage
# buffers per stage, 16 KiB workgroup memory): ask for whatever the adapter offers.
DEVICE_LIMITS = (
    "maxStorageBufferBindingSize",
    "maxBufferSize",
    "maxStorageBuffersPerShaderStage",
    "maxComputeWorkgroupStorageSize",
    "maxComputeInvocationsPerWorkgroup",
)
# Reported to the page, not required.
REPORTED_LIMITS = DEVICE_LIMITS + (
    "maxComputeWorkgroupSizeX",
    "maxComputeWorkgroupsPerDimension",
    "maxUniformBufferBindingSize",
)
ADAPTER_INFO_FIELDS = ("vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize")

NO_WEBGPU_HINT = (
    "WebGPU is not available in this browser. Use Chrome/Chromium 113+ (on Linux start it with "
    "--enable-unsafe-webgpu, and --enable-features=Vulkan where needed)."
)


class WebGPUUnavailable(RuntimeError):
    """navigator.gpu is missing, or it offers no adapter."""


# ---- pure parts (also run under CPython) -------------------------------------------------------------------------

def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def selftest_inputs(n: int = SELFTEST_N):
    """x and y for the kernel: small integers, so a*x+y and every workgroup sum are exact in f32."""
    x = [float(i - n // 2) for i in range(n)]
    y = [float((i * 37) % 101 - 50) for i in range(n)]
    return x, y


def selftest_expected(a: float, x, y, group: int = WORKGROUP_SIZE):
    """The kernel's outputs and per-workgroup sums, computed here; refuses inputs whose f32 result would round."""
    out = [a * xi + yi for xi, yi in zip(x, y)]
    partials = [sum(out[g:g + group]) for g in range(0, len(out), group)]
    for v in out + partials:
        if _f32(v) != v or abs(v) >= 2 ** 22:
            raise ValueError(f"self-test value {v} is not exact in f32; the check would depend on rounding order")
    return out, partials


def compare_exact(got, want):
    """(number of mismatches, first mismatch as a dict or None)."""
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if len(got) != len(want):
        bad.append(min(len(got), len(want)))
    first = None
    if bad:
        i = bad[0]
        first = {"index": i, "got": got[i] if i < len(got) else None, "want": want[i] if i < len(want) else None}
    return len(bad), first


def packaged_shader_source(name: str):
    """WGSL source from the installed wheel (py_engine/shaders/), or from a source checkout (shaders/); else None."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "shaders" / name, here.parent / "shaders" / name):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return None


# ---- WebGPU through the js FFI (Pyodide only) ---------------------------------------------------------------------

def _ffi():
    import js
    from pyodide.ffi import to_js

    def obj(value):
        # A dict must become a plain JS object: to_js's default (a Map) is silently ignored by WebGPU.
        return to_js(value, dict_converter=js.Object.fromEntries)

    return js, obj


async def load_shader(name: str) -> str:
    source = packaged_shader_source(name)
    if source is not None:
        return source
    js, _ = _ffi()
    response = await js.fetch(f"/shaders/{name}")
    if not response.ok:
        raise FileNotFoundError(f"shader {name} is neither in the installed package nor at /shaders/{name} "
                                f"(HTTP {response.status})")
    return await response.text()


def _missing(v) -> bool:
    """JS undefined arrives as None, JS null as pyodide.ffi.jsnull (a falsy singleton that is not None)."""
    return v is None or type(v).__name__ == "JsNull"


def _js_value(v):
    """A JS scalar as a JSON-friendly Python value (undefined/null -> None)."""
    if _missing(v):
        return None
    if isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


async def request_gpu():
    """(adapter, device, facts). Raises WebGPUUnavailable with the user-facing hint when there is no WebGPU."""
    js, obj = _ffi()
    gpu = getattr(js.navigator, "gpu", None)
    if _missing(gpu):
        raise WebGPUUnavailable("navigator.gpu is missing in the engine worker. " + NO_WEBGPU_HINT)
    adapter = await gpu.requestAdapter(obj({"powerPreference": "high-performance"}))
    if _missing(adapter):
        raise WebGPUUnavailable("navigator.gpu.requestAdapter() returned null. " + NO_WEBGPU_HINT)

    info = adapter.info
    facts = {name: _js_value(getattr(info, name, None)) for name in ADAPTER_INFO_FIELDS}
    # Newer browsers report isFallbackAdapter on the info object; older ones on the adapter.
    fallback = getattr(info, "isFallbackAdapter", None)
    if _missing(fallback):
        fallback = getattr(adapter, "isFallbackAdapter", None)
    facts["isFallbackAdapter"] = _js_value(fallback)
    features = sorted(str(f) for f in adapter.features)
    limits = {name: _js_value(getattr(adapter.limits, name, None)) for name in REPORTED_LIMITS}

    required_limits = {name: limits[name] for name in DEVICE_LIMITS if limits[name] is not None}
    # Subgroups are used where present (any width); shader-f16 is never required (absent on SwiftShader, NVIDIA Vulkan).
    required_features = [f for f in ("subgroups",) if f in features]
    device = await adapter.requestDevice(obj({"requiredLimits": required_limits,
                                              "requiredFeatures": required_features}))
    return adapter, device, {"adapter": facts, "features": features, "limits": limits,
                             "device_features": sorted(str(f) for f in device.features)}


async def _compile_messages(module) -> str:
    info = await module.getCompilationInfo()
    lines = [f"{m.type} at line {m.lineNum}:{m.linePos}: {m.message}" for m in info.messages]
    return "\n".join(lines)


async def run_saxpy_check(device) -> dict:
    """Dispatch the self-test kernel once and compare every output and workgroup sum exactly."""
    js, obj = _ffi()
    from pyodide.ffi import to_js

    n, a = SELFTEST_N, SELFTEST_A
    groups = n // WORKGROUP_SIZE
    x, y = selftest_inputs(n)
    want_out, want_partials = selftest_expected(a, x, y)
    usage = js.GPUBufferUsage
    started = time.perf_counter()

    device.pushErrorScope("validation")
    source = await load_shader(SELFTEST_SHADER)
    module = device.createShaderModule(obj({"code": source}))
    try:
        pipeline = await device.createComputePipelineAsync(
            obj({"layout": "auto", "compute": {"module": module, "entryPoint": "main"}}))
    except Exception as e:
        raise RuntimeError(f"{SELFTEST_SHADER} failed to compile: {e}\n{await _compile_messages(module)}") from e

    def buffer(size, flags):
        return device.createBuffer(obj({"size": size, "usage": flags}))

    params = buffer(16, usage.UNIFORM | usage.COPY_DST)
    x_buf = buffer(n * 4, usage.STORAGE | usage.COPY_DST)
    y_buf = buffer(n * 4, usage.STORAGE | usage.COPY_DST | usage.COPY_SRC)
    sums_buf = buffer(groups * 4, usage.STORAGE | usage.COPY_SRC)
    readback = buffer((n + groups) * 4, usage.MAP_READ | usage.COPY_DST)
    buffers = (params, x_buf, y_buf, sums_buf, readback)

    queue = device.queue
    # writeBuffer wants a JS typed array: to_js(memoryview) hands it a Uint8Array copy of the bytes.
    params_bytes = ParamsLayout.parse(source, SELFTEST_SHADER).pack({"a": a, "n": n})
    queue.writeBuffer(params, 0, to_js(memoryview(params_bytes)))
    queue.writeBuffer(x_buf, 0, to_js(memoryview(struct.pack(f"<{n}f", *x))))
    queue.writeBuffer(y_buf, 0, to_js(memoryview(struct.pack(f"<{n}f", *y))))

    bind_group = device.createBindGroup(obj({
        "layout": pipeline.getBindGroupLayout(0),
        "entries": [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate((params, x_buf, y_buf, sums_buf))],
    }))
    encoder = device.createCommandEncoder()
    compute = encoder.beginComputePass()
    compute.setPipeline(pipeline)
    compute.setBindGroup(0, bind_group)
    compute.dispatchWorkgroups(groups)
    compute.end()
    encoder.copyBufferToBuffer(y_buf, 0, readback, 0, n * 4)
    encoder.copyBufferToBuffer(sums_buf, 0, readback, n * 4, groups * 4)
    queue.submit(to_js([encoder.finish()]))
    error = await device.popErrorScope()
    if not _missing(error):
        raise RuntimeError(f"WebGPU validation error in the self-test: {error.message}")

    await readback.mapAsync(js.GPUMapMode.READ)
    raw = js.Uint8Array.new(readback.getMappedRange()).to_bytes()  # copies out before unmap
    readback.unmap()
    values = struct.unpack(f"<{n + groups}f", raw)
    got_out, got_partials = list(values[:n]), list(values[n:])
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    for b in buffers:
        b.destroy()

    out_bad, out_first = compare_exact(got_out, want_out)
    sum_bad, sum_first = compare_exact(got_partials, want_partials)
    return {
        "shader": SELFTEST_SHADER,
        "n": n,
        "a": a,
        "workgroups": groups,
        "ok": out_bad == 0 and sum_bad == 0,
        "output_mismatches": out_bad,
        "first_output_mismatch": out_first,
        "partial_sum_mismatches": sum_bad,
        "first_partial_sum_mismatch": sum_first,
        "partial_sums": got_partials,
        "expected_partial_sums": want_partials,
        "samples": {str(i): got_out[i] for i in (0, 1, n // 2, n - 1)},
        "ms": round(elapsed_ms, 2),
    }


async def self_test() -> dict:
    """Adapter facts plus the kernel check; the device is destroyed afterwards (the engine makes its own)."""
    _adapter, device, facts = await request_gpu()
    try:
        facts["kernel"] = await run_saxpy_check(device)
    finally:
        device.destroy()
    return facts


# ---- typed requests from the page (everything after "boot", which the worker's JS handles) -----------------------

REQUESTS = {
    "selftest": self_test,
}

# The chat app's requests (models, load, generate, stop, stats, reset, remove): py_engine/app/requests.py.
from .app.requests import APP_REQUESTS  # noqa: E402

REQUESTS.update(APP_REQUESTS)


async def handle_request(kind: str, payload=None, request_id=None) -> dict:
    handler = REQUESTS.get(kind)
    if handler is None:
        known = ", ".join(sorted(REQUESTS))
        raise ValueError(f"the engine has no request type {kind!r} (it handles: boot, {known})")
    if _missing(payload):
        payload = None
    elif hasattr(payload, "to_py"):
        payload = payload.to_py()
    kwargs = dict(payload or {})
    if getattr(handler, "wants_progress", False):  # streams progress events tagged with the request's id
        from .app.progress import js_poster
        kwargs["progress"] = js_poster(None if _missing(request_id) else request_id)
    return await handler(**kwargs)
