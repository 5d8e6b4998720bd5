"""Helpers shared by the Node engine tests (test_engine_node.py, test_qwen35moe_node.py)."""
import numpy as np

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol


def run_teacher_forced(jobs, fixture_models, refs_dir, out, timeout, act="q8"):
    """Run every (stem, kv) of `jobs` in one Node process (start-up and shader compilation cost seconds), each
    prompt of the stem's refs teacher-forced along its greedy_ids, top 5 per step; every step's raw f32 logits go
    to out/{stem}.{kv}.{prompt index}.f32 (read them with engine_logits). act: the engine's activation mode ("q8":
    Q8_0 products quantise their input as llama.cpp does; "f32"). Returns the entry's result."""
    node_jobs = []
    for stem, kv in jobs:
        refs = protocol.load_refs(stem, refs_dir)
        runs = [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
                 "logits_out": str(out / f"{stem}.{kv}.{p['index']}.f32")} for p in refs["prompts"]]
        node_jobs.append({"model": str(fixture_models / f"{stem}.gguf"), "kv": kv, "act": act, "runs": runs})
    return run_in_node("py_engine.engine.node_entry:run", {"jobs": node_jobs}, mounts=[fixture_models, out],
                       timeout=timeout)


def engine_logits(out, stem, kv, index, n_vocab):
    """The logits run_teacher_forced wrote for one prompt: one row of n_vocab per step."""
    return np.fromfile(out / f"{stem}.{kv}.{index}.f32", dtype="<f4").reshape(-1, n_vocab)
