"""`diskformer bench`'s measurements, run inside the engine's own process (Pyodide + WebGPU): the device's
streaming-read bandwidth, prefill/decode timings and counters, per-dispatch GPU times, bytes and FLOPs per token."""
