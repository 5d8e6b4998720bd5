"""Shared pytest fixtures: where the repo, the shared folder and the generated fixture models are."""
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures"
REFS = FIXTURES / "refs"
MODELS_DIR = (REPO / "fixtures").resolve() / "models"  # a linked folder: Node mounts the real path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _expected_sums() -> dict:
    lines = (FIXTURES / "models" / "SHA256SUMS").read_text().split("\n")
    return {name: digest for digest, name in (l.split() for l in lines if l.strip())}


def ensure_fixture_models() -> Path:
    """Regenerate the fixture GGUFs byte for byte (shared/ is read-only) into an ignored folder of the repo."""
    want = _expected_sums()
    missing = [n for n in want if not (MODELS_DIR / n).exists()]
    if missing:
        subprocess.run([sys.executable, str(FIXTURES / "make_models.py"), str(MODELS_DIR)], check=True)
    for name, digest in want.items():
        if _sha256(MODELS_DIR / name) != digest:
            raise RuntimeError(f"fixture model {name} does not match SHA256SUMS; delete {MODELS_DIR} and re-run")
    return MODELS_DIR


@pytest.fixture(scope="session")
def fixture_models() -> Path:
    return ensure_fixture_models()


@pytest.fixture(scope="session")
def refs_dir() -> Path:
    return REFS
