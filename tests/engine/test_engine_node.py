"""The qwen3moe GPU engine (Pyodide + Dawn on lavapipe in Node) against llama.cpp's refs, by the fixtures protocol.

Teacher-forced along each prompt's greedy_ids; the F32 twin is held to the precise per-step limits (f32 KV cache)
and the f16-KV limits (f16 cache); the Q8_0 files to the statistical f32-activation limits. One Node process runs
every model (start-up and shader compilation cost seconds).
"""
import json
from unittest import mock

import numpy as np
import pytest

from diskformer.reference import protocol
from node_helpers import engine_logits, run_teacher_forced


JOBS = [("micro-qwen3moe-f32", "f32"), ("micro-qwen3moe-f32", "f16"), ("micro-qwen3moe", "f16"),
        ("tiny-qwen3moe", "f16")]


@pytest.fixture(scope="module")
def engine_runs(fixture_models, refs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("engine_logits")
    return out, run_teacher_forced(JOBS, fixture_models, refs_dir, out, timeout=600)


ROUTING_TIE = 1e-5  # top-k boundary gap (in router probability) below which either choice is correct


def steps_before_routing_tie(model_path, prompt) -> int:
    """How many leading steps of a prompt precede a near-tie at the router's top-k boundary, when the numpy
    reference (float64, K/V rounded to f16) runs it teacher-forced. Past such a tie an f32 engine may pick the other
    expert and every later logit moves by O(1) (fixtures README section 5, "routing flips")."""
    from diskformer.reference import layers
    from diskformer.reference.model import ReferenceModel
    from diskformer.reference.options import Options

    gaps = []
    route = layers.SparseMoE.route

    def recording_route(self, x):
        probs = np.sort(layers.softmax(x @ self.router.T, axis=-1), axis=-1)[:, ::-1]
        gaps.append(probs[:, self.n_used - 1] - probs[:, self.n_used])
        return route(self, x)

    with mock.patch.object(layers.SparseMoE, "route", recording_route):
        model = ReferenceModel(str(model_path), Options(dtype=np.float64, kv_f16=True))
        model.teacher_forced(prompt["prompt_ids"], prompt["greedy_ids"][:-1])
    n_layers = model.config.n_layer
    n_prompt = len(prompt["prompt_ids"])
    for call, g in enumerate(gaps):  # the prompt in one batch (one call per layer), then one token per call
        if g.min() < ROUTING_TIE:
            token = int(np.argmin(g)) if call < n_layers else n_prompt + (call - n_layers) // n_layers
            return max(0, token - n_prompt + 1)
    return len(prompt["steps"])


def metrics_for(stem, kv, out, refs_dir, model_dir=None):
    refs = protocol.load_refs(stem, refs_dir)
    n_vocab = protocol.load_step0_logits(stem, 0, refs_dir).size
    metrics = []
    for p in refs["prompts"]:
        rows = engine_logits(out, stem, kv, p["index"], n_vocab)
        assert rows.shape[0] == len(p["steps"])
        if model_dir is not None:
            rows = rows[:max(1, steps_before_routing_tie(model_dir / f"{stem}.gguf", p))]
        metrics.append(protocol.prompt_metrics(p, rows, protocol.load_step0_logits(stem, p["index"], refs_dir)))
    return metrics


@pytest.mark.parametrize("stem,kv", JOBS)
def test_teacher_forced_protocol(engine_runs, refs_dir, fixture_models, stem, kv):
    out, _ = engine_runs
    # An F32 model with an f16 cache is scored up to the first routing near-tie only: f16 rounding of K/V moves
    # router scores by ~1e-6, enough to flip a tie of 4e-7 (micro-qwen3moe-f32 prompt 1 step 10 has one).
    tie_dir = fixture_models if (kv == "f16" and stem.endswith("-f32")) else None
    metrics = metrics_for(stem, kv, out, refs_dir, tie_dir)
    result = protocol.check_limits(stem, metrics, protocol.load_tolerances(refs_dir), kv=kv, engine="f32act")
    print(result.report())
    assert result.passed, result.report()


def test_printed_top_matches_logits(engine_runs, refs_dir):
    """The JSON the command prints (top-5 log-probs, greedy ids) agrees with the raw logits it wrote."""
    out, result = engine_runs
    run = result["jobs"][0]["runs"][0]
    rows = np.fromfile(out / "micro-qwen3moe-f32.f32.0.f32", dtype="<f4").reshape(len(run["steps"]), -1)
    for row, step, gid in zip(rows, run["steps"], run["greedy_ids"]):
        lp = protocol.log_softmax(row)
        assert gid == int(np.argmax(row))
        ids = [t[0] for t in step["top"]]
        assert ids == [int(i) for i in np.argsort(-lp, kind="stable")[:5]]
        np.testing.assert_allclose([t[1] for t in step["top"]], lp[ids], atol=1e-9)
    stats = result["jobs"][0]["stats"]
    assert stats["tokens"] > 0 and stats["dispatches"] > 0 and stats["weights_bytes"] > 0


def test_run_command_prints_reference_json(fixture_models, refs_dir, capsys):
    """`diskformer run` free-running: the reference's JSON shape plus stats, and llama.cpp's greedy ids up to the
    first near-tie (F32 model, f32 cache)."""
    from diskformer.engine_run import main

    stem = "micro-qwen3moe-f32"
    p = protocol.load_refs(stem, refs_dir)["prompts"][0]
    need = protocol.free_run_required_prefix(p, 2e-3)
    assert main([str(fixture_models / f"{stem}.gguf"), "--ids", ",".join(map(str, p["prompt_ids"])),
                 "--n", "8", "--kv", "f32", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["greedy_ids"]) == 8 and all(len(s["top"]) == 3 for s in out["steps"])
    assert out["greedy_ids"][:min(8, need)] == p["greedy_ids"][:min(8, need)]
    assert out["stats"]["arch"] == "qwen3moe" and out["stats"]["tokens"] == len(p["prompt_ids"]) + 7


def test_run_command_reports_bad_token(fixture_models, capsys):
    from diskformer.engine_run import main

    assert main([str(fixture_models / "micro-qwen3moe.gguf"), "--ids", "1,99999"]) == 1
    assert "outside the vocabulary" in capsys.readouterr().err
