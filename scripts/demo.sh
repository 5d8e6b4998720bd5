#!/usr/bin/env bash
# Set up everything (idempotent) and serve the chat page on the built-in demo model, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/diskformer serve "$@"
