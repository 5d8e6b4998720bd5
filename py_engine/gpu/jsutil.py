"""Small conversions between Python values and the JS objects WebGPU expects."""
import js
from pyodide.ffi import to_js


def js_object(value):
    """A Python dict (nested dicts and lists allowed) as plain JS objects/arrays.

    Without `dict_converter=Object.fromEntries`, `to_js` builds a JS Map, which WebGPU silently ignores.
    """
    return to_js(value, dict_converter=js.Object.fromEntries)


def js_bytes(data):
    """bytes / bytearray / memoryview as a JS Uint8Array (a copy), which `writeBuffer` needs."""
    return to_js(memoryview(data).cast("B"))
