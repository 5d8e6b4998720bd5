"""Helpers shared by the Node engine tests (test_engine_node.py, test_qwen35moe_node.py, the *_kernels tests)."""
import numpy as np

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol


def run_teacher_forced(jobs, fixture_models, refs_dir, out, timeout, act="q8", prefill_chunk=None):
    """Run every (stem, kv) of `jobs` in one Node process (start-up and shader compilation cost seconds), each
    prompt of the stem's refs teacher-forced along its greedy_ids, top 5 per step; every step's raw f32 logits go
    to out/{stem}.{kv}.{prompt index}.f32 (read them with engine_logits). act: the engine's activation mode ("q8":
    Q8_0 products quantise their input as llama.cpp does; "f32"). prefill_chunk: the prompts' chunk (None: the
    engine's default; 1: token by token). Returns the entry's result."""
    node_jobs = []
    for stem, kv in jobs:
        refs = protocol.load_refs(stem, refs_dir)
        runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                 "logits_out": str(out / f"{stem}.{kv}.{p['index']}.f32")} for p in refs["prompts"]]
        node_jobs.append({"model": str(fixture_models / f"{stem}.gguf"), "kv": kv, "act": act, "runs": runs,
                          **({} if prefill_chunk is None else {"prefill_chunk": prefill_chunk})})
    return run_in_node("py_engine.engine.node_entry:run", {"jobs": node_jobs}, mounts=[fixture_models, out],
                       timeout=timeout)


def engine_logits(out, stem, kv, index, n_vocab):
    """The logits run_teacher_forced wrote for one prompt: one row of n_vocab per step."""
    return np.fromfile(out / f"{stem}.{kv}.{index}.f32", dtype="<f4").reshape(-1, n_vocab)


# The start of the Pyodide-side script of the kernel tests (test_kernels_node.py and its kind): the imports they all
# use and the device set-up; each test appends its own main(args), which starts with `await kernel_device(args)`.
KERNEL_HARNESS = r'''
import json, struct
from pathlib import Path
from py_engine.gpu.device import open_gpu
from py_engine.gpu.buffers import upload, storage_buffer, create_buffer, write_buffer, Readback, UNIFORM, COPY_DST
from py_engine.gpu.pipelines import Pipelines, GpuErrorScope
from py_engine.gpu.commands import DispatchList, track_errors, check_errors
from py_engine.gpu.kernels import Kernels, GpuMatrix

async def kernel_device(args):
    """(the case folder, its spec.json, the GPU with uncaptured errors tracked, its Pipelines)."""
    d = Path(args["dir"])
    gpu = await open_gpu()
    track_errors(gpu)
    return d, json.loads((d / "spec.json").read_text()), gpu, Pipelines(gpu)

def case_matrix(gpu, d, name, fmt, rows, cols, band_rows=None):
    """A GpuMatrix from the case folder's in_<name> files (Q8_0: _codes and _scales), in bands of band_rows rows."""
    band_rows = band_rows or rows
    if fmt == "q8":
        codes, scales = (d / f"in_{name}_codes.bin").read_bytes(), (d / f"in_{name}_scales.bin").read_bytes()
    else:
        vals = (d / f"in_{name}.bin").read_bytes()
    bands = []
    for r0 in range(0, rows, band_rows):
        n = min(band_rows, rows - r0)
        if fmt == "q8":
            bands.append((r0, n, {3: upload(gpu, codes[r0 * cols:(r0 + n) * cols]),
                                  4: upload(gpu, scales[r0 * cols // 16:(r0 + n) * cols // 16])}))
        else:
            bands.append((r0, n, {3: upload(gpu, vals[r0 * cols * 4:(r0 + n) * cols * 4])}))
    return GpuMatrix(name, fmt, rows, cols, bands)
'''


def q8_row_words(rows):
    """f32 rows as the engine keeps them quantised ahead (rmsnorm_q8.wgsl's layout): every row's Q8_0 codes (8
    words per 32-block, rows in order), then every block's scale (f32 bits), as u32 words."""
    from diskformer.reference.layers import quantize_q8_0
    codes, d = quantize_q8_0(np.asarray(rows, np.float32))
    return np.concatenate([codes.reshape(-1).view(np.uint32), d.reshape(-1).view(np.uint32)])
