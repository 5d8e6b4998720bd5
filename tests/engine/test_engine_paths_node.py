"""Routing paths give the same logits, the token loop's counted costs, and the engine's refusals (Pyodide + Dawn on
lavapipe, one Node process for the runs).

- GPU routing on and off: a store run with every expert resident routes on the GPU (one submit per token); with
  routing "per_layer" (`diskformer run --store --no-gpu-routing`) the CPU reads each layer's expert ids back and
  submits layer by layer; with the smallest pool every layer pages experts in. All three give the GGUF engine's
  logits.
- Counted costs, tiny-qwen35moe from its GGUF (every expert resident): at most 1 CPU<->GPU sync per decoded token
  and fewer than 10 JS calls per layer per decoded token, from the counters the decoder keeps (Decoder.stats).
- Refusals: a GGUF of architecture 'llama', one with a Q4_K tensor (refused before the GPU is touched, with the
  reason), and a position past n_ctx ("context is full"), from the engine and through `diskformer run`.
"""
import asyncio
import json

import numpy as np
import pytest

from diskformer.engine_run import main as run_main
from diskformer.node_engine import run_in_node
from diskformer.reference import protocol
from gguf_craft import craft_from_header
from py_engine.gguf import read_gguf_file
from py_engine.gguf.types import GGMLType
from py_engine.store import ingest
from py_engine.store.local import DirectoryStorage, FileSource


STORE_MODELS = ["micro-qwen3moe", "micro-qwen35moe"]
VARIANTS = {"gpu": {}, "cpu": {"routing": "per_layer"}, "min": {"budget": "min", "routing": "per_layer"}}
LOGIT_TOL = 1e-4  # the same kernels over the same bytes
COUNTED = "tiny-qwen35moe"
MAX_JS_CALLS_PER_LAYER = 10


