"""`diskformer bench`'s measurements, run inside the engine's own process (Pyodide + WebGPU): the device's
streaming-read bandwidth, prefill/decode timings and counters, per-dispatch GPU times, bytes and FLOPs per token.

This package is not part of the engine the page installs: the Node runner copies it beside `py_engine` for bench
runs only (`--package lab/engine_bench`), with its own kernels in `shaders/` here."""
from pathlib import Path

SHADER_DIR = Path(__file__).resolve().parent / "shaders"


def bench_pipelines(gpu):
    """Pipelines of the bench's own kernels (this package's shaders/), apart from the engine's."""
    from py_engine.gpu.pipelines import Pipelines  # imported here: it needs Pyodide's js module
    from py_engine.gpu.shader_loader import ShaderLoader

    return Pipelines(gpu, ShaderLoader(SHADER_DIR))
