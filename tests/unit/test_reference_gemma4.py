"""The numpy reference model of gemma4 against llama.cpp's refs (../shared/fixtures-gemma4), through the fixtures'
comparison protocol: every model and prompt teacher-forced along llama.cpp's greedy_ids.

F32 models (weights on the Q4_0/Q6_K grid) with an exact GELU must meet the exact-GELU refs' per-step limits and the
looser limits against the main refs; with ggml-cpu's fp16 GELU table emulated, the main refs' tight limits; with an
f16 KV cache in float32, the f16 limits. Q4_0 models meet their statistical limits, and the tighter ones when
ggml's activation rounding is emulated. Deliberately broken variants are rejected, which shows these tests can fail.
"""
import json

import gguf
import numpy as np
import pytest

from conftest import GEMMA4_REFS
from diskformer.reference import protocol
from diskformer.reference.cli import main as cli_main
from diskformer.reference.config import read_config
from diskformer.reference.dequant import dequantize_q4_0, dequantize_q6_k, q4_0_planes
from diskformer.reference.layers import fake_quantize_q8_k, gelu_fp16_table, gelu_tanh
from diskformer.reference.model import ReferenceModel
from diskformer.reference.options import Options
from diskformer.reference.weights import GGUFWeights
from py_engine.gguf import read_gguf_file
from py_engine.models.gemma4.config import Gemma4Config

TOLERANCES = protocol.load_tolerances(GEMMA4_REFS)
ALL_MODELS = sorted(TOLERANCES["models"])
F32_MODELS = [m for m in ALL_MODELS if TOLERANCES["models"][m]["weights"] == "F32"]
Q4_MODELS = [m for m in ALL_MODELS if m not in F32_MODELS]
_WEIGHTS: dict = {}


def load_model(models_dir, stem, options=Options()):
    path = models_dir / f"{stem}.gguf"
    if path not in _WEIGHTS:
        _WEIGHTS[path] = GGUFWeights(path)
    return ReferenceModel(_WEIGHTS[path], options)


def teacher_forced_rows(model, stem, prompts=None):
    """{prompt index: logits rows}: prefill prompt_ids in one batch, then greedy_ids[:31] one at a time."""
    refs = protocol.load_refs(stem, GEMMA4_REFS)
    return refs, {p["index"]: model.teacher_forced(p["prompt_ids"], p["greedy_ids"][:-1])
                  for p in refs["prompts"] if prompts is None or p["index"] in prompts}


def metrics(stem, refs, rows, exact_gelu=False):
    out = []
    for p in refs["prompts"]:
        if p["index"] not in rows:
            continue
        scored = protocol.exact_gelu_prompt(p) if exact_gelu else p
        step0 = protocol.load_step0_logits(stem, p["index"], GEMMA4_REFS, "exact_gelu" if exact_gelu else None)
        out.append(protocol.prompt_metrics(scored, rows[p["index"]], step0))
    return out


# --- weights and config -----------------------------------------------------------------------------------------
def test_q4_0_and_q6_k_equal_gguf_package_and_the_f32_twin(gemma4_models):
    quantized = GGUFWeights(gemma4_models / "micro-gemma4.gguf")
    twin = GGUFWeights(gemma4_models / "micro-gemma4-f32.gguf")
    kinds = set()
    for t in gguf.GGUFReader(gemma4_models / "micro-gemma4.gguf").tensors:
        kind = t.tensor_type.name
        if kind not in ("Q4_0", "Q6_K"):
            continue
        ours = quantized.tensor(t.name, np.float32)
        assert np.array_equal(ours, gguf.quants.dequantize(t.data, t.tensor_type)), t.name
        assert np.array_equal(ours, twin.tensor(t.name, np.float32)), t.name
        kinds.add(kind)
    assert kinds == {"Q4_0", "Q6_K"}


def test_q4_0_block_layout():
    # one block: f16 scale 0.5; byte j holds code j (low nibble) and code j + 16 (high nibble), value = d*(code-8)
    codes = np.arange(32) % 16
    packed = (codes[:16] | (codes[16:] << 4)).astype(np.uint8)
    raw = np.concatenate([np.array([0.5], np.float16).view(np.uint8), packed])[None, :]
    got_codes, got_scales = q4_0_planes(raw)
    assert got_scales.tolist() == [[0.5]] and got_codes[0, 0].tolist() == (codes - 8).tolist()
    assert dequantize_q4_0(raw)[0].tolist() == (0.5 * (codes - 8)).tolist()
    with pytest.raises(ValueError, match="multiple of 18"):
        dequantize_q4_0(raw[:, :17])
    with pytest.raises(ValueError, match="multiple of 210"):
        dequantize_q6_k(np.zeros((1, 200), np.uint8))


