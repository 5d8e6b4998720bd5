"""`diskformer gate`: the chat page in headless Chromium (WebGPU on SwiftShader) against llama.cpp's greedy reply.

Three real runs, one per exit status: 0 for the checked-in fixture refs (f32 KV cache: all 32 steps compared), 1 for the same refs with one reply id changed at a step where llama.cpp's margin is large
(first 8 steps only, --max-steps), 2 for a site where
nothing listens. The pass rule and the refs format are checked on their own, without a browser.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from diskformer.gate.compare import STOP, compare_reply
from diskformer.gate.make_refs import build, dumps
from diskformer.gate.refs import RefsError, load_refs, parse_refs

REPO = Path(__file__).resolve().parents[2]
GATE = REPO / "tests" / "gate"
REFS = GATE / "micro-qwen3moe-f32.gate.json"  # the page's default f16 KV cache: tolerance 0.02
REFS_KV32 = GATE / "micro-qwen3moe-f32.kv-f32.gate.json"  # f32 KV cache: tolerance 0.002, every step compared
GEMMA4_REFS_KV32 = GATE / "micro-gemma4-f32.kv-f32.gate.json"  # gemma4, exact-GELU margins
STEPS = 8


def _gate(*args, timeout=240):
    proc = subprocess.run([sys.executable, "-m", "diskformer.cli", "gate", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def _require_browser():
    missing = [what for what, ok in [
        ("node", shutil.which("node") is not None),
        ("node_modules/@playwright/test", (REPO / "node_modules" / "@playwright" / "test").is_dir()),
        ("vendor/pyodide", (REPO / "vendor" / "pyodide" / "pyodide.mjs").is_file()),
        ("chromium", Path(os.environ.get("DISKFORMER_CHROMIUM", "/usr/bin/chromium")).exists()),
    ] if not ok]
    if missing:
        pytest.fail("the gate needs " + ", ".join(missing) + ": run scripts/setup.sh")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the pass rule and the refs format ---------------------------------------------------------------------------
def _conv(ids, margins, stop=False):
    return parse_refs({"model": {"name": "m.gguf"}, "tolerance": {"argmax_margin": 0.5},
                       "conversations": [{"messages": [{"role": "user", "content": "hi"}], "reply_ids": ids,
                                          "reply_stop": stop, "margins": margins}]}).conversations[0]


def test_reply_must_equal_until_the_first_near_tie():
    c = _conv([5, 6, 7, 8], [2.0, 1.0, 0.1, 3.0])
    assert compare_reply(c, [5, 6, 9, 9], "length", 0.5).passed  # parts at the near tie: fine
    v = compare_reply(c, [5, 9, 7, 8], "length", 0.5)
    assert not v.passed and (v.step, v.expected, v.got) == (1, 6, 9)
    v = compare_reply(c, [5], "stop", 0.5)  # stopped where llama.cpp went on
    assert not v.passed and (v.step, v.got) == (1, STOP)
    assert compare_reply(c, [5, 6, 7, 8], "length", 0.0).checked == 4


def test_end_of_generation_is_a_step():
    c = _conv([5], [2.0, 2.0], stop=True)
    assert compare_reply(c, [5], "stop", 0.5).passed
    v = compare_reply(c, [5, 4], "length", 0.5)
    assert not v.passed and (v.expected, v.got) == (STOP, 4)
    assert c.truncated(1).steps == 1 and not c.truncated(1).reply_stop


def test_malformed_refs_are_refused(tmp_path):
    good = json.loads(REFS.read_text())
    bad = json.loads(REFS.read_text())
    bad["conversations"][0]["margins"].pop()
    with pytest.raises(RefsError, match="margins"):
        parse_refs(bad)
    p = tmp_path / "x.json"
    p.write_text("{")
    with pytest.raises(RefsError, match="not JSON"):
        load_refs(p)
    assert parse_refs(good).argmax_margin == 0.02


@pytest.mark.parametrize("stem,kv,path", [("micro-qwen3moe-f32", "f16", REFS), ("micro-qwen3moe-f32", "f32", REFS_KV32),
                                          ("micro-qwen3moe", "f16", GATE / "micro-qwen3moe.gate.json")])
def test_checked_in_refs_are_what_make_refs_builds(fixture_models, stem, kv, path):
    """The chat template renders llama.cpp's prompt ids exactly (make_refs checks it) and the files are current."""
    built = build(stem, REPO.parent / "shared" / "fixtures", fixture_models, kv)
    assert dumps(built) == path.read_text(encoding="utf-8")


