"""The browser tier: runs the Playwright suite (tests/browser/*.spec.js) so that `pytest` runs everything.

Playwright starts `diskformer serve` itself (playwright.config.js) on the free port chosen here, drives the Debian
Chromium headless with WebGPU on SwiftShader, and its whole output is shown when it fails. The pure parts of the
boot self-test (py_engine/boot.py) are checked here under CPython as well.
"""
import asyncio
import os
import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from py_engine import boot

REPO = Path(__file__).resolve().parents[2]
# A guard against a hung browser or server only: Playwright's own per-test timeouts (playwright.config.js, and the
# specs' test.setTimeout) bound each test. engine.spec.js runs 12 tests (~7 min alone on 2 cores, 15 min beside
# other work, over 10 min on a slower CI machine), so the guard allows a whole spec of slow tests.
PLAYWRIGHT_TIMEOUT_S = 1800


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missing_prerequisites() -> list:
    missing = []
    if shutil.which("npx") is None:
        missing.append("npx (Node.js)")
    if not (REPO / "node_modules" / "@playwright" / "test").is_dir():
        missing.append("node_modules/@playwright/test")
    if not (REPO / "vendor" / "pyodide" / "pyodide.mjs").is_file():
        missing.append("vendor/pyodide")
    if not (REPO / ".venv" / "bin" / "diskformer").exists():
        missing.append(".venv/bin/diskformer")
    if not Path(os.environ.get("DISKFORMER_CHROMIUM", "/usr/bin/chromium")).exists():
        missing.append("chromium (Debian package; or set DISKFORMER_CHROMIUM)")
    return missing


SPECS = sorted(p.name for p in (REPO / "tests" / "browser").glob("*.spec.js"))


@pytest.mark.parametrize("spec", SPECS)
def test_playwright_spec(spec, fixture_models):
    missing = _missing_prerequisites()
    if missing:
        pytest.fail("browser tests need " + ", ".join(missing) + ": run scripts/setup.sh")
    env = {**os.environ, "CI": "1", "DISKFORMER_TEST_PORT": str(_free_port())}
    # --no: never let npx download anything; the local @playwright/test provides the `playwright` binary.
    proc = subprocess.run(["npx", "--no", "playwright", "test", f"tests/browser/{spec}"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=PLAYWRIGHT_TIMEOUT_S)
    print(proc.stdout)
    if proc.returncode != 0:
        pytest.fail(f"playwright test exited with {proc.returncode}:\n{proc.stdout}", pytrace=False)


# ---- the self-test's pure parts under CPython ----------------------------------------------------------------------

def test_selftest_values_are_exact_in_f32():
    x, y = boot.selftest_inputs()
    out, partials = boot.selftest_expected(boot.SELFTEST_A, x, y)
    assert len(out) == boot.SELFTEST_N and len(partials) == boot.SELFTEST_N // boot.WORKGROUP_SIZE
    for v in out + partials:
        assert struct.unpack("<f", struct.pack("<f", v))[0] == v
    # the sums really are per workgroup of 256, in order
    assert partials[0] == sum(out[:256]) and partials[-1] == sum(out[-256:])


def test_selftest_refuses_inputs_that_would_round():
    with pytest.raises(ValueError, match="not exact in f32"):
        boot.selftest_expected(0.1, [1.0] * 256, [0.0] * 256)


def test_compare_exact_reports_the_first_mismatch():
    assert boot.compare_exact([1.0, 2.0], [1.0, 2.0]) == (0, None)
    assert boot.compare_exact([1.0, 2.5, 3.0], [1.0, 2.0, 4.0]) == (2, {"index": 1, "got": 2.5, "want": 2.0})
    assert boot.compare_exact([1.0], [1.0, 2.0]) == (1, {"index": 1, "got": None, "want": 2.0})


def test_selftest_shader_is_found_and_matches_the_workgroup_size():
    source = boot.packaged_shader_source(boot.SELFTEST_SHADER)
    assert source is not None
    assert f"const WG: u32 = {boot.WORKGROUP_SIZE}u;" in source


def test_unknown_request_type_is_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match=r"no request type 'nope' \(it handles: boot, .*\bselftest\b"):
        asyncio.run(boot.handle_request("nope"))
