"""The lab's engine side in Pyodide: absent from the engine as the page gets it, importable beside it when a run
asks for it (the bench's runs), with its own kernels found by the bench's loader and none in the engine's folder."""

import pytest

from diskformer.node_engine import NodeEngineError, run_in_node
from lab import ENGINE_SIDE


CODE = """
import importlib.util
import os

def main(args):
    from py_engine.gpu.shader_loader import default_shader_dir

    engine_kernels = sorted(name for _, _, files in os.walk(default_shader_dir()) for name in files
                            if name.endswith(".wgsl"))
    out = {"lab": importlib.util.find_spec("lab") is not None,
           "engine_bench_kernels": [n for n in engine_kernels if n.startswith("bench_")],
           "engine_kernels": len(engine_kernels)}
    if out["lab"]:
        from lab.engine_bench import SHADER_DIR
        from py_engine.gpu.shader_loader import ShaderLoader

        out["lab_kernels"] = sorted(os.listdir(SHADER_DIR))
        out["empty"] = ShaderLoader(SHADER_DIR).source("bench_empty.wgsl")
    return out
"""


def test_engine_side_only_when_asked():
    alone = run_in_node(CODE, {})
    assert alone["lab"] is False and alone["engine_bench_kernels"] == [] and alone["engine_kernels"] > 20
    with_lab = run_in_node(CODE, {}, packages=[ENGINE_SIDE])
    assert with_lab["lab"] and with_lab["engine_bench_kernels"] == []
    assert with_lab["lab_kernels"] == ["bench_empty.wgsl", "bench_stream_read.wgsl", "bench_trace_route.wgsl"]
    assert "fn main(" in with_lab["empty"]
    with pytest.raises(NodeEngineError, match="no such folder"):
        run_in_node(CODE, {}, packages=["lab/no_such_folder"])
    with pytest.raises(NodeEngineError, match="no such folder"):
        run_in_node(CODE, {}, packages=["../outside"])
