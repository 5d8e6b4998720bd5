"""Small conversions between Python values and the JS objects WebGPU expects."""
from pathlib import Path

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


PROGRAM_DIR = Path(__file__).resolve().parents[1] / "js_programs"


def load_program(name: str):
    """The value of the JS program py_engine/js_programs/`name` (a file whose last expression is the object the
    engine calls), evaluated once per call: callers keep it."""
    from pyodide.code import run_js

    path = PROGRAM_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"the engine's JS program {name} is missing from {PROGRAM_DIR}; reinstall the engine")
    return run_js(path.read_text(encoding="utf-8"))
