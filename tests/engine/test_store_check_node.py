"""`diskformer run --store` on a damaged store (Pyodide + Dawn in Node): a clear error naming the file and part,
exit 1, never different ids with exit 0; and on a sound store the record checks' cost is reported."""
import json
import shutil
import subprocess
import sys

import pytest

from diskformer.cli import main as cli


@pytest.fixture(scope="module")
def store(fixture_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run-store") / "tiny"
    assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(folder)]) == 0
    return folder


def run_store(folder, *extra):
    cmd = [sys.executable, "-m", "diskformer.cli", "run", "--store", str(folder), "--ids", "1,2,3", "--n", "3", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ 0x10]))


def test_run_store_checks_what_it_reads(store, tmp_path):
    clean = run_store(store, "--budget", "min")
    assert clean.returncode == 0, clean.stderr
    check = json.loads(clean.stdout)["stats"]["store_check"]
    assert check["records_checked"] > 0 and check["load_check_ms"] >= 0

    manifest = json.loads((store / "manifest.json").read_text())
    ex = manifest["layout"]["experts"]
    cases = {
        "experts.bin": lambda d: flip(d / "experts.bin", ex["planes"]["gate_codes"][0] + 11),
        "dense.bin": lambda d: flip(d / "dense.bin", manifest["layout"]["dense"]["planes"][2]["offset"] + 3),
    }
    for name, hurt in cases.items():
        folder = tmp_path / name
        shutil.copytree(store, folder)
        hurt(folder)
        res = run_store(folder, "--budget", "min")
        assert res.returncode == 1 and not res.stdout, (name, res.stdout[:200])
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert name in lines[0] and "is damaged" in lines[0] and "diskformer ingest" in lines[0], lines[0]
