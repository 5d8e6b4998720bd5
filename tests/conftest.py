"""Shared pytest fixtures: where the repo, the shared folder and the generated fixture models are."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the shared folder sits beside the repository; DISKFORMER_SHARED names another place for a checkout elsewhere
SHARED = Path(os.environ.get("DISKFORMER_SHARED") or REPO.parent / "shared")
FIXTURES = SHARED / "fixtures"
REFS = FIXTURES / "refs"
MODELS_DIR = (REPO / "fixtures").resolve() / "models"  # a linked folder: Node mounts the real path
GEMMA4_FIXTURES = SHARED / "fixtures-gemma4"
GEMMA4_REFS = GEMMA4_FIXTURES / "refs"
# generated gemma4 GGUFs; DISKFORMER_GEMMA4_MODELS names another (writable) folder for them
GEMMA4_MODELS_DIR = Path(os.environ.get("DISKFORMER_GEMMA4_MODELS") or REPO / "fixtures" / "models-gemma4")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _expected_sums(fixtures: Path = FIXTURES) -> dict:
    lines = (fixtures / "models" / "SHA256SUMS").read_text().split("\n")
    return {name: digest for digest, name in (l.split() for l in lines if l.strip())}


def ensure_fixture_models(fixtures: Path = FIXTURES, models_dir: Path = MODELS_DIR) -> Path:
    """Regenerate the fixture GGUFs byte for byte (shared/ is read-only) into an ignored folder of the repo."""
    want = _expected_sums(fixtures)
    missing = [n for n in want if not (models_dir / n).exists()]
    if missing:
        subprocess.run([sys.executable, str(fixtures / "make_models.py"), str(models_dir)], check=True)
    for name, digest in want.items():
        if _sha256(models_dir / name) != digest:
            raise RuntimeError(f"fixture model {name} does not match SHA256SUMS; delete {models_dir} and re-run")
    return models_dir


@pytest.fixture(scope="session")
def fixture_models() -> Path:
    return ensure_fixture_models()


@pytest.fixture(scope="session")
def gemma4_models() -> Path:
    """The gemma4 fixture GGUFs (../shared/fixtures-gemma4), generated on first use."""
    return ensure_fixture_models(GEMMA4_FIXTURES, GEMMA4_MODELS_DIR)


@pytest.fixture(scope="session")
def refs_dir() -> Path:
    return REFS


def pytest_collection_modifyitems(config, items):
    """Every *_node.py test runs the engine in Node (Pyodide + Dawn): one skip for all of them where Node is missing,
    instead of a preamble in each file."""
    if shutil.which("node") is not None:
        return
    missing = pytest.mark.skip(reason="node is not installed (the Pyodide + Dawn tests run in Node)")
    for item in items:
        if item.path.name.endswith("_node.py"):
            item.add_marker(missing)
