"""Recorded dispatch lists, replayed with one FFI call per submit.

A list of operations (compute dispatches and buffer copies) is recorded once, at load, as a JS array; a tiny JS
helper replays it into a command encoder. Per token the engine then makes one call into JS (write the step
parameters, replay, copy the result to a staging buffer, submit, map) and awaits one promise: Python→JS calls
cost microseconds and awaits ~150 µs, so the per-dispatch work must not cross the FFI.
"""
import js

from .buffers import MAP_READ
from .jsutil import load_program
from .pieces import split_bounds

_helper = None


def helper():
    """The JS replay helper (py_engine/js_programs/replay.js, created once per Python interpreter)."""
    global _helper
    if _helper is None:
        _helper = load_program("replay.js")
    return _helper


class DispatchList:
    """Operations recorded in order; `ops` is the JS array handed to the replay helper."""

    def __init__(self):
        self.ops = js.Array.new()
        self.count = 0
        self.labels = []

    def dispatch(self, pipeline, bind_group, x: int, y: int = 1, z: int = 1, label: str = ""):
        self.ops.push(js.Array.of(0, pipeline, bind_group, x, y, z))
        self.count += 1
        self.labels.append(label)

    def copy(self, src, src_offset: int, dst, dst_offset: int, size: int, label: str = "copy"):
        self.ops.push(js.Array.of(1, src, src_offset, dst, dst_offset, size))
        self.count += 1
        self.labels.append(label)

    def extend(self, other: "DispatchList"):
        self.ops = self.ops.concat(other.ops)
        self.count += other.count
        self.labels += other.labels

    def submit(self, gpu):
        helper().replay(gpu.device, self.ops)


def set_submit_split(gpu, ops_per_submit: int | None, lead_ops: int | None = None) -> None:
    """Submit replays in pieces of `ops_per_submit` operations (0: one submit per replay), the first of `lead_ops`
    (0: ops_per_submit); see splitEvery and leadOps. None leaves that setting as it is."""
    if ops_per_submit is not None:
        helper().splitEvery = int(ops_per_submit)
    if lead_ops is not None:
        helper().leadOps = int(lead_ops)


def piece_bounds(n_ops: int, whole: bool = False) -> list:
    """The (start, end) of each piece recordSplit submits a list of `n_ops` operations in (leadOps, then splitEvery
    ops each); one piece where the list goes whole (queued steps, step(..., whole)) or splitEvery is 0."""
    return split_bounds(n_ops, 0 if whole else int(helper().splitEvery), int(helper().leadOps))


def track_errors(gpu):
    """Collect uncaptured WebGPU errors into a JS array that `check_errors` turns into an exception."""
    gpu.js_errors = js.Array.new()
    helper().trackErrors(gpu.device, gpu.js_errors)


def check_errors(gpu, what: str):
    errs = getattr(gpu, "js_errors", None)
    if errs is not None and errs.length:
        msgs = [str(m) for m in errs]
        errs.length = 0
        raise RuntimeError(f"WebGPU error during {what}: " + " | ".join(msgs[:3]))


def split_groups(n: int, limit: int = 65535) -> tuple[int, int]:
    """Workgroup counts (x, y) covering `n` groups when one dimension is capped (kernels use y*nx + x)."""
    if n <= limit:
        return max(1, n), 1
    return limit, (n + limit - 1) // limit


__all__ = ["DispatchList", "helper", "set_submit_split", "piece_bounds", "track_errors", "check_errors", "split_groups",
           "MAP_READ"]
