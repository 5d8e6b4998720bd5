"""The qwen35moe GPU engine (Pyodide + Dawn on lavapipe in Node) against llama.cpp's refs by the fixtures protocol,
and against the numpy reference model's logits.

Teacher-forced along each prompt's greedy_ids (every prompt of a model runs through one Decoder, so each later
prompt also proves that position 0 starts a fresh recurrent state). The F32 twins are held to the precise per-step
limits with an f32 KV cache and to the f16-KV limits with the default f16 cache; the Q8_0 files to the statistical
f32-activation limits. One Node process runs every job (start-up and shader compilation cost seconds).
"""
import json
from unittest import mock

import numpy as np
import pytest

from diskformer import cli
from diskformer.reference import layers, protocol
from diskformer.reference.model import ReferenceModel
from diskformer.reference.options import Options
from node_helpers import engine_logits, run_teacher_forced


F32_MODELS = ["micro-qwen35moe-f32", "micro-gqa-qwen35moe-f32"]
Q8_MODELS = ["micro-qwen35moe", "micro-gqa-qwen35moe", "tiny-qwen35moe", "wide-qwen35moe", "qwen3vocab-qwen35moe"]
JOBS = [(m, kv) for m in F32_MODELS for kv in ("f32", "f16")] + [(m, "f16") for m in Q8_MODELS]

# Engine vs the numpy reference (float64, K/V rounded to f16 when the engine's cache is f16), over every logit of
# every compared step. Measured on lavapipe over all 5 prompts of every model (qwen3vocab-qwen35moe included):
# at most 2.3e-4 (tiny-qwen35moe), relative to the step's largest |logit| at most 1.6e-5; the bound leaves 4x
# head-room for other devices' summation orders.
REFERENCE_MAX_ABS = 1e-3
REFERENCE_PROMPTS = (0, 1)  # the numpy reference is slow on the larger files: its two shorter prompts
# loading qwen3vocab-qwen35moe into the numpy reference alone takes ~10 s: it is held to the refs only
REFERENCE_MODELS = [m for m in F32_MODELS + Q8_MODELS if not m.startswith("qwen3vocab")]
ROUTING_TIE = 1e-6  # a top-k boundary gap (router probability) an f32 engine may resolve either way


@pytest.fixture(scope="module")
def engine_runs(fixture_models, refs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen35moe_logits")
    # f32 activations: the numpy reference comparison below needs them (test_engine_vs_reference_node.py says why)
    return out, run_teacher_forced(JOBS, fixture_models, refs_dir, out, timeout=900, act="f32")


@pytest.fixture(scope="module")
def default_runs(fixture_models, refs_dir, tmp_path_factory):
    """The Q8_0 files in the engine's default mode (Q8_0 activation quantisation, as llama.cpp); the F32 files have
    no Q8_0 product, so the runs above are already theirs."""
    out = tmp_path_factory.mktemp("qwen35moe_logits_q8act")
    return out, run_teacher_forced([(m, "f16") for m in Q8_MODELS], fixture_models, refs_dir, out, timeout=900)


@pytest.mark.parametrize("stem,kv", JOBS + [(m, "f16-q8act") for m in Q8_MODELS])
def test_teacher_forced_protocol(engine_runs, default_runs, refs_dir, stem, kv):
    out, _ = default_runs if kv.endswith("-q8act") else engine_runs
    kv = kv.removesuffix("-q8act")
    refs = protocol.load_refs(stem, refs_dir)
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    metrics = []
    for p in refs["prompts"]:
        rows = engine_logits(out, stem, kv, p["index"], n_vocab)
        assert rows.shape[0] == len(p["steps"])
        metrics.append(protocol.prompt_metrics(p, rows, protocol.load_step0_logits(stem, p["index"], refs_dir)))
    result = protocol.check_limits(stem, metrics, protocol.load_tolerances(refs_dir), kv=kv, engine="f32act")
    print(result.report())
    assert result.passed, result.report()


def reference_teacher_forced(model, prompt):
    """The numpy reference's logits along the prompt's greedy_ids, and how many leading steps come before a router
    near-tie (past one, the engine may legitimately pick the other expert)."""
    gaps = []
    route = layers.SparseMoE.route

    def recording_route(self, x):
        probs = np.sort(layers.softmax(x @ self.router.T, axis=-1), axis=-1)[:, ::-1]
        gaps.append(probs[:, self.n_used - 1] - probs[:, self.n_used])
        return route(self, x)

    with mock.patch.object(layers.SparseMoE, "route", recording_route):
        rows = model.teacher_forced(prompt["prompt_ids"], prompt["greedy_ids"][:-1])
    n_layers, n_prompt = model.config.n_layer, len(prompt["prompt_ids"])
    for call, g in enumerate(gaps):  # the prompt in one batch (one call per layer), then one token per call
        if g.min() < ROUTING_TIE:
            token = int(np.argmin(g)) if call < n_layers else n_prompt + (call - n_layers) // n_layers
            return rows, max(0, token - n_prompt + 1)
    return rows, rows.shape[0]


@pytest.mark.parametrize("stem,kv", [(m, "f16") for m in REFERENCE_MODELS] + [(F32_MODELS[1], "f32")])
def test_matches_numpy_reference(engine_runs, fixture_models, refs_dir, stem, kv):
    out, _ = engine_runs
    refs = protocol.load_refs(stem, refs_dir)
    model = ReferenceModel(str(fixture_models / f"{stem}.gguf"), Options(dtype=np.float64, kv_f16=kv == "f16"))
    compared = 0
    for p in refs["prompts"]:
        if p["index"] not in REFERENCE_PROMPTS:
            continue
        ref, n_steps = reference_teacher_forced(model, p)
        rows = engine_logits(out, stem, kv, p["index"], ref.shape[1])
        diff = np.abs(rows[:n_steps] - ref[:n_steps]).max(axis=1)
        assert diff.max() <= REFERENCE_MAX_ABS, (
            f"{stem} ({kv} KV) prompt {p['index']}: max |engine - reference| logit {diff.max():.3g} at step "
            f"{int(diff.argmax())} > {REFERENCE_MAX_ABS}")
        compared += n_steps
    assert compared >= 32, f"{stem}: only {compared} steps before router near-ties"


def test_run_command_free_running(fixture_models, refs_dir, capsys):
    """`diskformer run MODEL --ids ... --n N` greedy-decodes a qwen35moe file: it reproduces llama.cpp's greedy ids
    up to the first step whose margin is below the f16-KV argmax limit."""
    stem = "micro-gqa-qwen35moe-f32"
    prompt = protocol.load_refs(stem, refs_dir)["prompts"][1]
    need = protocol.free_run_required_prefix(prompt, 0.02)
    n = max(need, 1)
    assert cli.main(["run", str(fixture_models / f"{stem}.gguf"), "--ids", json.dumps(prompt["prompt_ids"]),
                     "--n", str(n)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stats"]["arch"] == "qwen35moe"
    assert protocol.common_prefix_length(result["greedy_ids"], prompt["greedy_ids"]) >= need
    assert len(result["steps"]) == n and len(result["steps"][0]["top"]) == 5