def test_checked_in_gemma4_refs_are_what_make_refs_builds(gemma4_models):
    built = build("micro-gemma4-f32", REPO.parent / "shared" / "fixtures-gemma4", gemma4_models, "f32")
    assert built["model"]["load_options"] == {"kv": "f32"}
    assert dumps(built) == GEMMA4_REFS_KV32.read_text(encoding="utf-8")


def test_make_refs_refuses_a_prompt_the_template_cannot_render(fixture_models):
    with pytest.raises(SystemExit, match="does not render prompt 1"):
        build("micro-qwen35moe", REPO.parent / "shared" / "fixtures", fixture_models, "f16")


# --- real runs in Chromium ---------------------------------------------------------------------------------------
def test_gate_passes_on_fixture_refs(fixture_models):
    _require_browser()
    rc, out = _gate(REFS_KV32, "--models", fixture_models)
    assert rc == 0, out
    assert "PASS: all 32 steps equal llama.cpp's" in out, out


def test_gate_passes_on_gemma4_fixture_refs(gemma4_models):
    """The chat page runs gemma4 (micro-gemma4-f32, f32 KV cache, by the page's default load path) and replies as
    llama.cpp's exact-GELU build does up to the first margin under the limit."""
    _require_browser()
    rc, out = _gate(GEMMA4_REFS_KV32, "--models", gemma4_models.resolve())
    assert rc == 0, out
    assert "(gemma4, KV f32)" in out and "32 leading steps agree" in out, out


def test_gate_fails_on_an_altered_reply(fixture_models, tmp_path):
    _require_browser()
    data = json.loads(REFS.read_text())
    conv = data["conversations"][0]
    step = max(range(STEPS), key=lambda s: conv["margins"][s])  # where llama.cpp is surest
    assert conv["margins"][step] > 1.0
    conv["reply_ids"][step] = (conv["reply_ids"][step] + 1) % 400
    altered = tmp_path / "altered.gate.json"
    altered.write_text(json.dumps(data))
    rc, out = _gate(altered, "--models", fixture_models, "--max-steps", STEPS)
    assert rc == 1, out
    assert f"the replies part at step {step}" in out, out
    assert f"expected {conv['reply_ids'][step]} " in out, out


def test_gate_times_out_on_an_unreachable_site():
    _require_browser()
    rc, out = _gate(REFS, "--site", f"http://127.0.0.1:{_free_port()}/", "--timeout", 15, timeout=90)
    assert rc == 2, out
    assert "could not run" in out or "timed out" in out, out


def test_gate_passes_on_the_demo_model_against_llama_cpp():
    """tests/gate/demo-qwen35moe.gate.json was made by llama.cpp itself (diskformer.gate.llama_refs with
    llama-cpp-python 0.3.36) on the shipped demo model: the chat page must give the same greedy replies."""
    _require_browser()
    rc, out = _gate(REPO / "tests" / "gate" / "demo-qwen35moe.gate.json")
    assert rc == 0, out
    assert "5 of 5 conversation(s) pass" in out, out
    # the replies whose margins all clear the Q8_0 tolerance (os.path.join's, the random module's) must match
    # llama.cpp token for token
    assert "PASS: all 52 steps equal llama.cpp's" in out, out
    assert "PASS: all 7 steps equal llama.cpp's" in out, out
