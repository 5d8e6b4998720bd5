"""The one list of architectures (py_engine/models/registry.py) and what reads it: the GGUF support check, the
numpy reference (which reads the engine's config classes), and the decoders' options objects."""
import pytest

from diskformer.reference import model as reference_model
from diskformer.reference.config import read_config
from diskformer.reference.weights import REFERENCE_ONLY, GGUFWeights
from py_engine.gguf import SUPPORTED_ARCHITECTURES, read_gguf_file
from py_engine.engine.options import DecodeOptions, StoreOptions
from py_engine.models import registry

STEMS = ["micro-qwen3moe", "micro-qwen35moe", "micro-gqa-qwen35moe-f32"]
GEMMA4_STEMS = ["micro-gemma4", "tiny-gemma4-f32"]


def test_every_reader_lists_the_registry():
    assert tuple(SUPPORTED_ARCHITECTURES) == registry.NAMES == ("qwen3moe", "qwen35moe", "gemma4")
    assert REFERENCE_ONLY == ()  # every architecture the reference runs, the engine runs too
    assert set(reference_model.ARCHITECTURES) == set(registry.NAMES)
    for name in registry.NAMES:
        arch = registry.architecture(name)
        assert arch.config.arch == name
        # gemma4: Q4_0 matrices and a Q6_K token table beside the F32 vectors
        extra = {"Q4_0", "Q6_K"} if name == "gemma4" else set()
        assert {t.name for t in arch.tensor_types} == {"F32", "Q8_0"} | extra
    with pytest.raises(ValueError, match="architecture 'llama' is not supported by the engine"):
        registry.architecture("llama")


@pytest.mark.parametrize("stem", STEMS)
def test_the_reference_reads_the_engines_config(fixture_models, stem):
    path = fixture_models / f"{stem}.gguf"
    engine_cfg = registry.config_from_header(read_gguf_file(path))
    assert read_config(GGUFWeights(path)) == engine_cfg
    # attention-only architectures are exactly those without recurrent layers, so truncate is exact there (gemma4,
    # without recurrent layers, keeps only its windows' rows: not truncated either)
    assert registry.architecture(engine_cfg.arch).attention_only == (not any(engine_cfg.recurrent)
                                                                     and engine_cfg.arch != "gemma4")
    assert engine_cfg.n_kv_layers == sum(1 for i in range(engine_cfg.n_layer) if not engine_cfg.is_recurrent(i))


@pytest.mark.parametrize("stem", GEMMA4_STEMS)
def test_the_reference_reads_gemma4s_config(gemma4_models, stem):
    path = gemma4_models / f"{stem}.gguf"
    engine_cfg = registry.config_from_header(read_gguf_file(path))
    assert read_config(GGUFWeights(path)) == engine_cfg
    assert not registry.architecture("gemma4").attention_only  # its sliding-window rings cannot go back


def test_options_take_keywords_and_refuse_bad_values():
    opts = StoreOptions.make(StoreOptions(budget_bytes="min"), routing="per_layer", n_ctx=64)
    assert (opts.budget_bytes, opts.routing, opts.n_ctx, opts.kv_format) == ("min", "per_layer", 64, "f16")
    with pytest.raises(ValueError, match="routing 'gpu': use one of auto, early_stop, per_layer"):
        StoreOptions.make(routing="gpu")
    with pytest.raises(ValueError, match="lookahead_source 'x'"):
        StoreOptions.make(lookahead_source="x")
    with pytest.raises(ValueError, match="KV cache format 'f8'"):
        DecodeOptions.make(kv_format="f8")
    with pytest.raises(ValueError, match="prefill chunk 0"):
        DecodeOptions.make(prefill_chunk=0)
    with pytest.raises(TypeError, match="budget_bytes"):
        DecodeOptions.make(budget_bytes=1 << 30)  # a store option: Decoder.open keeps every expert resident
