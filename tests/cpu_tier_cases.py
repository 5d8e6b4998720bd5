"""Shared by the CPU expert tier's tests: expert records from a real store of a fixture model, numpy's models of the
FFN they compute, and the fixtures the tests take."""
import asyncio
from pathlib import Path

import numpy as np
import pytest

from diskformer.node_engine import node_executable
from diskformer.reference.layers import fake_quantize_q8_0, gelu_tanh, silu
from diskformer.reference.weights import GGUFWeights
from py_engine.store.ingest import ingest
from py_engine.store.layout import EXPERTS_FILE
from py_engine.store.local import FileSource, MemoryStorage

ROOT = Path(__file__).resolve().parent.parent
STEMS = ("micro-qwen35moe-f32", "micro-qwen3moe-f32", "micro-qwen35moe", "tiny-qwen3moe")


def store_of(gguf: Path):
    """(expert layout, experts.bin bytes) of the model ingested into an in-memory store."""
    storage = MemoryStorage()
    sink = storage.sink("m")
    manifest = asyncio.run(ingest(FileSource(gguf), sink))
    return manifest["layout"]["experts"], bytes(storage.folders["m"][EXPERTS_FILE])


def record(layout, experts_bin, layer, expert):
    at = (layer * layout["n_experts"] + expert) * layout["record_size"]
    return experts_bin[at:at + layout["record_size"]]


class ExpertMath:
    """One layer's expert matrices, dequantised, and the FFN computed two ways. A fused gate|up tensor (gemma4's
    ffn_gate_up_exps, gate rows first) is cut into its halves; gemma4's experts take GELU (tanh form) where the
    Qwen ones take SiLU. The per-expert down scale is not part of the FFN here (the caller's routing weight holds it)."""

    def __init__(self, gguf: Path, layer: int):
        w = GGUFWeights(gguf)
        fused = f"blk.{layer}.ffn_gate_up_exps.weight"
        if w.has(fused):
            gate_up = w.tensor(fused, np.float64)
            f = gate_up.shape[1] // 2
            self.gate, self.up, self.act = gate_up[:, :f], gate_up[:, f:], gelu_tanh
        else:
            self.gate = w.tensor(f"blk.{layer}.ffn_gate_exps.weight", np.float64)
            self.up = w.tensor(f"blk.{layer}.ffn_up_exps.weight", np.float64)
            self.act = silu
        self.down = w.tensor(f"blk.{layer}.ffn_down_exps.weight", np.float64)

    def plain(self, e, x):
        """down(act(gate x) * up x), float64."""
        x = np.asarray(x, np.float64)
        return self.down[e] @ (self.act(self.gate[e] @ x) * (self.up[e] @ x))

    def act_q8(self, e, x):
        """The kernel's math for Q8_0 (and Q4_0) weights: x quantised before gate/up, f32 products and SwiGLU, the SwiGLU
        output quantised before down."""
        xq = fake_quantize_q8_0(np.asarray(x, np.float32)).astype(np.float64)
        g = (self.gate[e] @ xq).astype(np.float32)
        u = (self.up[e] @ xq).astype(np.float32)
        a = fake_quantize_q8_0(self.act(g) * u).astype(np.float64)
        return self.down[e] @ a


def rel_err(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def inputs(rng, n_tokens, n_embd):
    # RMS-normed activations, scaled by a norm weight near 1: the expert FFN's input in the models
    x = rng.standard_normal((n_tokens, n_embd)).astype(np.float32)
    return x * rng.uniform(0.5, 1.5, n_embd).astype(np.float32)


def expected(math_fn, experts, req):
    ys = np.stack([math_fn(experts[s], req["x"][t]) for s, t in zip(req["slots"], req["tokens"])])
    out = np.zeros((max(req["tokens"]) + 1, ys.shape[1]))
    for j, t in enumerate(req["tokens"]):
        out[t] += req["weights"][j] * ys[j]
    return ys, out


@pytest.fixture(scope="module")
def models(request):
    """The fixture models' folder: the generated one when present, else made by conftest's fixture_models."""
    here = ROOT / "fixtures" / "models"
    if all((here / f"{s}.gguf").exists() for s in STEMS):
        return here
    return request.getfixturevalue("fixture_models")


@pytest.fixture(scope="module")
def node_ok():
    try:
        node_executable()
    except Exception as e:  # noqa: BLE001 - the message says what is missing
        pytest.skip(str(e))
