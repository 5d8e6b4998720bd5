"""lab/browser_gpu (WebGPU's basic costs in a headless Chromium tab beside Node + Dawn, run on the lent GPU machine)
in its --small form on this machine's adapters, so it cannot rot: Node's measurements alone, then the tab's beside
them through Debian's Chromium (the DevTools protocol over a pipe, the page served on 127.0.0.1), each with its
readback round trips having seen every dispatch before them.
"""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "lab/browser_gpu/tab_vs_node.mjs"
CHROMIUM = os.environ.get("DISKFORMER_CHROMIUM", "/usr/bin/chromium")
FIGURES = ("dispatch_empty_us", "dispatch_chained_us", "dispatch_rebind_chained_us", "encode_us", "submit_wait_us",
           "readback_4B_us", "write_buffer_1MiB_GBps", "write_buffer_64MiB_GBps", "read_back_64MiB_GBps",
           "stream_read_bytes")


def _check(result: dict) -> None:
    assert result["checks"] == {"readback": "ok", "device_errors": []}, result["checks"]
    for name in FIGURES:
        assert result["figures"][name] > 0, (name, result["figures"])
    assert "isFallbackAdapter" in result["adapter"] and result["limits"]["maxBufferSize"] > 0


def test_node_costs():
    res = subprocess.run(["node", SCRIPT, "--node-only", "--small"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    _check(json.loads(res.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (or set DISKFORMER_CHROMIUM)")
def test_tab_beside_node(tmp_path):
    out = tmp_path / "costs.json"
    res = subprocess.run(["node", SCRIPT, "--chromium", CHROMIUM, "--want", "any", "--small", "--flag-sets",
                          "default", "--logs", str(tmp_path / "logs"), "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    report = json.loads(out.read_text())
    _check(report["tab"])
    _check(report["node"])
    assert re.fullmatch(r"(Headless)?Chrome/[\d.]+", report["chromium_version"]), report["chromium_version"]
    assert report["ratios"]["readback_4B_us"] > 0 and "| readback_4B_us |" in res.stdout
    assert [a["name"] for a in report["attempts"]] == ["default"]
