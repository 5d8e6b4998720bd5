"""The GPU engine's logits against the numpy reference model's, on every fixture model (Pyodide + Dawn on lavapipe).

The claim: at every compared step the engine's arithmetic agrees with the numpy reference (float64, K/V rounded to
f16 like the engine's default cache) far more tightly than either agrees with llama.cpp's refs. The engine runs
in its f32-activation mode here ("act": "f32"): with Q8_0 activation quantisation (the default, as llama.cpp)
any f32-vs-f64 difference can move a value across a rounding boundary, and one flipped int8 code moves these toy
models' logits by ~1e-2, so no tight bound can hold between two implementations of that; the default mode is
held to the protocol's tighter q8-emulation limits against llama.cpp instead (test_engine_node.py). The bound is stated once here
(ENGINE_VS_REFERENCE_MAX_ABS, over every logit of every compared step) and in docs/engine.md with the measured
figures. llama.cpp quantises the activations of every Q8_0 product to Q8_0 (here the engine and the numpy reference
keep them f32), so on the Q8_0 files both disagree with the refs by 0.1 .. several nats; on the F32 files with an f16
cache the f16 rounding of K/V puts both ~1e-4 .. 3e-3 away from the refs' f32-cache run.

Prompt 0 of each model, teacher-forced along llama.cpp's greedy ids, up to the first router near-tie (past one, an
f32 engine may pick the other expert and every later logit moves by O(1)); one Node process runs every model.
"""

import numpy as np
import pytest

from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from diskformer.reference.model import ReferenceModel
from diskformer.reference.options import Options


MODELS = ["micro-qwen3moe-f32", "micro-qwen3moe", "tiny-qwen3moe", "qwen3vocab-qwen3moe",
          "micro-qwen35moe-f32", "micro-gqa-qwen35moe-f32", "micro-qwen35moe", "micro-gqa-qwen35moe",
          "tiny-qwen35moe", "wide-qwen35moe", "qwen3vocab-qwen35moe"]
PROMPT = 0
# The bound: max |engine logit - numpy reference logit| over every logit of every compared step, every model.
# Measured on lavapipe: 1.4e-3 (tiny-qwen3moe; logits up to ~18, so 8e-5 relative), every other model <= 3.7e-4;
# the bound leaves 2x head-room for other devices' summation orders. docs/engine.md quotes these figures.
ENGINE_VS_REFERENCE_MAX_ABS = 3e-3
# ... and it must be this many times tighter than the engine's own distance from llama.cpp on the Q8_0 files
# (step-0 max |engine - llama.cpp| over the full vocabulary).
MIN_TIGHTER = 20


@pytest.fixture(scope="module")
def runs(fixture_models, refs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("engine_vs_reference")
    jobs = []
    for stem in MODELS:
        p = protocol.load_refs(stem, refs_dir)["prompts"][PROMPT]
        jobs.append({"model": str(fixture_models / f"{stem}.gguf"), "kv": "f16", "act": "f32",
                     "runs": [{"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 1,
                               "logits_out": str(out / f"{stem}.f32")}]})
    run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[fixture_models, out], timeout=600)
    return out


def compare(stem, out, fixture_models, refs_dir) -> dict:
    from test_qwen35moe_node import reference_teacher_forced  # the reference run with router near-ties found

    p = protocol.load_refs(stem, refs_dir)["prompts"][PROMPT]
    model = ReferenceModel(str(fixture_models / f"{stem}.gguf"), Options(dtype=np.float64, kv_f16=True))
    ref, n_steps = reference_teacher_forced(model, p)
    rows = np.fromfile(out / f"{stem}.f32", dtype="<f4").reshape(-1, ref.shape[1]).astype(np.float64)
    llama0 = protocol.load_step0_logits(stem, PROMPT, refs_dir).astype(np.float64)
    diff = np.abs(rows[:n_steps] - ref[:n_steps]).max(axis=1)
    return {"steps": n_steps, "engine_vs_reference": float(diff.max()), "worst_step": int(diff.argmax()),
            "engine_vs_llama_step0": float(np.abs(rows[0] - llama0).max()),
            "reference_vs_llama_step0": float(np.abs(ref[0] - llama0).max())}


@pytest.mark.parametrize("stem", MODELS)
def test_engine_matches_numpy_reference(runs, fixture_models, refs_dir, stem):
    c = compare(stem, runs, fixture_models, refs_dir)
    print(f"{stem}: {c}")
    assert c["steps"] >= 8, f"{stem}: only {c['steps']} steps before a router near-tie"
    assert c["engine_vs_reference"] <= ENGINE_VS_REFERENCE_MAX_ABS, (
        f"{stem}: max |engine - numpy reference| logit {c['engine_vs_reference']:.3g} at step {c['worst_step']} "
        f"> {ENGINE_VS_REFERENCE_MAX_ABS}")
    if not stem.endswith("-f32"):  # Q8_0: llama.cpp's activation quantisation dominates
        assert c["engine_vs_llama_step0"] >= MIN_TIGHTER * c["engine_vs_reference"], c
        assert c["reference_vs_llama_step0"] >= MIN_TIGHTER * c["engine_vs_reference"], c