def test_config_reads_per_layer_shapes(gemma4_models):
    cfg = read_config(GGUFWeights(gemma4_models / "micro-gemma4.gguf"))
    assert isinstance(cfg, Gemma4Config)  # the engine's class (py_engine/models/gemma4), llama.cpp's hparams names
    assert cfg.swa_layers == (True, True, True, False) and cfg.n_head_kv == (2, 2, 2, 1)
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_ff, cfg.n_ff_exp) == (4, 256, 4, 192, 64)
    assert (cfg.n_expert, cfg.n_expert_used, cfg.n_vocab, cfg.n_ctx_train) == (8, 2, 602, 1024)
    assert [cfg.layer_head_dim(i) for i in range(4)] == [64, 64, 64, 128]
    assert [cfg.layer_n_rot(i) for i in range(4)] == [64, 64, 64, 128]
    assert (cfg.layer_rope_base(0), cfg.layer_rope_base(3)) == (1e4, 1e6)
    assert (cfg.n_swa, cfg.f_final_logit_softcapping, cfg.embd_scale) == (16, 30.0, 16.0)
    assert not any(cfg.is_recurrent(i) for i in range(4)) and cfg.n_kv_layers == 4
    tiny = Gemma4Config.from_header(read_gguf_file(gemma4_models / "tiny-gemma4.gguf"))
    assert tiny.embd_scale == float(np.sqrt(np.float32(512)))  # sqrt(n_embd) as llama.cpp's float holds it
    assert tiny.swa_layers == (True,) * 5 + (False,) and tiny.n_head_kv == (4,) * 5 + (1,)


def _edited_header(path, **values):
    """The GGUF header of `path` with some gemma4.* keys replaced."""
    header = read_gguf_file(path)
    header.metadata.update({f"gemma4.{k.replace('__', '.')}": v for k, v in values.items()})
    return header


@pytest.mark.parametrize("values, said", [
    ({"attention__shared_kv_layers": 2}, "shared KV layers and per-layer inputs are not supported"),
    ({"embedding_length_per_layer_input": 256}, "only the 26B-A4B layout is"),
    ({"attention__head_count": [4, 4, 2, 4]}, "head_count varies by layer"),
    ({"attention__head_count_kv": [2, 2, 3, 1]}, "layer 2: 4 query heads are not a multiple of its 3 KV heads"),
    ({"attention__sliding_window_pattern": [True, False]}, "sliding_window_pattern has 2 entries for 4 layers"),
    ({"attention__value_length_swa": 32}, "value_length != key_length"),
    ({"expert_used_count": 9}, "expert_used_count is 9, more than expert_count 8"),
], ids=["shared-kv", "per-layer-input", "head-count", "kv-heads", "pattern", "value-length", "experts-used"])
def test_config_refuses_layouts_it_does_not_run(gemma4_models, values, said):
    with pytest.raises(ValueError, match=said):
        Gemma4Config.from_header(_edited_header(gemma4_models / "micro-gemma4.gguf", **values))


def test_config_refuses_another_architecture(fixture_models):
    with pytest.raises(ValueError, match="not a gemma4 model: general.architecture = 'qwen3moe'"):
        Gemma4Config.from_header(read_gguf_file(fixture_models / "micro-qwen3moe.gguf"))


def test_gelu_forms():
    x = np.linspace(-12, 12, 20001, dtype=np.float32)
    exact = gelu_tanh(x.astype(np.float64))
    table = gelu_fp16_table(x)
    assert table.dtype == np.float32
    assert np.all(table[x <= -10] == 0) and np.all(table[x >= 10] == x[x >= 10])
    assert 0 < np.max(np.abs(table - exact)) < 0.01  # the fp16 rounding of input and output
    assert gelu_tanh(np.float64(1.0)) == pytest.approx(0.8411919906082768, abs=1e-15)


# --- the protocol on every fixture ------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", F32_MODELS)
def test_f32_models_exact_gelu_meet_both_ref_sets(gemma4_models, stem):
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem), stem)
    exact = protocol.check_limits(stem, metrics(stem, refs, rows, exact_gelu=True), TOLERANCES,
                                  limits_key="f32_kv_cache_exact_gelu")
    assert exact.passed, exact.report()
    assert exact.summary.top1_agreement == 1.0
    main = protocol.check_limits(stem, metrics(stem, refs, rows), TOLERANCES,
                                 limits_key="f32_kv_cache_exact_gelu_vs_main_refs")
    assert main.passed, main.report()


