"""The WebGPU adapter and device, opened from Python through Pyodide's `js` FFI.

The device is requested with the adapter's own limits for buffer sizes and bindings (the defaults are far lower),
`subgroups` when the adapter has it (kernels never depend on it), and never `shader-f16` (absent on SwiftShader and
NVIDIA Vulkan: f16 data stays packed in u32).
"""
import js

from .jsutil import js_object

# Limits the engine sizes itself by; requested at the adapter's maximum.
LIMIT_NAMES = (
    "maxBufferSize",
    "maxStorageBufferBindingSize",
    "maxUniformBufferBindingSize",
    "maxStorageBuffersPerShaderStage",
    "maxComputeWorkgroupStorageSize",
    "maxComputeInvocationsPerWorkgroup",
    "maxComputeWorkgroupSizeX",
    "maxComputeWorkgroupsPerDimension",
    "maxBindGroups",
)
# Alignments are requested too: the adapter may allow smaller ones than the defaults, but never require larger.
INFO_LIMITS = ("minStorageBufferOffsetAlignment", "minUniformBufferOffsetAlignment")


class GpuUnavailable(RuntimeError):
    """No WebGPU here (no navigator.gpu, no adapter, or the device request failed)."""


# recorded ops per queue submit on a GPU (about one layer; commands.py splitEvery): the GPU starts a prompt chunk or
# an unqueued step while the host encodes the rest; queued greedy steps go whole (Decoder._launch)
OPS_PER_SUBMIT = 24
# ops in the first of those submits: the GPU idles until it is submitted, and a prompt chunk's first few dispatches
# (its first product) outlast encoding the next piece; 4 took the 512-token prefill's mean ~1.2 % shorter on an
# H100 than 24 (docs/results/2026-12-06-h100-host-and-lead-ops.json)
LEAD_OPS = 4


class Gpu:
    """An open device plus the facts kernels and budgets are sized by."""

    def __init__(self, adapter, device, limits: dict, features: set, info: dict):
        self.adapter = adapter
        self.device = device
        self.queue = device.queue
        self.limits = limits
        self.features = features
        self.info = info
        self.has_subgroups = "subgroups" in features
        self.subgroup_min = info.get("subgroupMinSize") or 0
        self.subgroup_max = info.get("subgroupMaxSize") or 0
        self.errors = []  # uncaptured WebGPU errors, collected by the JS helper (see commands.py)

    @property
    def cpu_adapter(self) -> bool:
        """A CPU implementation (SwiftShader, lavapipe): every launched workgroup costs time, idle ones included."""
        return bool(self.info.get("isFallbackAdapter"))

    @property
    def max_binding(self) -> int:
        return int(self.limits["maxStorageBufferBindingSize"])

    def describe(self) -> dict:
        return {"info": self.info, "features": sorted(self.features), "limits": self.limits}


async def open_gpu(power_preference: str = "high-performance") -> Gpu:
    gpu = getattr(js.navigator, "gpu", None) if hasattr(js, "navigator") else None
    if gpu is None:
        raise GpuUnavailable("WebGPU is not available here (navigator.gpu is missing)")
    adapter = await gpu.requestAdapter(js_object({"powerPreference": power_preference}))
    if not adapter:  # JS null
        raise GpuUnavailable("navigator.gpu.requestAdapter() returned no adapter")
    limits = {n: int(getattr(adapter.limits, n)) for n in LIMIT_NAMES + INFO_LIMITS}
    features = {str(f) for f in adapter.features}
    ai = adapter.info
    info = {k: getattr(ai, k, None) for k in ("vendor", "architecture", "device", "description")}
    info["isFallbackAdapter"] = bool(getattr(ai, "isFallbackAdapter", False))
    for k in ("subgroupMinSize", "subgroupMaxSize"):
        v = getattr(ai, k, None)
        info[k] = int(v) if v is not None else None
    wanted = [f for f in ("subgroups", "timestamp-query") if f in features]
    request = {"requiredFeatures": wanted, "requiredLimits": {n: limits[n] for n in LIMIT_NAMES}}
    try:
        device = await adapter.requestDevice(js_object(request))
    except Exception as e:  # a JS rejection surfaces as JsException
        raise GpuUnavailable(f"requestDevice failed: {e}") from None
    dev_features = {str(f) for f in device.features}
    from .commands import set_submit_split
    # a GPU runs the first part of a token while the CPU encodes the rest; a CPU adapter gains nothing from that
    cpu = info["isFallbackAdapter"]
    set_submit_split(None, 0 if cpu else OPS_PER_SUBMIT, 0 if cpu else LEAD_OPS)
    return Gpu(adapter, device, limits, dev_features, info)
