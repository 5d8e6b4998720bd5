"""WebGPU from Python (Pyodide `js` FFI): device, buffers, shaders and pipelines, recorded dispatch lists."""
