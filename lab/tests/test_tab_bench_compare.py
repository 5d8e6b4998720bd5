"""bench-tab-vs-node's pieces under CPython: which options reach the Node run, and the rows it prints from two
bench results (per-dispatch and per-sync costs derived from the replay and the decode)."""
import pytest

from lab.browser_bench.compare import compare, figures, node_options, render


def result(decode_ms: float, replay_us: float, read_mbps: float, browser=None) -> dict:
    raw = {"replay_rate": {"total_us_per_token": replay_us, "cpu_us_per_token": replay_us / 10},
           "dispatches_per_token": 100, "load_ms": 2000.0, "device": {"description": "GPU"}}
    if browser:
        raw["browser"] = browser
    derived = {"decode_tok_s": 1e3 / decode_ms, "prefill_tok_s": 5000.0, "decode_ms_per_token": decode_ms,
               "syncs_per_token": {"decode": 1.0, "prefill": 0.01}, "ffi_calls_per_token": {"decode": 5.0},
               "stream_GBps": 1000.0,
               "budgets": {"25%": {"decode_tok_s": 50.0, "prefill_tok_s": 90.0, "hit_rate": 0.5,
                                   "syncs_per_token": {"decode": 9.0}, "read_MBps": read_mbps, "upload_GBps": 2.0,
                                   "stages": {"read": {"limit_GBps": 3.0}, "upload": {"limit_GBps": 4.0}},
                                   "stall_ms_per_token": 1.0}}}
    return {"raw": raw, "derived": derived}


def test_node_options_drop_the_tab_only_ones():
    argv = ["--model", "m.gguf", "--chromium", "c", "--want=nvidia", "--budgets", "all", "--tab-port", "9",
            "--flag-sets", "vulkan", "--tab-profile", "p", "--decode", "8"]
    assert node_options(argv) == ["--model", "m.gguf", "--budgets", "all", "--decode", "8"]


def test_rows_set_each_figure_beside_the_other():
    tab = result(2.0, 1500.0, 800.0, {"version": "Chrome/1", "flag_set": "vulkan", "flags": []})
    node = result(1.0, 900.0, 1600.0)
    rows = {r["figure"]: r for r in compare(tab, node)}
    assert rows["decode tok/s"]["ratio"] == pytest.approx(0.5)
    assert rows["us/dispatch (replayed, no readback)"]["tab"] == pytest.approx(15.0)
    assert rows["us/sync (token minus replay)"]["tab"] == pytest.approx(500.0)  # 2,000 us - 1,500 us, one sync
    assert rows["us/sync (token minus replay)"]["node"] == pytest.approx(100.0)
    assert rows["25%: store read MB/s (serial)"]["ratio"] == pytest.approx(0.5)
    assert "GPU busy ms/token" not in rows  # neither run profiled
    assert set(figures(node)) == set(figures(tab))
    text = render(list(rows.values()), tab, node)
    assert "| decode tok/s | 500 | 1,000 | 0.50 |" in text and "Chrome/1" in text