@pytest.fixture(scope="module")
def stores(fixture_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("path_stores")
    storage = DirectoryStorage(root)
    for stem in STORE_MODELS:
        src = FileSource(fixture_models / f"{stem}.gguf")
        try:
            asyncio.run(ingest(src, storage.sink(stem)))
        finally:
            src.close()
    return root


def _run(p, out, tag):
    return {"ids": p["prompt_ids"], "teacher_force": p["greedy_ids"][:-1], "top": 5,
            "logits_out": str(out / f"{tag}.f32")}


@pytest.fixture(scope="module")
def runs(stores, fixture_models, refs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("path_logits")
    jobs, names = [], []
    for stem in STORE_MODELS:
        p = protocol.load_refs(stem, refs_dir)["prompts"][0]
        jobs.append({"model": str(fixture_models / f"{stem}.gguf"), "runs": [_run(p, out, f"{stem}.gguf")]})
        names.append((stem, "gguf"))
        for tag, extra in VARIANTS.items():
            jobs.append({"store": str(stores / stem), "runs": [_run(p, out, f"{stem}.{tag}")], **extra})
            names.append((stem, tag))
    p = protocol.load_refs(COUNTED, refs_dir)["prompts"][0]
    jobs.append({"model": str(fixture_models / f"{COUNTED}.gguf"), "runs": [_run(p, out, COUNTED)]})
    names.append((COUNTED, "gguf"))
    # the token submitted in pieces of 7 ops (what a GPU does to overlap encoding with execution: gpu/device.py)
    jobs.append({"model": str(fixture_models / f"{COUNTED}.gguf"), "runs": [_run(p, out, COUNTED + ".split")],
                 "ops_per_submit": 7})
    names.append((COUNTED, "split"))
    # and with a first piece of 2 ops (what the GPU runs while the rest is encoded)
    jobs.append({"model": str(fixture_models / f"{COUNTED}.gguf"), "runs": [_run(p, out, COUNTED + ".lead")],
                 "ops_per_submit": 7, "lead_ops": 2})
    names.append((COUNTED, "lead"))
    result = run_in_node("py_engine.engine.node_entry:run", {"jobs": jobs}, mounts=[stores, fixture_models, out],
                         timeout=300)
    return out, dict(zip(names, result["jobs"]))


@pytest.mark.parametrize("stem", STORE_MODELS)
def test_gpu_routing_on_and_off_give_the_same_logits(runs, stem):
    out, jobs = runs
    base = np.fromfile(out / f"{stem}.gguf.f32", dtype="<f4")
    for tag in VARIANTS:
        got = np.fromfile(out / f"{stem}.{tag}.f32", dtype="<f4")
        assert got.shape == base.shape and np.abs(got - base).max() <= LOGIT_TOL, (stem, tag)
    gpu, cpu = jobs[(stem, "gpu")], jobs[(stem, "cpu")]
    assert gpu["stats"]["routing"] == "gpu" and cpu["stats"]["routing"] == "per_layer"
    assert cpu["stats"]["mode"] == "full" and cpu["stats"]["streamer"]["misses"] == gpu["stats"]["streamer"]["misses"]
    t_gpu, t_cpu = gpu["runs"][0]["timing"], cpu["runs"][0]["timing"]
    assert t_gpu["syncs_per_decoded_token"] == 1
    assert t_cpu["syncs_per_decoded_token"] > 1  # a readback per MoE layer plus the logits


def test_split_submits_give_the_same_logits(runs):
    """Submitting a token's replay (and the prefill chunks') in pieces changes nothing."""
    out, _ = runs
    base = np.fromfile(out / f"{COUNTED}.f32", dtype="<f4")
    for tag in ("split", "lead"):
        split = np.fromfile(out / f"{COUNTED}.{tag}.f32", dtype="<f4")
        assert split.shape == base.shape and np.abs(split - base).max() <= LOGIT_TOL, tag


def test_split_bounds_cover_the_list_in_order():
    from py_engine.gpu.pieces import split_bounds
    assert split_bounds(56, 0) == [(0, 56)]
    assert split_bounds(56, 0, 4) == [(0, 56)]  # one submit: no lead
    assert split_bounds(56, 24) == split_bounds(56, 24, 0) == [(0, 24), (24, 48), (48, 56)]
    assert split_bounds(56, 24, 4) == [(0, 4), (4, 28), (28, 52), (52, 56)]
    assert split_bounds(25, 24, 4) == [(0, 4), (4, 25)]
    assert split_bounds(24, 24, 4) == [(0, 24)]  # a list that is not cut keeps its one submit
    assert split_bounds(10, 24, 4) == [(0, 10)]
    assert split_bounds(48, 24, 30) == [(0, 24), (24, 48)]  # a lead longer than a piece is one piece


def test_counted_costs_per_decoded_token(runs, capsys):
    _, jobs = runs
    job = jobs[(COUNTED, "gguf")]
    t = job["runs"][0]["timing"]
    with capsys.disabled():
        print(f"\n{COUNTED} (every expert resident): {t['syncs_per_decoded_token']} syncs, "
              f"{t['js_calls_per_decoded_token']} JS calls per decoded token "
              f"({t['js_calls_per_layer_per_token']:.2f} per layer), {job['stats']['dispatches']} dispatches")
    assert t["decode_steps"] >= 8
    assert t["syncs_per_decoded_token"] <= 1
    assert 0 < t["js_calls_per_layer_per_token"] < MAX_JS_CALLS_PER_LAYER


def test_no_gpu_routing_flag(stores, runs, tmp_path, capsys):
    """`diskformer run --store DIR --no-gpu-routing` takes the per-layer CPU path and prints the GPU path's ids;
    with a GGUF the flag is refused (a GGUF always routes on the GPU)."""
    out, jobs = runs
    stem = "micro-qwen3moe"
    p = protocol.load_refs(stem, protocol.DEFAULT_REFS_DIR)["prompts"][0]
    ids = ",".join(map(str, p["prompt_ids"]))
    assert run_main(["--store", str(stores / stem), "--no-gpu-routing", "--ids", ids, "--n", "4"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["stats"]["routing"] == "per_layer" and res["stats"]["syncs_per_decoded_token"] > 1
    gpu_ids = jobs[(stem, "gpu")]["runs"][0]["greedy_ids"]
    assert res["greedy_ids"][0] == gpu_ids[0]
    assert run_main(["x.gguf", "--no-gpu-routing", "--ids", "1"]) == 2
    assert "--no-gpu-routing applies to --store runs" in capsys.readouterr().err


# ---- refusals ---------------------------------------------------------------------------------------------------
def _variant(fixture_models, folder, name, edit):
    """micro-qwen3moe.gguf with its header edited (the data section kept as is)."""
    src = fixture_models / "micro-qwen3moe.gguf"
    header = read_gguf_file(src)
    c = craft_from_header(header)
    edit(c)
    c.data = src.read_bytes()[header.data_offset:]
    path = folder / name
    path.write_bytes(c.build())
    return path


def _llama(c):
    c.kvs = [(k, s, "llama" if k == "general.architecture" else v) for k, s, v in c.kvs]


def _q4k(c):
    # output.weight as Q4_K over 256-wide rows (a shape Q4_K allows; the data section still holds the bytes)
    c.tensors = [(n, (256, 230), int(GGMLType.Q4_K), o) if n == "output.weight" else (n, d, t, o)
                 for n, d, t, o in c.tensors]


REFUSE = """
from py_engine.engine.decoder import ContextFull, Decoder

async def main(args):
    out = {}
    for name, path in args["files"].items():
        try:
            await Decoder.open(path)
            out[name] = None
        except Exception as e:
            out[name] = [type(e).__name__, str(e)]
    dec = await Decoder.open(args["model"], n_ctx=4)
    try:
        dec.feed([1, 2, 3])
        await dec.step(4)  # position 3: the last one
        try:
            await dec.step(5)
            out["context"] = None
        except ContextFull as e:
            out["context"] = [type(e).__name__, str(e)]
    finally:
        dec.release()
    return out
"""


def test_refusals(fixture_models, tmp_path, capsys):
    files = {"llama": _variant(fixture_models, tmp_path, "llama.gguf", _llama),
             "q4k": _variant(fixture_models, tmp_path, "q4k.gguf", _q4k)}
    res = run_in_node(REFUSE, {"files": {k: str(v) for k, v in files.items()},
                               "model": str(fixture_models / "micro-qwen3moe.gguf")},
                      mounts=[tmp_path, fixture_models], timeout=120)
    assert res["llama"][0] == "UnsupportedGGUF"
    assert "unsupported architecture 'llama': the engine runs qwen3moe, qwen35moe" in res["llama"][1]
    assert res["q4k"][0] == "UnsupportedGGUF"
    assert "tensor 'output.weight' has type Q4_K, which the engine does not support (it supports F32, Q8_0)" \
        in res["q4k"][1]
    assert res["context"] == ["ContextFull", "context is full: 4 + 1 tokens > 4 positions"]
    # and through the command line: exit 1, the reason on stderr
    assert run_main([str(files["llama"]), "--ids", "1,2"]) == 1
    assert "unsupported architecture 'llama'" in capsys.readouterr().err
