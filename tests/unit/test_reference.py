"""The numpy reference model against llama.cpp's refs, through the fixtures' comparison protocol.

Every fixture model and prompt is scored teacher-forced along llama.cpp's greedy_ids; F32 models must meet the
f32-KV per-step limits, Q8_0 models their statistical limits. Deliberately broken variants must be rejected, which
shows these tests can fail.
"""
import json

import gguf
import numpy as np
import pytest

from diskformer.reference import protocol
from diskformer.reference.cli import main as cli_main
from diskformer.reference.config import read_config
from diskformer.reference.model import ReferenceModel
from diskformer.reference.options import Options
from diskformer.reference.weights import GGUFWeights, dequantize_q8_0, q8_0_planes

REFS = protocol.DEFAULT_REFS_DIR  # <repo>/../shared/fixtures/refs, as in conftest.py
TOLERANCES = protocol.load_tolerances(REFS)
ALL_MODELS = sorted(TOLERANCES["models"])
F32_MODELS = [m for m in ALL_MODELS if TOLERANCES["models"][m]["weights"] == "F32"]
Q8_MODELS = [m for m in ALL_MODELS if TOLERANCES["models"][m]["weights"] == "Q8_0"]

# one open GGUF per file and one model per (file, options) for the whole session: loading is the slow part
_WEIGHTS: dict = {}
_MODELS: dict = {}


def open_weights(models_dir, stem):
    path = models_dir / f"{stem}.gguf"
    if path not in _WEIGHTS:
        _WEIGHTS[path] = GGUFWeights(path)
    return _WEIGHTS[path]


def load_model(models_dir, stem, options=Options()):
    key = (stem, options)
    if key not in _MODELS:
        _MODELS[key] = ReferenceModel(open_weights(models_dir, stem), options)
    return _MODELS[key]


def score(model, stem, prompts=None):
    """Protocol metrics of every (or the given) prompt: prefill prompt_ids in one batch, then greedy_ids[:31]."""
    refs = protocol.load_refs(stem, REFS)
    out = []
    for p in refs["prompts"]:
        if prompts is not None and p["index"] not in prompts:
            continue
        rows = model.teacher_forced(p["prompt_ids"], p["greedy_ids"][:-1])
        out.append(protocol.prompt_metrics(p, rows, protocol.load_step0_logits(stem, p["index"], REFS)))
    return out


# --- weights and config -----------------------------------------------------------------------------------------
def test_q8_0_dequantisation_equals_gguf_package(fixture_models):
    w = GGUFWeights(fixture_models / "micro-qwen35moe.gguf")
    checked = 0
    for t in gguf.GGUFReader(str(w.path)).tensors:  # gguf-py's own parse of the file, against ours
        assert np.array_equal(np.asarray(w.raw(t.name)), np.asarray(t.data)), t.name
        if t.tensor_type.name != "Q8_0":
            continue
        ours = dequantize_q8_0(w.raw(t.name), np.float32)
        theirs = gguf.quants.dequantize(t.data, t.tensor_type)
        assert ours.shape == theirs.shape, t.name
        assert np.array_equal(ours, theirs), t.name
        checked += 1
    assert checked >= 20


def test_q8_0_block_layout():
    # one block: f16 scale 0.5, codes -128..-97 -> values = 0.5 * code
    codes = np.arange(-128, -96, dtype=np.int8)
    raw = np.concatenate([np.array([0.5], np.float16).view(np.uint8), codes.view(np.uint8)])[None, :]
    got_codes, got_scales = q8_0_planes(raw)
    assert got_scales.tolist() == [[0.5]] and np.array_equal(got_codes[0, 0], codes)
    assert np.array_equal(dequantize_q8_0(raw, np.float64)[0], 0.5 * codes.astype(np.float64))
    with pytest.raises(ValueError, match="multiple of 34"):
        q8_0_planes(raw[:, :33])


