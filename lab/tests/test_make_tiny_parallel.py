"""lab/gpu_probes/make_tiny_parallel.py writes make_tiny.py's file byte for byte (the GPU machine's set-up relies
on it)."""
import subprocess
import sys

import pytest

from conftest import REPO, SHARED

MAKE_TINY = SHARED / "tools" / "make_tiny.py"
PARALLEL = REPO / "lab" / "gpu_probes" / "make_tiny_parallel.py"


@pytest.mark.parametrize("args", [["--arch", "qwen35moe", "--preset", "micro", "--layers", "4", "--mtp"],
                                  ["--arch", "gemma4", "--preset", "micro"]], ids=["qwen35moe", "gemma4"])
def test_parallel_file_is_make_tinys_byte_for_byte(tmp_path, args):
    serial, parallel = tmp_path / "serial.gguf", tmp_path / "parallel.gguf"
    subprocess.run([sys.executable, str(MAKE_TINY), *args, "--out", str(serial)], check=True, capture_output=True)
    done = subprocess.run([sys.executable, str(PARALLEL), str(MAKE_TINY),
                           "--jobs", "3", "--", *args, "--out", str(parallel)],
                          check=True, capture_output=True, text=True)
    assert "tensors" in done.stderr
    assert parallel.read_bytes() == serial.read_bytes()


def test_missing_make_tiny_is_said(tmp_path):
    done = subprocess.run([sys.executable, str(PARALLEL), str(tmp_path / "nope.py"),
                           "--", "--arch", "qwen3moe", "--out", str(tmp_path / "x.gguf")],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "no such file" in done.stderr
