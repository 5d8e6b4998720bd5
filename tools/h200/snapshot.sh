#!/usr/bin/env bash
# Here: the engine as of a commit, packed for an A/B run on the GPU machine (ab.sh):
#   bash tools/h200/snapshot.sh NAME [COMMIT]      -> .gpu-carry/NAME.tar.gz (COMMIT defaults to HEAD)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu-carry
git archive --format=tar "${2:-HEAD}" diskformer py_engine shaders pyproject.toml | gzip > ".gpu-carry/$1.tar.gz"
echo ".gpu-carry/$1.tar.gz: $(git rev-parse --short "${2:-HEAD}")"