@pytest.mark.parametrize("stem", F32_MODELS)
def test_f32_models_with_ggml_gelu_meet_the_main_refs(gemma4_models, stem):
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem, Options(gelu_fp16_table=True)), stem)
    result = protocol.check_limits(stem, metrics(stem, refs, rows), TOLERANCES, limits_key="f32_kv_cache_ggml_gelu")
    assert result.passed, result.report()


def test_float32_with_f16_kv_cache(gemma4_models):
    stem = "micro-gemma4-f32"
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem, Options(dtype=np.float32, kv_f16=True)), stem)
    result = protocol.check_limits(stem, metrics(stem, refs, rows, exact_gelu=True), TOLERANCES, kv="f16",
                                   limits_key="f16_kv_cache_exact_gelu")
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", Q4_MODELS)
def test_q4_0_models_meet_statistical_limits(gemma4_models, stem):
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem), stem)
    result = protocol.check_limits(stem, metrics(stem, refs, rows), TOLERANCES)
    assert result.passed, result.report()


@pytest.mark.parametrize("stem", Q4_MODELS)
def test_q4_0_models_with_ggml_activation_rounding_meet_the_tighter_limits(gemma4_models, stem):
    # Q8_0 activations for Q4_0 products, Q8_K for the Q6_K output head, ggml-cpu's GELU table
    options = Options(q8_activations=True, gelu_fp16_table=True)
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem, options), stem)
    result = protocol.check_limits(stem, metrics(stem, refs, rows), TOLERANCES, engine="q8emu")
    assert result.passed, result.report()


def test_q8_k_activation_rounding():
    x = np.linspace(-3.0, 1.5, 512).astype(np.float32)
    y = fake_quantize_q8_k(x)
    for block, out in zip(x.reshape(2, 256), y.reshape(2, 256)):
        m = block[np.argmax(np.abs(block))]
        d = np.float32(1.0) / (np.float32(-127.0) / m)
        assert np.allclose(out / d, np.rint(out / d)) and np.max(np.abs(out - block)) <= abs(d) / 2 + 1e-7
    assert np.all(fake_quantize_q8_k(np.zeros(256, np.float32)) == 0)
    with pytest.raises(ValueError, match="multiple of 256"):
        fake_quantize_q8_k(np.zeros(100, np.float32))


def test_cli_scores_gemma4_with_either_gelu(gemma4_models, capsys):
    stem = "micro-gemma4-f32"
    p = protocol.load_refs(stem, GEMMA4_REFS)["prompts"][1]
    forced = ",".join(map(str, p["greedy_ids"][:3]))
    # exact GELU against the exact-GELU refs, ggml-cpu's table against the main refs, each within its d5 limit
    limits = TOLERANCES["models"][stem]
    cases = (([], p["exact_gelu"]["steps"], limits["f32_kv_cache_exact_gelu"]["d5_max"]),
             (["--gelu-table"], p["steps"], limits["f32_kv_cache_ggml_gelu"]["d5_max"]))
    for flags, steps, d5_max in cases:
        assert cli_main([str(gemma4_models / f"{stem}.gguf"), "--ids", json.dumps(p["prompt_ids"]),
                         "--teacher-force", forced, *flags]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["greedy_ids"] == p["greedy_ids"][:4]
        for got, want in zip(out["steps"], steps):
            ours = dict((int(i), lp) for i, lp in got["top"])
            assert max(abs(ours[int(t[0])] - t[1]) for t in want["top"]) <= d5_max


# --- the tests can fail -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("broken", [Options(rope_base_scale=0.1), Options(gelu_fp16_table=True)],
                         ids=["rope-bases-over-10", "ggml-gelu-vs-exact-refs"])
def test_protocol_rejects_a_wrong_model(gemma4_models, broken):
    stem = "micro-gemma4-f32"
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem, broken), stem, prompts={0, 3})
    result = protocol.check_limits(stem, metrics(stem, refs, rows, exact_gelu=True), TOLERANCES,
                                   limits_key="f32_kv_cache_exact_gelu")
    assert not result.passed


def test_unknown_limits_are_named(gemma4_models):
    stem = "micro-gemma4-f32"
    refs, rows = teacher_forced_rows(load_model(gemma4_models, stem), stem, prompts={0})
    with pytest.raises(KeyError, match="f32_kv_cache_exact_gelu"):
        protocol.check_limits(stem, metrics(stem, refs, rows), TOLERANCES)