@pytest.mark.parametrize("stem", ALL_MODELS)
def test_config_matches_refs(fixture_models, stem):
    meta = protocol.load_refs(stem, REFS)["model"]
    cfg = read_config(open_weights(fixture_models, stem))
    assert cfg.arch == meta["arch"]
    assert cfg.n_vocab == meta["n_vocab"]
    # the engine's config class, llama.cpp's hparams names for the GGUF keys
    for field, key in (("n_layer", "block_count"), ("n_embd", "embedding_length"), ("n_expert", "expert_count"),
                       ("n_expert_used", "expert_used_count"), ("n_ff_exp", "expert_feed_forward_length"),
                       ("rope_base", "rope.freq_base"), ("n_rot", "rope.dimension_count"),
                       ("n_head", "attention.head_count"), ("n_head_kv", "attention.head_count_kv")):
        assert getattr(cfg, field) == meta[key], key
    if cfg.arch == "qwen35moe":
        assert list(cfg.recurrent) == meta["recurrent_layers"]
        assert cfg.n_ff_shexp == meta["expert_shared_feed_forward_length"]


def test_text_rope_pairs_follow_the_multi_section_layout():
    from diskformer.reference.qwen35moe import text_rope_pairs
    assert text_rope_pairs([11, 11, 10, 0], 64).all()  # Qwen3.5/3.6: every pair turns with the position
    assert text_rope_pairs([3, 3, 2, 0], 16).all()  # the micro fixtures
    mask = text_rope_pairs([2, 2, 2, 2], 16)  # with an "e" section those pairs keep position 0
    assert mask.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]


# --- the protocol on every model --------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", ALL_MODELS)
def test_reference_passes_protocol(fixture_models, stem):
    result = protocol.check_limits(stem, score(load_model(fixture_models, stem), stem), TOLERANCES)
    print(result.report())
    assert result.passed, result.report()
    if stem in F32_MODELS:  # the float64 model is far inside the limits (README: <= 2.2e-05)
        assert result.summary.d5_max < 1e-4 and result.summary.step0_full_max_abs < 1e-4


@pytest.mark.parametrize("stem", F32_MODELS)
def test_float32_compute_and_f16_kv_pass(fixture_models, stem):
    model = load_model(fixture_models, stem, Options(dtype=np.float32))
    f32 = protocol.check_limits(stem, score(model, stem), TOLERANCES)
    assert model.step(1).dtype == np.float32  # nothing promoted the compute to float64
    assert f32.passed, f32.report()
    kv16 = protocol.check_limits(stem, score(load_model(fixture_models, stem, Options(kv_f16=True)), stem),
                                 TOLERANCES, kv="f16")
    assert kv16.passed, kv16.report()


@pytest.mark.parametrize("stem", Q8_MODELS)
def test_q8_activation_emulation_passes_tight_limits(fixture_models, stem):
    result = protocol.check_limits(stem, score(load_model(fixture_models, stem, Options(q8_activations=True)), stem),
                                   TOLERANCES, engine="q8emu")
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", ["micro-qwen3moe-f32", "micro-gqa-qwen35moe-f32", "micro-qwen35moe"])
def test_prefill_in_one_batch_equals_token_by_token(fixture_models, stem):
    model = load_model(fixture_models, stem)
    ids = protocol.load_refs(stem, REFS)["prompts"][4]["prompt_ids"][:40]
    model.reset()
    batch = model.prefill(ids, all_logits=True)
    model.reset()
    one_by_one = np.stack([model.step(t) for t in ids])
    assert np.max(np.abs(batch - one_by_one)) <= 1e-9
    # and a batch after a batch continues the same sequence
    model.reset()
    model.prefill(ids[:17])
    assert np.max(np.abs(model.prefill(ids[17:], all_logits=True) - one_by_one[17:])) <= 1e-9


@pytest.mark.parametrize("stem", F32_MODELS)
def test_free_running_greedy_reproduces_refs(fixture_models, stem):
    model = load_model(fixture_models, stem)
    limit = TOLERANCES["models"][stem]["f32_kv_cache"]["top1_required_if_margin_ge"]
    for p in protocol.load_refs(stem, REFS)["prompts"]:
        ids, _ = model.greedy(p["prompt_ids"], len(p["greedy_ids"]))
        need = protocol.free_run_required_prefix(p, limit)
        assert protocol.common_prefix_length(ids, p["greedy_ids"]) >= need, p["index"]


