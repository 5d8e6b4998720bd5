"""`diskformer bench --browser chromium` on the fixture model in Debian's Chromium (WebGPU on SwiftShader): the page
served by the product's server, the engine in its worker, the GGUF through Range into an OPFS store of a fresh
profile, the resident case (store engine, full pool) and a half pool; the JSON's shape and sane figures; and the
comparison's rows (lab/browser_bench/compare.py) of that result against itself."""
import json
import os
import shutil

import pytest

from lab import bench
from lab.browser_bench.compare import compare, figures
from lab.browser_bench.tab import find_chromium, TabBenchError


def chromium_or_skip() -> str:
    try:
        return find_chromium(None)
    except TabBenchError as exc:
        pytest.skip(str(exc))


def test_tab_bench_on_the_fixture(fixture_models, tmp_path, capsys):
    chromium = chromium_or_skip()
    model = fixture_models / "micro-qwen35moe.gguf"
    out = tmp_path / "tab.json"
    rc = bench.main(["--model", str(model), "--browser", "chromium", "--chromium", chromium, "--want", "any",
                     "--flag-sets", "default", "--budgets", "all,0.5", "--prompt", "6", "--decode", "3",
                     "--prefill-reps", "1", "--no-profile", "--stream-mb", "4", "--tab-profile",
                     str(tmp_path / "profile"), "--tab-port", "0", "--timeout", "300", "--json-out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed[-2000:]
    result = json.loads(out.read_text())
    raw, d = result["raw"], result["derived"]
    assert raw["runner"] == "chromium" and raw["resident_engine"] == "store_full_pool"
    b = raw["browser"]
    assert b["version"].startswith(("Chrome/", "HeadlessChrome/")) and b["flag_set"] == "default"
    assert "--enable-unsafe-webgpu" in b["flags"] and b["adapter"]["adapter"]["description"]
    assert raw["store"].startswith("opfs:bench-micro-qwen35moe-")
    ing = raw["ingest"]  # a fresh profile: the tab streamed the whole file into its store
    assert not ing["reused"] and ing["source_bytes"] == model.stat().st_size and ing["MBps"] > 0
    assert ing["store_bytes"] >= ing["source_bytes"] - 64 * 1024
    assert raw["model"]["arch"] == "qwen35moe" and raw["prefill"]["tokens"] == 6 and raw["decode"]["tokens"] == 3
    assert d["decode_tok_s"] > 0 and d["prefill_tok_s"] > 0 and raw["dispatches_per_token"] > 10
    assert d["syncs_per_token"]["decode"] == 1.0  # a full pool: the logits readback only
    half = d["budgets"]["50%"]
    assert half["decode_tok_s"] > 0 and 0 <= half["hit_rate"] <= 1
    assert half["read_MBps"] > 0 and half["upload_GBps"] > 0
    case = raw["streaming"][0]
    assert case["stages"]["reader"] == "ReaderPoolRecordReader" and case["stages"]["limits_GBps"]["read"] > 0
    assert "runner   Chromium tab:" in printed and "experts streamed from the store" in printed

    rows = {r["figure"]: r for r in compare(result, result)}
    assert rows["decode tok/s"]["ratio"] == pytest.approx(1.0) and rows["50%: decode tok/s"]["tab"] > 0
    assert rows["us/dispatch (replayed, no readback)"]["tab"] > 0
    assert set(figures(result)) >= {"prefill tok/s", "us/sync (token minus replay)", "50%: read limit GB/s"}
