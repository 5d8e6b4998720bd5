#!/usr/bin/env bash
# Set up everything (idempotent) and run every test: pytest, which also drives the Playwright browser tests and the
# Pyodide + Dawn (lavapipe) engine tests. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] regenerating fixture models (byte-identical, checked against SHA256SUMS)"
.venv/bin/python ../shared/fixtures/make_models.py fixtures/models
exec .venv/bin/python -m pytest "$@"