# --- the tests can fail: deliberate errors are rejected --------------------------------------------------------
BROKEN = {
    "no_renormalisation": Options(renormalize_experts=False),
    "no_attention_output_gate": Options(attention_output_gate=False),
    "gdn_grouped_heads": Options(gdn_tiled_heads=False),
    "rope_base_div10": Options(rope_base_scale=0.1),
    "rms_eps_x10": Options(rms_eps_scale=10.0),
}
# which F32 models can see which error (fixtures README section 4; rms eps x10 is invisible in qwen3moe)
BROKEN_CASES = [
    ("micro-qwen3moe-f32", "no_renormalisation"), ("micro-qwen35moe-f32", "no_renormalisation"),
    ("micro-gqa-qwen35moe-f32", "no_renormalisation"),
    ("micro-qwen35moe-f32", "no_attention_output_gate"), ("micro-gqa-qwen35moe-f32", "no_attention_output_gate"),
    ("micro-gqa-qwen35moe-f32", "gdn_grouped_heads"),
    ("micro-qwen3moe-f32", "rope_base_div10"), ("micro-qwen35moe-f32", "rope_base_div10"),
    ("micro-qwen35moe-f32", "rms_eps_x10"),
    ("micro-qwen3moe", "no_renormalisation"),  # a Q8_0 model at its statistical limits
]


@pytest.mark.parametrize("stem,bug", BROKEN_CASES)
def test_broken_variant_is_rejected(fixture_models, stem, bug):
    result = protocol.check_limits(stem, score(load_model(fixture_models, stem, BROKEN[bug]), stem), TOLERANCES)
    assert not result.passed, f"{bug} passed unnoticed: {result.report()}"


# --- the protocol on its own ------------------------------------------------------------------------------------
def test_protocol_metrics_on_the_stored_logits():
    stem = "micro-qwen3moe-f32"
    p = protocol.load_refs(stem, REFS)["prompts"][0]
    ref0 = protocol.load_step0_logits(stem, 0, REFS)
    m = protocol.prompt_metrics(p, [ref0], ref0)
    assert m.top1 == [True] and m.d5[0] < 1e-9 and m.step0_full_max_abs == 0.0
    shifted = protocol.prompt_metrics(p, [ref0 + 0.5], ref0)  # logprobs ignore a shift, raw logits do not
    assert shifted.d5[0] < 1e-6 and shifted.step0_full_max_abs == pytest.approx(0.5)
    result = protocol.check_limits(stem, [shifted], TOLERANCES)
    assert not result.passed and any("step-0" in r for r in result.reasons)


def test_protocol_requires_argmax_at_large_margins():
    stem = "micro-qwen3moe-f32"
    p = protocol.load_refs(stem, REFS)["prompts"][0]
    ref0 = protocol.load_step0_logits(stem, 0, REFS).astype(np.float64)
    assert p["steps"][0]["margin"] >= 2e-3
    first, second = p["steps"][0]["top"][0][0], p["steps"][0]["top"][1][0]
    swapped = ref0.copy()
    swapped[[first, second]] = ref0[[second, first]]
    m = protocol.prompt_metrics(p, [swapped])
    assert m.top1 == [False] and m.step0_full_max_abs is None
    reasons = protocol.check_limits(stem, [m], TOLERANCES).reasons
    assert any("argmax mismatches" in r for r in reasons) and any("not compared" in r for r in reasons)
    with pytest.raises(ValueError, match="kv"):
        protocol.check_limits(stem, [m], TOLERANCES, kv="f8")
    with pytest.raises(KeyError, match="no entry"):
        protocol.check_limits("no-such-model", [m], TOLERANCES)


# --- the command ------------------------------------------------------------------------------------------------
def test_cli_teacher_forced_and_greedy(fixture_models, capsys):
    stem = "micro-qwen35moe-f32"
    p = protocol.load_refs(stem, REFS)["prompts"][1]
    model = str(fixture_models / f"{stem}.gguf")
    assert cli_main([model, "--ids", json.dumps(p["prompt_ids"]),
                     "--teacher-force", ",".join(map(str, p["greedy_ids"][:3]))]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["steps"]) == 4 and out["greedy_ids"] == p["greedy_ids"][:4]
    for got, want in zip(out["steps"], p["steps"]):
        assert len(got["top"]) == 5
        assert max(abs(a[1] - b[1]) for a, b in zip(got["top"], want["top"])) < 1e-4
    assert cli_main([model, "--ids", ",".join(map(str, p["prompt_ids"])), "--n", "6", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["greedy_ids"] == p["greedy_ids"][:6] and [len(s["top"]) for s in out["steps"]] == [2] * 6
    assert cli_main([model, "--ids", "1", "--n", "2", "--teacher-force", "3"]) == 2
    assert cli_main([str(fixture_models / "missing.gguf"), "--ids", "1"]) == 1
